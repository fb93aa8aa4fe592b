"""`neens demo`: the worked example, served from a fresh SQLite data directory.

One process runs everything on loopback: the Neens server (API and workers, under uvicorn in a
thread), the simulated endpoints (`simulated`, in another), and the seeding client (`seed`),
which drives the server's HTTP API with an admin and an ingest key made in the store first.
When the sweep and the pre-prod runs have finished, their comparison is read against the story
the catalog predicts (`story`): a server that tells another story fails the command (exit 1)
rather than showing it. Then the command prints where to look and keeps serving until Ctrl-C,
or exits with `--exit-when-ready`.

Exit codes: 0 ready (or stopped with Ctrl-C after that), 1 seeding failed (the reason is on
standard error), 2 a usage error: a bad flag, a data directory that is not empty, a port that is
taken, or secret keys that cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neens.demo import catalog
from neens.listening import CannotListen, listen

EXIT_OK, EXIT_SEED_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_DATA_DIR = ".neens-demo"
MANIFEST = "demo.json"
OWN_FILES = frozenset(
    {"neens.db", "neens.db-wal", "neens.db-shm", "neens.db-journal", "secret.key", MANIFEST}
)
"""What the demo writes in its data directory: all `--reset` removes."""
SEED_TIMEOUT_S = 300.0


class UsageProblem(Exception):
    """The command cannot start as asked; the message says what to change."""


def add_parser(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="seed the worked example (a model sweep of simulated models) and serve it",
        description=(
            "Start a Neens server on a fresh SQLite data directory, with six simulated models "
            "on loopback, and seed the worked example through its API: a golden dataset of "
            "two agents, rubric judges, production traces, two pre-prod runs (one regressed) "
            "and the sweep 'Support agent — model selection', run for real. Then print the "
            "URL and an admin key, and keep serving until Ctrl-C."
        ),
    )
    demo.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    demo.add_argument(
        "--port", type=_port, default=8000, help="port to serve on (default 8000; 0: any free one)"
    )
    demo.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        metavar="DIR",
        help=f"where the database and its secret key go (default {DEFAULT_DATA_DIR}); "
        "it must be empty or missing, unless --reset",
    )
    demo.add_argument(
        "--reset",
        action="store_true",
        help="delete an earlier demo's files in the data directory first",
    )
    demo.add_argument(
        "--exit-when-ready",
        "--no-wait",
        dest="exit_when_ready",
        action="store_true",
        help="exit once seeded instead of serving (the data stays in the data directory)",
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="print the URL, keys and ids as one JSON object on standard output",
    )
    demo.set_defaults(func=run)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        # The port first: `--reset` run again on the port of a demo still serving stops here,
        # before deleting the database that demo is using.
        sock = listen(args.host, args.port)
    except (UsageProblem, CannotListen) as exc:
        err.print(f"neens: error: {exc}", markup=False)
        return EXIT_USAGE
    with sock:
        try:
            data_dir = prepare_data_dir(args.data_dir, reset=args.reset)
        except UsageProblem as exc:
            err.print(f"neens: error: {exc}", markup=False)
            return EXIT_USAGE
        return _run(args, data_dir, sock, err)


def _run(args: argparse.Namespace, data_dir: Path, sock: socket.socket, err: Any) -> int:
    from neens.demo.seed import SeedError, seed
    from neens.demo.story import differences

    settings = _settings(data_dir, args.host, sock.getsockname()[1])
    if (problem := _secrets_problem(settings)) is not None:
        err.print(f"neens: error: {problem}", markup=False)
        return EXIT_USAGE
    started = time.monotonic()
    reporter = Reporter(err)
    ready = False
    try:
        reporter.step(f"Starting Neens on {data_dir} (SQLite)")
        admin_key, ingest_key = asyncio.run(_make_keys(settings.resolved_database_url()))
        url = _url(args.host, settings.port)
        with _simulated() as endpoints, _neens(settings, sock) as local_url:
            seeded = seed(
                local_url,
                admin_key=admin_key,
                ingest_key=ingest_key,
                endpoints=endpoints,
                progress=reporter,
                timeout_s=SEED_TIMEOUT_S,
            )
            wrong = differences(seeded.comparison)
            if wrong:
                raise SeedError(
                    "the sweep's comparison does not tell the demo's story: " + "; ".join(wrong)
                )
            reporter.stop()
            manifest = _manifest(url, data_dir, settings, admin_key, ingest_key, seeded, endpoints)
            manifest["seededInS"] = round(time.monotonic() - started, 1)
            _write_private(data_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")
            _announce(manifest, seeded, args, err)
            ready = True
            if not args.exit_when_ready:
                err.print(f"Serving on {url} until Ctrl-C.", markup=False)
                _wait_until_stopped()
    except SeedError as exc:
        reporter.stop()
        err.print(f"neens: error: seeding the demo failed: {exc}", markup=False)
        return EXIT_SEED_FAILED
    except KeyboardInterrupt:
        reporter.stop()
        if not ready:
            raise  # interrupted while seeding: `neens` exits 130
        err.print("neens: stopped", markup=False)
    return EXIT_OK


def _write_private(path: Path, text: str) -> None:
    """Write `text` readable by its owner only: it holds the demo's keys."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


