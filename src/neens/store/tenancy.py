"""Tenancy by construction: a project's rows are read through here, and only here.

A resource of another project answers exactly like an id that was never created — same
status, same code, same message — so an id never tells a caller that it exists elsewhere.
Store functions that load a resource by id call `owned`; queries over a project's rows start
from `in_project` or filter with `owned_by`. The project filter is spelled once, below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from neens.domain.storable import safe_label
from neens.errors import NotFound
from neens.store.models import (
    AgentConnection,
    Dataset,
    FailureMode,
    Judge,
    ModelSweep,
    NotificationSink,
    PreprodRun,
    ShareLink,
    StressTestSuite,
    TraceSession,
)


class Owned(Protocol):
    """A table whose rows belong to one project."""

    @property
    def project_id(self) -> str: ...


M = TypeVar("M", bound=Owned)


def owned_by(entity: type[Owned], project_id: str) -> ColumnElement[bool]:
    """The project filter: `entity`'s rows that belong to `project_id`."""
    column = cast("InstrumentedAttribute[str]", entity.project_id)
    return column == project_id


def in_project(entity: type[M], project_id: str) -> Select[M]:
    """Every row of `entity` in the project; add conditions, order and limits to it."""
    return select(entity).where(owned_by(entity, project_id))


@dataclass(frozen=True, slots=True)
class Resource(Generic[M]):
    """A kind of resource a project owns, as a caller names it: its table, the column its id
    lives in, the word the error uses and the field the error points at."""

    entity: type[M]
    what: str
    field: str
    key: str = "id"
    prefix: str | None = None
    """How its ids start; an id that does not is told so (a name given for an id, say)."""

    def missing(self, ident: str, *, field: str | None = None) -> NotFound:
        """The one answer for an id this project does not have, created or not; the id is quoted
        at most 200 characters long (a path can carry thousands)."""
        hint = ""
        if self.prefix is not None and not ident.startswith(self.prefix):
            hint = f" (its ids start with {self.prefix})"
        return NotFound(
            f"no {self.what} {safe_label(ident, 200)} in this project{hint}",
            field=field or self.field,
        )

    def by_id(self, project_id: str, ident: str) -> Select[M]:
        return in_project(self.entity, project_id).where(getattr(self.entity, self.key) == ident)


RUN = Resource(PreprodRun, "pre-prod run", "run_id", prefix="ppr_")
DATASET = Resource(Dataset, "dataset", "dataset_id", prefix="ds_")
CONNECTION = Resource(AgentConnection, "agent connection", "connection_id", prefix="conn_")
JUDGE = Resource(Judge, "judge", "judge_id", prefix="jdg_")
SINK = Resource(NotificationSink, "notification sink", "sink_id", prefix="sink_")
SESSION = Resource(TraceSession, "session", "session_id", key="trace_id")
SWEEP = Resource(ModelSweep, "model sweep", "sweep_id", prefix="msw-")
SHARE_LINK = Resource(ShareLink, "share link", "link_id", prefix="shl_")
FAILURE_MODE = Resource(FailureMode, "failure mode", "failure_mode_id", prefix="fm_")
SUITE = Resource(StressTestSuite, "stress-test suite", "suite_id", prefix="sts_")


async def owned(
    s: AsyncSession,
    resource: Resource[M],
    project_id: str,
    ident: str,
    *,
    field: str | None = None,
    for_update: bool = False,
) -> M:
    """The row `ident` of `resource` in this project, else `resource.missing(ident)`.

    `for_update` locks the row (PostgreSQL) for a read-modify-write; `field` names the request
    field the id came from when it is not the path parameter."""
    query: Select[Any] = resource.by_id(project_id, ident)
    if for_update:
        query = query.with_for_update()
    row: M | None = await s.scalar(query)
    if row is None:
        raise resource.missing(ident, field=field)
    return row
