"""`neens serve`, `neens db` and `neens keys` as a user runs them: real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from neens.store import migrate
from neens.store.db import make_engine
from neens.store.keys import CreatedKey
from tests.support.live import LiveServer, free_port
from tests.support.sqlite_only import sqlite_only

pytestmark = pytest.mark.e2e

NEENS = [sys.executable, "-m", "neens_eval"]


def neens(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NEENS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_help_lists_the_platform_and_sdk_groups() -> None:
    result = neens("--help")
    assert result.returncode == 0
    for group in ("serve", "demo", "db", "keys", "datasets"):
        assert group in result.stdout


HEAVY_MODULES = ("sqlalchemy", "alembic", "pydantic_settings", "fastapi", "openai", "scipy")


def test_building_the_command_line_imports_no_server_code() -> None:
    """Every `neens` call builds the whole parser, the platform's groups included, so what they
    import at that point is paid by `--help` and by every client command a CI job runs."""
    probe = (
        "import sys\n"
        "from neens_eval.cli import build_parser\n"
        "build_parser()\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_the_server_starts_without_the_llm_client_or_the_mcp_sdk() -> None:
    """`openai` is imported on the first LLM verdict (`engine.llm_judge._openai`) and the `mcp`
    SDK on the first request to `/mcp` (`mcp.on_demand`): every `neens serve` and `neens worker`
    would otherwise spend one and a half to two seconds of CPU on them."""
    probe = (
        "import sys\nimport neens.api.app\n"
        "print(sorted(m for m in ('openai', 'mcp') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_keys_create_list_and_revoke_against_the_database(database_url: str) -> None:
    env = {"NEENS_DATABASE_URL": database_url}
    created = neens(
        "keys",
        "create",
        "--company",
        "Acme",
        "--project",
        "Support agent",
        "--role",
        "admin",
        "--json",
        env=env,
    )
    assert created.returncode == 0, created.stderr
    body = json.loads(created.stdout)
    assert set(body) == {"key", "keyId", "companyId", "projectId", "role", "newProject"}
    assert body["key"].startswith("nk_live_")
    assert body["role"] == "admin" and body["newProject"] is True

    again = neens(
        "keys", "create", "--company", "Acme", "--project", "Support agent", "--json", env=env
    )
    second = json.loads(again.stdout)
    # The company and project are reused; only the key is new.
    assert (second["companyId"], second["projectId"]) == (body["companyId"], body["projectId"])
    assert second["role"] == "ingest" and second["newProject"] is False
    assert second["key"] != body["key"]

    listed = json.loads(neens("keys", "list", "--json", env=env).stdout)["keys"]
    assert [k["keyId"] for k in listed] == [body["keyId"], second["keyId"]]
    assert body["key"] not in json.dumps(listed)

    revoked = neens("keys", "revoke", body["keyId"], env=env)
    assert revoked.returncode == 0
    listed = json.loads(neens("keys", "list", "--json", env=env).stdout)["keys"]
    assert listed[0]["revokedAt"] is not None
    assert listed[1]["revokedAt"] is None

    missing = neens("keys", "revoke", "key_nope", env=env)
    assert missing.returncode == 2
    assert "key_nope" in missing.stderr

    # Without --json: the key alone on stdout; on stderr, which project (and whether it is new,
    # as a name typed in another case is) and which database, never its password.
    text = neens("keys", "create", "--company", "Acme", "--project", "support agent", env=env)
    assert text.returncode == 0 and text.stdout.startswith("nk_live_")
    assert "for Acme / support agent (a new project), in " in text.stderr
    assert make_url(database_url).render_as_string(hide_password=True) in text.stderr
    for blank in ("", "  "):
        refused = neens("keys", "create", "--company", blank, "--project", "x", env=env)
        assert refused.returncode == 2 and "--company: must not be blank" in refused.stderr


def test_keys_list_shows_whole_ids_that_revoke_takes_whole_or_by_a_unique_start(
    database_url: str,
) -> None:
    env = {"NEENS_DATABASE_URL": database_url, "COLUMNS": "60"}
    create = ["keys", "create", "--company", "Acme Corporation International", "--project",
              "Support agent for customers", "--json"]  # fmt: skip
    ids = [json.loads(neens(*create, env=env).stdout)["keyId"] for _ in range(2)]

    table = neens("keys", "list", env=env)  # not a terminal, and narrow: ids are still whole

    assert table.returncode == 0, table.stderr
    assert all(key_id in table.stdout for key_id in ids), table.stdout
    shared = os.path.commonprefix(ids)
    ambiguous = neens("keys", "revoke", shared, env=env)
    assert ambiguous.returncode == 2
    assert all(key_id in ambiguous.stderr for key_id in ids)
    assert "give more of the id" in ambiguous.stderr
    unique = ids[1][: len(shared) + 1]
    revoked = neens("keys", "revoke", unique, env=env)
    assert revoked.returncode == 0, revoked.stderr
    assert f"Revoked {ids[1]}." in revoked.stderr
    listed = json.loads(neens("keys", "list", "--json", env=env).stdout)["keys"]
    assert [k["revokedAt"] is not None for k in listed] == [False, True]
    unknown = neens("keys", "revoke", "key_%", env=env)  # a LIKE wildcard is a character
    assert unknown.returncode == 2


def test_a_revoked_key_is_refused_by_a_running_server_within_5_seconds(
    database_url: str, live_server: LiveServer, key: CreatedKey
) -> None:
    auth = {"Authorization": f"Bearer {key.key}"}
    assert httpx.get(f"{live_server.url}/datasets", headers=auth).status_code == 200

    revoked = neens("keys", "revoke", key.key_id, env={"NEENS_DATABASE_URL": database_url})
    started = time.monotonic()

    assert revoked.returncode == 0, revoked.stderr
    assert "A running server stops accepting it within 5 seconds" in revoked.stderr
    while httpx.get(f"{live_server.url}/datasets", headers=auth).status_code == 200:
        assert time.monotonic() - started < 5.5, "the revoked key is still accepted"
        time.sleep(0.1)
    assert httpx.get(f"{live_server.url}/datasets", headers=auth).status_code == 401


def test_keys_create_refuses_an_unknown_role() -> None:
    result = neens("keys", "create", "--company", "A", "--project", "B", "--role", "root")
    assert result.returncode == 2
    assert "--role" in result.stderr


@pytest.mark.parametrize(
    ("company", "project", "error"),
    [
        ("Ev\x1b[31mil", "p", "argument --company: must not hold control characters (U+001B at "
         "position 2)"),
        ("Acme", "p\nq", "argument --project: must not hold control characters (U+000A at "
         "position 1)"),
        ("Acme", "  ", "argument --project: must not be blank"),
    ],
)  # fmt: skip
def test_keys_create_refuses_a_name_no_list_or_terminal_could_show(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, company: str, project: str, error: str
) -> None:
    """An escape code would recolour `neens keys list`; a newline would split its row."""
    from neens_eval.cli import main

    url = f"sqlite+aiosqlite:///{tmp_path / 'neens.db'}"
    args = ["keys", "create", "--company", company, "--project", project, "--database-url", url]
    assert main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"neens keys create: error: {error}"
    assert not (tmp_path / "neens.db").exists()


def _start_serve(port: int, cwd: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*NEENS, "serve", "--port", str(port)],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return process
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(process.stderr.read() if process.stderr else "") from None
            time.sleep(0.2)


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)


def test_serve_starts_on_the_embedded_sqlite_default_and_migrates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `make serve` runs: nothing configured, the database appears under .neens/, and the
    pages are served, signing in with a key the CLI made; a restart keeps the page session."""
    monkeypatch.delenv("NEENS_HOME")
    monkeypatch.delenv("NEENS_SECRET_KEYS")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = _start_serve(port, tmp_path)
    try:
        r = httpx.get(f"{base}/healthz")
        assert r.json()["status"] == "ok"
        assert r.json()["database"] == "sqlite"
        assert (tmp_path / ".neens" / "neens.db").exists()
        created = neens(
            "keys", "create", "--company", "A", "--project", "B", "--json", cwd=tmp_path
        )
        key = json.loads(created.stdout)["key"]
        # A key made by the CLI while the server runs is usable at once.
        r = httpx.get(f"{base}/datasets", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200
        browser = httpx.Client(timeout=30, base_url=base)
        form = browser.get("/ui/sign-in").text
        token = form.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        r = browser.post("/ui/sign-in", data={"csrf_token": token, "key": key})
        assert (r.status_code, r.headers["location"]) == (303, "/ui/preprod-evals")
        assert "New pre-prod eval" in browser.get("/ui/preprod-evals").text
        assert browser.get("/ui/static/neens.css").status_code == 200
    finally:
        _stop(process)
    # The signing key comes from .neens/secret.key, which outlives the process.
    process = _start_serve(port, tmp_path)
    try:
        assert browser.get("/ui/datasets").status_code == 200
    finally:
        browser.close()
        _stop(process)


def test_serve_on_a_port_in_use_says_so_and_starts_nothing(tmp_path: Path) -> None:
    """Exit 2 with one line before migrating anything."""
    port = free_port()
    (tmp_path / "first").mkdir()
    process = _start_serve(port, tmp_path / "first")
    try:
        (tmp_path / "second").mkdir()
        second = neens("serve", "--port", str(port), cwd=tmp_path / "second")
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip() == (
            f"neens: error: port {port} on 127.0.0.1 is already in use (another server, or a "
            "demo still running?): stop it, or pick another port with --port"
        )
        assert not (tmp_path / "second" / ".neens").exists(), "nothing was created or migrated"
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    # It shut down, then ended as SIGTERM ends a process, which process managers expect.
    assert process.returncode == -signal.SIGTERM


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert "empty" in neens("db", "current", "--database-url", url).stdout
    upgraded = neens("db", "upgrade", "--database-url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "up to date" in neens("db", "current", "--database-url", url).stdout


NEWER_REVISION = "9999"
"""A revision no migration script of this Neens has: what a newer Neens leaves in the database."""
COMMANDS_THAT_OPEN_THE_DATABASE = (
    ("keys", "list"),
    ("keys", "create", "--company", "Acme", "--project", "Support"),
    ("db", "upgrade"),
    ("worker",),
    ("mcp",),
    ("exp", "list"),
    ("serve", "--port", "0"),  # the port is replaced by a free one below
)


def _set_revision(database_url: str, revision: str) -> None:
    async def run() -> None:
        engine = make_engine(database_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text("UPDATE alembic_version SET version_num = :revision"),
                    {"revision": revision},
                )
        finally:
            await engine.dispose()

    asyncio.run(run())


def test_a_database_a_newer_neens_migrated_is_refused_in_one_line(
    database_url: str, tmp_path: Path
) -> None:
    """Every command that opens the database ends with exit 2 and one line naming the revision
    it does not know, and leaves the database as it was (no traceback, no downgrade)."""
    _set_revision(database_url, NEWER_REVISION)
    running: list[tuple[tuple[str, ...], subprocess.Popen[str]]] = []
    try:
        env = {**os.environ, "NEENS_DATABASE_URL": database_url, "NEENS_API_KEY": "nk_live_x"}
        for command in COMMANDS_THAT_OPEN_THE_DATABASE:
            args = [str(free_port()) if arg == "0" else arg for arg in command]
            process = subprocess.Popen(
                [*NEENS, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=tmp_path,
            )
            running.append((command, process))
        for command, process in running:
            _, stderr = process.communicate(timeout=120)
            assert process.returncode == 2, (command, stderr)
            assert "Traceback" not in stderr, (command, stderr)
            # `neens worker` says what it starts before it opens the database.
            last = stderr.splitlines()[-1]
            assert last.startswith(f"neens: error: the database {_label(database_url)} "), (
                command,
                stderr,
            )
            assert f"at migration '{NEWER_REVISION}', which this Neens does not have" in last
        current = neens("db", "current", env={"NEENS_DATABASE_URL": database_url})
        assert current.returncode == 0, current.stderr
        assert current.stdout.strip() == (
            f"{NEWER_REVISION}: newer than this Neens (its latest is {migrate.HEAD_REVISION}): "
            "upgrade Neens to use it"
        )
        assert asyncio.run(migrate.current_revision(database_url)) == NEWER_REVISION
    finally:
        for _, process in running:
            if process.poll() is None:
                process.kill()
                process.communicate()
        _set_revision(database_url, migrate.HEAD_REVISION)


def _label(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


@sqlite_only("the URL is read before any database is opened; PostgreSQL's refusal is its own case")
@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        (
            "mysql://root@127.0.0.1/neens",
            2,
            "neens: error: database URL: unsupported database URL scheme 'mysql': use "
            "sqlite:///path/to/neens.db or postgresql+psycopg://user@host/dbname",
        ),
        (
            "not a url",
            2,
            "neens: error: database URL: not a URL Neens can read (--database-url or "
            "NEENS_DATABASE_URL); use sqlite:///path/to/neens.db or "
            "postgresql+psycopg://user@host/dbname",
        ),
        (
            "postgresql://postgres:s3cret@127.0.0.1:1/neens",
            3,
            "neens: error: cannot connect to the database "
            "postgresql://postgres:***@127.0.0.1:1/neens: connection failed: ",
        ),
    ],
)
def test_a_database_that_cannot_be_opened_is_one_line_with_its_exit_code(
    dialect: str, url: str, code: int, message: str
) -> None:
    """The password never appears; an unreachable server is exit 3 (try again), a URL Neens
    cannot use exit 2 (fix it)."""
    result = neens("keys", "list", "--database-url", url)
    assert result.returncode == code, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["mcp"]])
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgres//typo", "not a URL Neens can read"),
        ("postgresql+psycopg://u:s3cret@[::1", "not a URL Neens can read"),
        # the URL is the news, not the secret key PostgreSQL would need
        ("mysql://root@127.0.0.1/x", "unsupported database URL scheme 'mysql'"),
    ],
)
def test_the_servers_refuse_a_database_url_they_cannot_use_in_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    url: str,
    said: str,
) -> None:
    from neens_eval.cli import main

    monkeypatch.setenv("NEENS_API_KEY", "nk_live_x")
    monkeypatch.delenv("NEENS_SECRET_KEYS", raising=False)
    assert main([*command, "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("neens: error: database URL: "), err
    assert said in err and "s3cret" not in err


@sqlite_only("SQLite files only: the default store in NEENS_HOME")
def test_neens_home_is_made_when_missing_and_one_line_when_it_cannot_be(
    dialect: str, tmp_path: Path
) -> None:
    env = {"NEENS_DATABASE_URL": "", "NEENS_HOME": str(tmp_path / "home" / "deeper")}
    made = neens("keys", "list", env=env)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "home" / "deeper" / "neens.db").is_file()
    (tmp_path / "a-file").write_text("not a directory")
    refused = neens("keys", "list", env={**env, "NEENS_HOME": str(tmp_path / "a-file" / "home")})
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(
        f"neens: error: cannot create the directory NEENS_HOME={tmp_path}/a-file/home: "
    ), refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr


@sqlite_only("SQLite files only: a path where a file cannot be made")
def test_a_sqlite_path_that_cannot_be_a_database_is_one_line(dialect: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    under_a_file = neens("keys", "list", "--database-url", f"sqlite:///{tmp_path}/a-file/n.db")
    assert under_a_file.returncode == 2, under_a_file.stderr
    assert under_a_file.stderr == (
        f"neens: error: cannot open the database sqlite:///{tmp_path}/a-file/n.db: "
        f"{tmp_path}/a-file is not a directory; check the path, or create the directory first "
        "(--database-url or NEENS_DATABASE_URL)\n"
    ), under_a_file.stderr
    # A directory that does not exist is not made: a typo in it would start an empty store.
    typo = neens("keys", "list", "--database-url", f"sqlite:///{tmp_path}/typo/deeper/n.db")
    assert typo.returncode == 2, typo.stderr
    assert typo.stderr.startswith(
        f"neens: error: cannot open the database sqlite:///{tmp_path}/typo/deeper/n.db: "
        f"{tmp_path}/typo/deeper does not exist; "
    ), typo.stderr
    assert not (tmp_path / "typo").exists()
    a_directory = neens("keys", "list", "--database-url", f"sqlite:///{tmp_path}")
    assert a_directory.returncode == 2, a_directory.stderr
    assert a_directory.stderr == (
        f"neens: error: cannot open the database sqlite:///{tmp_path}: unable to open database "
        "file; check the path and its permissions (--database-url or NEENS_DATABASE_URL)\n"
    )


@pytest.mark.parametrize(
    ("env", "args", "said"),
    [
        (
            {"NEENS_MAX_REQUEST_BYTES": "1000"},
            (),
            "neens: error: NEENS_MAX_REQUEST_BYTES: Input should be greater than or equal to 1024 "
            "(given '1000')",
        ),
        (
            {"NEENS_WORKER_CONCURRENCY": "many"},
            (),
            "neens: error: NEENS_WORKER_CONCURRENCY: Input should be a valid integer",
        ),
        ({}, ("--port", "99999"), "neens: error: --port: Input should be less than or equal"),
    ],
)
def test_a_setting_out_of_range_is_one_line_naming_it(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], said: str
) -> None:
    result = neens("serve", *args, env={"NEENS_HOME": str(tmp_path), **env}, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(said), result.stderr


def test_a_server_told_not_to_migrate_refuses_a_database_behind_this_version_in_one_line(
    database_url: str, tmp_path: Path
) -> None:
    """`NEENS_MIGRATE_ON_START=false` on a database not at this version's schema: it failed
    inside the server's startup with "no such table" (exit 3); now one line says what to run."""
    _set_revision(database_url, "0023")
    env = {"NEENS_DATABASE_URL": database_url, "NEENS_MIGRATE_ON_START": "false"}
    try:
        for command in (("serve", "--port", str(free_port())), ("worker",)):
            result = neens(*command, env=env, cwd=tmp_path)
            assert result.returncode == 2, (command, result.stderr)
            assert "Traceback" not in result.stderr
            last = result.stderr.strip().splitlines()[-1]
            assert last == (
                f"neens: error: the database {_label(database_url)} has revision 0023, not this "
                f"version's {migrate.HEAD_REVISION}, and NEENS_MIGRATE_ON_START is false: run "
                "`neens db upgrade` first (or leave NEENS_MIGRATE_ON_START unset to migrate on "
                "start)"
            ), result.stderr
    finally:
        _set_revision(database_url, migrate.HEAD_REVISION)