# --- before starting ----------------------------------------------------------------------------


def prepare_data_dir(path: Path, *, reset: bool) -> Path:
    """The data directory, created when missing; UsageProblem when it holds anything and
    `reset` is off, or holds files the demo does not write (those are never deleted)."""
    if path.exists() and not path.is_dir():
        raise UsageProblem(f"--data-dir {path} is a file, not a directory")
    present = sorted(p.name for p in path.iterdir()) if path.exists() else []
    if present and not reset:
        raise UsageProblem(
            f"the data directory {path} is not empty (an earlier demo?). Serve that demo again "
            f"with `NEENS_HOME={path} neens serve`, start afresh with --reset, or pick another "
            "--data-dir"
        )
    foreign = [name for name in present if name not in OWN_FILES]
    if foreign:
        raise UsageProblem(
            f"the data directory {path} holds files the demo did not write "
            f"({', '.join(foreign)}), so --reset leaves it alone: pick another --data-dir"
        )
    for name in present:
        (path / name).unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _settings(data_dir: Path, host: str, port: int) -> Any:
    from neens.settings import Settings

    # Whatever the environment says, the demo uses its own directory, runs its workers in
    # process and may call the simulated endpoints on loopback.
    return Settings(
        home=data_dir,
        database_url=f"sqlite+aiosqlite:///{(data_dir / 'neens.db').resolve()}",
        host=host,
        port=port,
        workers_in_process=True,
        migrate_on_start=True,
        allow_private_destinations=True,
    )


def _secrets_problem(settings: Any) -> str | None:
    from neens.secrets import SecretKeyError, load_secret_box

    try:
        load_secret_box(settings)
    except SecretKeyError as exc:
        return str(exc)
    return None


async def _make_keys(database_url: str) -> tuple[str, str]:
    from neens.store import migrate
    from neens.store.db import Database
    from neens.store.keys import create_key

    await migrate.upgrade(database_url)
    db = Database(database_url)
    try:
        keys = [
            await create_key(db, company=catalog.COMPANY, project=catalog.PROJECT, role=role)
            for role in ("admin", "ingest")
        ]
    finally:
        await db.dispose()
    return keys[0].key, keys[1].key


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


# --- the servers --------------------------------------------------------------------------------


@contextmanager
def _simulated() -> Iterator[Any]:
    from neens.demo.endpoints import serve
    from neens.demo.seed import Endpoints
    from neens.demo.simulated import endpoints

    models, agent, judge = endpoints()
    with serve(*models, agent, judge) as server:
        yield Endpoints(
            base_url=server.base_url,
            models={e.model.label: e.url for e in models},
            agent=agent.url,
            judge_base_url=judge.base_url,
        )


