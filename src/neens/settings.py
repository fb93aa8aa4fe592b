"""The one place Neens reads its configuration: environment variables prefixed `NEENS_`.

Nothing reads the environment at import time; `Settings()` is built by the CLI or a test and
handed to `create_app`. Every field is listed in docs/configuration.md (a test keeps them in step).
"""

from __future__ import annotations

from pathlib import Path

from neens_eval.errors import ConfigError
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEENS_", extra="ignore")

    home: Path = Path(".neens")
    """Directory for local state; the embedded SQLite database lives here as `neens.db`."""

    database_url: str | None = None
    """SQLAlchemy URL of the database. Unset means SQLite at `<home>/neens.db`. For PostgreSQL use
    `postgresql+psycopg://user@host:5432/dbname`."""

    host: str = "127.0.0.1"
    """Interface `neens serve` binds to. Loopback by default; set `0.0.0.0` to accept others."""

    port: int = Field(default=8000, ge=1, le=65535)
    """TCP port `neens serve` listens on."""

    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest request body accepted, after gzip decompression (413 above it)."""

    migrate_on_start: bool = True
    """Apply pending database migrations when the server starts."""

    workers_in_process: bool = True
    """Run the job workers inside `neens serve`. Set false when `neens worker` processes (on a
    shared PostgreSQL database) do the work instead."""

    worker_concurrency: int = Field(default=16, ge=1, le=256)
    """Jobs one worker loop runs at the same time. A model sweep runs one push job per arm at
    once, so keep it at least the number of arms of the sweeps you run (plus a few for scoring
    and notifications)."""

    worker_lease_s: float = Field(default=5.0, ge=1, le=600)
    """Seconds a claimed job stays a worker's without renewal. Workers renew it five times per
    lease, so a worker that crashed has its jobs taken over by another within this time. Raise it
    only if the database is so loaded that a renewal can be this late."""

    jobs_retention_days: float = Field(default=7.0, gt=0, le=3650)
    """Days a finished job's row (done or failed, with its last error) stays in the jobs table;
    workers delete older ones about once an hour, so the table does not grow without end."""

    push_concurrency: int = Field(default=32, ge=1, le=1024)
    """Calls in flight at once to one agent endpoint during a push-mode run. A model sweep
    shares this many among its arms (`arm_shares`), so a sweep makes no more calls at once than
    one run does."""

    public_url: str | None = None
    """The address people reach this server at (e.g. `https://neens.example.com`), used in the
    share links it makes; default: the address the request that made the link came to."""

    sweep_max_arms: int = Field(default=8, ge=2, le=64)
    """Most arms one model sweep may have."""

    sweep_max_pass_k: int = Field(default=10, ge=1, le=100)
    """Largest k (runs per arm) of a model sweep."""

    sweep_max_calls: int = Field(default=100_000, ge=1)
    """Most agent calls one model sweep may plan: arms × k × items."""

    judge_concurrency: int = Field(default=8, ge=1, le=256)
    """LLM judge calls in flight at once for one pre-prod run: in a push-mode run while its
    answers are still being captured, and in a scoring pass. Built-in checks are not limited:
    they score each answer in the write that stores it."""

    push_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """Longest a push-mode call may take, end to end, before its item errors."""

    secret_keys: str | None = None
    """Keys that encrypt stored secrets (agent-connection headers, judge API keys, sink
    headers), comma-separated: the first encrypts, all decrypt. Unset on SQLite means a key
    generated in `<home>/secret.key`; required on PostgreSQL."""

    allow_private_destinations: bool = True
    """Let agent connections, LLM judges and notification sinks reach loopback and private
    addresses (a local agent on 127.0.0.1, a service on 10.x). Turn off on a shared server.
    Link-local and cloud metadata addresses are refused either way."""

    def resolved_database_url(self) -> str:
        """The database URL in use: the configured one, or the embedded SQLite file in `home`,
        which is created when missing. The directory of a configured SQLite file never is: a
        typo in it would start an empty store."""
        if self.database_url:
            return self.database_url
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the directory NEENS_HOME={self.home}: {exc.strerror} "
                f"({exc.filename}); set NEENS_HOME to a directory Neens may create, or give "
                "--database-url"
            ) from None
        return f"sqlite+aiosqlite:///{(self.home / 'neens.db').resolve()}"
