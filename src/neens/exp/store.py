"""Opening the experiments' store for one command, and finding an experiment (or a sweep, a
matrix) by its id."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, TypeVar

from neens_eval.errors import ConfigError

from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.experiments import ExperimentRow, get_experiment, ids_starting_with

Row = TypeVar("Row")

MIN_PREFIX_CHARS: Final = 6
"""The shortest start of an id that may stand for it (`exp_01` and longer)."""


@contextlib.asynccontextmanager
async def open_store(database_url: str | None) -> AsyncIterator[Database]:
    """The store: `database_url`, else $NEENS_DATABASE_URL, else ./.neens/neens.db, migrated."""
    settings = Settings(database_url=database_url) if database_url else Settings()
    url = settings.resolved_database_url()
    await migrate.upgrade(url)
    db = Database(url)
    try:
        yield db
    finally:
        await db.dispose()


async def find_experiment(db: Database, text: str, *, flag: str = "experiment") -> ExperimentRow:
    """The experiment `text` names: its id, or the start of exactly one id."""
    return await find_by_id(
        text,
        lambda id_: get_experiment(db, id_),
        lambda prefix: ids_starting_with(db, prefix),
        flag=flag,
        what="experiment",
        hint=" (`neens exp list`)",
    )


async def find_by_id(
    text: str,
    get: Callable[[str], Awaitable[Row | None]],
    starting_with: Callable[[str], Awaitable[list[str]]],
    *,
    flag: str,
    what: str,
    hint: str = "",
) -> Row:
    """What `text` names (an experiment, a sweep, a matrix): its id, or the start of exactly
    one id (six characters at least); ConfigError (exit 2) naming `flag` otherwise."""
    found = await get(text)
    if found is not None:
        return found
    matches = await starting_with(text)
    if matches and len(text) < MIN_PREFIX_CHARS:
        raise ConfigError(
            f"{flag} {text}: too short to stand for an id: give at least {MIN_PREFIX_CHARS} "
            f"characters of the {what} id (it is the start of {_listed(matches)})"
        )
    if len(matches) == 1:
        found = await get(matches[0])
        assert found is not None
        return found
    if matches:
        raise ConfigError(
            f"{flag} {text}: the start of more than one {what} id ({_listed(matches)}); give "
            "more of the id"
        )
    raise ConfigError(f"{flag} {text}: no such {what} in this store{hint}")


def _listed(ids: list[str]) -> str:
    """The ids found, with "…" when the lookup's limit may have left some out."""
    return ", ".join(ids) + (", …" if len(ids) >= _LOOKUP_LIMIT else "")


_LOOKUP_LIMIT: Final = 5
"""How many ids `ids_starting_with` and its kin return by default."""