@contextmanager
def _neens(settings: Any, sock: socket.socket) -> Iterator[str]:
    """The Neens server on `sock`, in a thread, for the duration of the block; yields the URL
    the seeding client uses (loopback when the server binds every interface)."""
    import uvicorn

    from neens.api.app import create_app

    config = uvicorn.Config(
        create_app(settings), log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # uvicorn exits on a failed startup: report it, not hang
            failed.append(exc)

    thread = threading.Thread(target=serve, name="neens-demo-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            from neens.demo.seed import SeedError

            why = repr(failed[0]) if failed else "it was not listening after 60 s"
            raise SeedError(f"the Neens server did not start: {why}")
        time.sleep(0.02)
    try:
        yield _url(settings.host, settings.port)
    finally:
        server.should_exit = True
        thread.join(30)


def _wait_until_stopped() -> None:
    """Until Ctrl-C (KeyboardInterrupt) or SIGTERM, which stops the demo the same way."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise KeyboardInterrupt


# --- what is shown ------------------------------------------------------------------------------


class Reporter:
    """Seeding's progress on standard error: a line per step, and the sweep as a live bar on a
    terminal (a line per tenth of it elsewhere, as in a CI log)."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.bar: Any = None
        self.task: Any = None
        self.shown = -1

    def step(self, text: str) -> None:
        self.stop()
        self.console.print(f"• {text}", markup=False)

    def sweep(self, done: int, total: int, detail: str) -> None:
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            if self.bar is None:
                self.bar = Progress(
                    "  sweep",
                    BarColumn(),
                    MofNCompleteColumn(),
                    "answers",
                    TimeElapsedColumn(),
                    "{task.fields[detail]}",
                    console=self.console,
                )
                self.bar.start()
                self.task = self.bar.add_task("sweep", total=total, detail="")
            self.bar.update(self.task, completed=done, total=total, detail=f"arms: {detail}")
            return
        tenth = done * 10 // total if total else 0
        if tenth != self.shown:
            self.shown = tenth
            self.console.print(
                f"  sweep: {done}/{total} answers scored (arms: {detail})", markup=False
            )

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _manifest(
    url: str,
    data_dir: Path,
    settings: Any,
    admin_key: str,
    ingest_key: str,
    seeded: Any,
    endpoints: Any,
) -> dict[str, Any]:
    sweep = f"{url}/model-sweeps/{seeded.sweep_id}"
    return {
        "url": url,
        "signInUrl": f"{url}/ui/sign-in",
        "comparePageUrl": f"{url}/ui/sweeps/{seeded.sweep_id}/compare",
        "adminKey": admin_key,
        "ingestKey": ingest_key,
        "dataDir": str(data_dir.resolve()),
        "databaseUrl": settings.resolved_database_url(),
        "company": catalog.COMPANY,
        "project": catalog.PROJECT,
        "datasetId": seeded.dataset_id,
        "sweepId": seeded.sweep_id,
        "sweepUrl": sweep,
        "comparisonUrl": f"{sweep}/comparison",
        "preprodRuns": dict(seeded.preprod_runs),
        "connections": dict(seeded.connections),
        "agentConnectionId": seeded.agent_connection_id,
        "judges": dict(seeded.judges),
        "primaryScoreId": seeded.primary_score_id,
        "productionSessions": seeded.production_sessions,
        "simulatedModels": [m.model for m in catalog.MODELS],
        "simulatedEndpoints": endpoints.base_url,
    }


def _announce(manifest: dict[str, Any], seeded: Any, args: Any, err: Any) -> None:
    url, key = manifest["url"], manifest["adminKey"]
    comparison = seeded.comparison
    lines = [
        "",
        f"Neens demo ready in {manifest['seededInS']:g} s — every model in it is simulated.",
        "",
        f"  Open        {manifest['comparePageUrl']}",
        "              in a browser, and sign in with the admin key to land on the sweep",
        f"  Admin key   {key}   (also in {Path(manifest['dataDir']) / MANIFEST})",
        f"  Server      {url}   (pages at {url}/ui/, API reference at {url}/docs)",
        "",
        f"  Sweep       {catalog.SWEEP}: {len(catalog.MODELS)} simulated models × "
        f"{catalog.PASS_K} runs × {len(catalog.ITEMS)} golden items",
        f"              as JSON: {manifest['comparisonUrl']}",
        f"  Verdict     {comparison['verdict']['sentence']}",
    ]
    lines += [f"              {agent['verdict']['sentence']}" for agent in comparison["agents"]]
    lines.append("")
    for n, (label, run_id) in enumerate(manifest["preprodRuns"].items()):
        status = seeded.run_statuses[run_id]
        lines.append(
            f"  {'Pre-prod' if n == 0 else '':<10}  support-agent {label}: {status}, "
            f"{url}/ui/preprod-evals/{run_id}"
        )
    lines += [
        f"  Production  {manifest['productionSessions']} sessions of support-agent "
        f"{catalog.PRODUCTION.label}: {url}/ui/sessions",
        "",
        "  Read the decision from the command line:",
        f"    export NEENS_BASE_URL={url} NEENS_API_KEY={key}",
        f"    neens sweep decide --sweep-id {manifest['sweepId']}",
        "",
    ]
    text = "\n".join(lines)
    if args.json:
        err.print(text, markup=False)
        sys.stdout.write(json.dumps(manifest) + "\n")
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
