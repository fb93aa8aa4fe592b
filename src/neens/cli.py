"""The platform's command groups for the `neens` command: serve, worker, demo, mcp, db, keys,
secrets.

The `neens` command itself lives in the dependency-free `neens-eval` distribution; this module
is found through the `neens.cli` entry-point group and adds what needs the server installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from neens.demo import command as demo_command

if TYPE_CHECKING:
    from neens.settings import Settings


def _settings(args: argparse.Namespace) -> Settings:
    """The settings, from the environment and the command's flags; a value out of range or of
    the wrong type is one line naming it (`ConfigError`, exit 2), not pydantic's traceback."""
    from neens_eval.errors import ConfigError
    from pydantic import ValidationError

    from neens.settings import Settings

    overrides: dict[str, Any] = {}
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    for name in ("host", "port"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problem = exc.errors()[0]
        name = "_".join(str(part) for part in problem["loc"]).upper()
        flag = next((f"--{n.replace('_', '-')}" for n in overrides if n.upper() == name), None)
        where = flag or f"NEENS_{name}"
        raise ConfigError(f"{where}: {problem['msg']} (given {problem.get('input')!r})") from None


def _secrets_problem(settings: Settings) -> str | None:
    """Why the database URL or the secret keys cannot be used, checked before starting (a clear
    line, not a traceback from inside the server's startup)."""
    from neens.secrets import SecretKeyError, load_secret_box
    from neens.store.migrate import DatabaseUnusable, check_url

    try:
        check_url(settings.resolved_database_url())
    except DatabaseUnusable as exc:
        return str(exc)
    try:
        load_secret_box(settings)
    except SecretKeyError as exc:
        return str(exc)
    return None


def _add_database_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="database to use (default: $NEENS_DATABASE_URL, else SQLite at .neens/neens.db)",
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from neens.api.app import create_app
    from neens.listening import CannotListen, listen
    from neens.store import migrate

    settings = _settings(args)
    if (problem := _secrets_problem(settings)) is not None:
        print(f"neens: error: {problem}", file=sys.stderr)
        return 2
    try:
        # The port first: nothing (migrations, workers) starts for a server that cannot listen.
        sock = listen(settings.host, settings.port)
    except CannotListen as exc:
        print(f"neens: error: {exc}", file=sys.stderr)
        return 2
    with sock:
        # Migrated here, before uvicorn starts, so that a database that cannot be used ends the
        # command with one line (raised to `neens`) rather than a traceback from the lifespan.
        if settings.migrate_on_start:
            asyncio.run(migrate.upgrade(settings.resolved_database_url()))
        else:
            asyncio.run(migrate.require_current(settings.resolved_database_url()))
        app = create_app(settings, freeze_startup_heap=True)
        print(
            f"Neens serving on http://{settings.host}:{settings.port} "
            f"(database: {settings.resolved_database_url().split('://')[0]}); "
            f"pages at http://{settings.host}:{settings.port}/ui/",
            file=sys.stderr,
        )
        server = uvicorn.Server(
            uvicorn.Config(app, host=settings.host, port=settings.port, log_level=args.log_level)
        )
        server.run(sockets=[sock])
    # uvicorn's own code for a startup that failed (the database refused, a migration failed).
    return 0 if server.started else 3


def _worker(args: argparse.Namespace) -> int:
    import logging

    from neens.engine.worker_process import run_worker

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    settings = _settings(args)
    if (problem := _secrets_problem(settings)) is not None:
        print(f"neens: error: {problem}", file=sys.stderr)
        return 2
    print(
        f"Neens worker: {settings.worker_concurrency} jobs at a time "
        f"(database: {settings.resolved_database_url().split('://')[0]})",
        file=sys.stderr,
    )
    asyncio.run(run_worker(settings))
    return 0


def _mcp(args: argparse.Namespace) -> int:
    import os

    from neens.mcp.stdio import REVOKED, check_key, serve_stdio

    key = os.environ.get("NEENS_API_KEY", "").strip()
    if not key:
        print(
            "neens: error: NEENS_API_KEY is not set: `neens mcp` acts as that key's project and "
            "role; create one with `neens keys create`",
            file=sys.stderr,
        )
        return 2
    settings = _settings(args)
    if (problem := _secrets_problem(settings)) is not None:
        print(f"neens: error: {problem}", file=sys.stderr)
        return 2
    if asyncio.run(check_key(settings, key)) is None:
        print(f"neens: error: {REVOKED}", file=sys.stderr)
        return 2
    asyncio.run(serve_stdio(settings, key))
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from neens.store import migrate

    url = _settings(args).resolved_database_url()
    asyncio.run(migrate.upgrade(url, args.revision))
    revision = asyncio.run(migrate.current_revision(url))
    print(f"Database at revision {revision}.", file=sys.stderr)
    return 0


def _db_current(args: argparse.Namespace) -> int:
    from neens.store import migrate

    url = _settings(args).resolved_database_url()
    current = asyncio.run(migrate.current_revision(url))
    head = migrate.head_revision()
    if current is not None and not migrate.is_known(current):
        state = f"newer than this Neens (its latest is {head}): upgrade Neens to use it"
    elif current == head:
        state = "up to date"
    else:
        state = f"behind (latest is {head})"
    print(f"{current or 'empty'}: {state}")
    return 0


async def _with_db(args: argparse.Namespace, action: Any) -> Any:
    from neens.store import migrate
    from neens.store.db import Database

    url = _settings(args).resolved_database_url()
    await migrate.upgrade(url)
    db = Database(url)
    try:
        return await action(db)
    finally:
        await db.dispose()


def _named(text: str) -> str:
    """An argparse type: a name with something in it and no control character (it is shown in
    lists, pages and terminals), its surrounding spaces dropped."""
    from neens.domain.storable import name_problem

    name = text.strip()
    if (problem := name_problem(name)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return name


def _database_label(url: str) -> str:
    """Where a command wrote, for its message: the URL without a password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _keys_create(args: argparse.Namespace) -> int:
    from neens.store import keys

    created = asyncio.run(
        _with_db(
            args,
            lambda db: keys.create_key(
                db, company=args.company, project=args.project, role=args.role
            ),
        )
    )
    if args.json:
        print(
            json.dumps(
                {
                    "key": created.key,
                    "keyId": created.key_id,
                    "companyId": created.company_id,
                    "projectId": created.project_id,
                    "role": created.role,
                    "newProject": created.new_project,
                }
            )
        )
    else:
        print(created.key)
        new = " (a new project)" if created.new_project else ""
        where = _database_label(_settings(args).resolved_database_url())
        print(
            f"Created {created.role} key {created.key_id} for {args.company} / {args.project}"
            f"{new}, in {where}. It is shown only once: store it now.",
            file=sys.stderr,
        )
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Column, Table

    from neens.store import keys

    infos = asyncio.run(_with_db(args, keys.list_keys))
    if args.json:
        rows = [
            {
                "keyId": k.key_id,
                "prefix": k.display_prefix,
                "company": k.company,
                "project": k.project,
                "role": k.role,
                "createdAt": k.created_at.isoformat(),
                "revokedAt": k.revoked_at.isoformat() if k.revoked_at else None,
            }
            for k in infos
        ]
        print(json.dumps({"keys": rows}))
        return 0
    # The id is what `keys revoke` takes: never shortened, whatever the terminal's width.
    width = max((len(k.key_id) for k in infos), default=2)
    table = Table("key", "company", "project", "role", "created", "revoked")
    table.columns.insert(0, Column("id", no_wrap=True, min_width=width))
    for k in infos:
        table.add_row(
            k.key_id,
            k.display_prefix,
            k.company,
            k.project,
            k.role,
            k.created_at.strftime("%Y-%m-%d %H:%M"),
            k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "",
        )
    Console(width=max(Console().width, width + 60)).print(table)
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    from neens.store import keys

    async def revoke(db: Any) -> tuple[list[str], bool]:
        found = await keys.keys_matching(db, args.key_id)
        if len(found) != 1:
            return found, False
        return found, await keys.revoke_key(db, found[0])

    found, revoked = asyncio.run(_with_db(args, revoke))
    if not found:
        print(
            f"neens: error: no key whose id is or starts with {args.key_id!r}; "
            f"`neens keys list` shows the ids",
            file=sys.stderr,
        )
        return 2
    if len(found) > 1:
        print(
            f"neens: error: {args.key_id!r} is the start of {len(found)} key ids "
            f"({', '.join(found)}); give more of the id",
            file=sys.stderr,
        )
        return 2
    assert revoked
    print(
        f"Revoked {found[0]}. A running server stops accepting it within "
        f"{keys.KEY_MEMO_SECONDS:g} seconds (it remembers a checked key that long); requests "
        f"with it then get 401.",
        file=sys.stderr,
    )
    return 0


def _secrets_generate_key(args: argparse.Namespace) -> int:
    from neens.secrets import generate_key

    print(generate_key())
    return 0


def _secrets_reencrypt(args: argparse.Namespace) -> int:
    from neens.secrets import SecretKeyError, load_secret_box
    from neens.store.secrets import reencrypt

    async def run(db: Any) -> int:
        db.secrets = load_secret_box(_settings(args))
        return await reencrypt(db, rotate=True)

    try:
        count = asyncio.run(_with_db(args, run))
    except SecretKeyError as exc:
        print(f"neens: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"Re-encrypted {count} stored secret row(s) with the first key of NEENS_SECRET_KEYS; "
        "the other keys can now be removed.",
        file=sys.stderr,
    )
    return 0


def register(subparsers: Any) -> None:
    """Add `serve`, `worker`, `demo`, `mcp`, `db`, `keys` and `secrets` to the `neens` command."""
    serve = subparsers.add_parser("serve", help="run the Neens server")
    _add_database_url(serve)
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000)")
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    serve.set_defaults(func=_serve)

    worker = subparsers.add_parser(
        "worker", help="run job workers (agent calls, scoring, notifications) on their own"
    )
    _add_database_url(worker)
    worker.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    worker.set_defaults(func=_worker)

    demo_command.add_parser(subparsers)

    mcp = subparsers.add_parser(
        "mcp",
        help="serve the MCP tools over stdio for a coding agent, as the key in NEENS_API_KEY",
    )
    _add_database_url(mcp)
    mcp.set_defaults(func=_mcp)

    db = subparsers.add_parser("db", help="manage the database schema")
    db_sub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply pending migrations")
    _add_database_url(upgrade)
    upgrade.add_argument("revision", nargs="?", default="head", help="target (default: head)")
    upgrade.set_defaults(func=_db_upgrade)
    current = db_sub.add_parser("current", help="show the schema revision")
    _add_database_url(current)
    current.set_defaults(func=_db_current)

    keys = subparsers.add_parser("keys", help="create, list and revoke API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="COMMAND", required=True)
    create = keys_sub.add_parser(
        "create", help="create a key (and the company and project when missing)"
    )
    create.add_argument("--company", required=True, type=_named, help="company name")
    create.add_argument("--project", required=True, type=_named, help="project (agent) name")
    create.add_argument("--role", choices=["ingest", "admin"], default="ingest")
    create.add_argument("--json", action="store_true", help="print one JSON object")
    _add_database_url(create)
    create.set_defaults(func=_keys_create)
    list_ = keys_sub.add_parser("list", help="list keys (never the keys themselves)")
    list_.add_argument("--json", action="store_true", help="print one JSON object")
    _add_database_url(list_)
    list_.set_defaults(func=_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument(
        "key_id",
        metavar="KEY_ID",
        help="the key's id (key_…) from `neens keys list`, or enough of its start to be unique",
    )
    _add_database_url(revoke)
    revoke.set_defaults(func=_keys_revoke)

    secrets = subparsers.add_parser(
        "secrets", help="keys that encrypt stored secrets (connection headers, judge API keys)"
    )
    secrets_sub = secrets.add_subparsers(dest="secrets_command", metavar="COMMAND", required=True)
    generate = secrets_sub.add_parser("generate-key", help="print a new key for NEENS_SECRET_KEYS")
    generate.set_defaults(func=_secrets_generate_key)
    reencrypt = secrets_sub.add_parser(
        "reencrypt", help="encrypt every stored secret again with the first key"
    )
    _add_database_url(reencrypt)
    reencrypt.set_defaults(func=_secrets_reencrypt)
