"""Insights (things a team should know) and the notification sinks they are delivered to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.jobs import JobKind, enqueue
from neens.store.models import Insight, NotificationDelivery, NotificationSink
from neens.store.tenancy import SINK, owned, owned_by


@dataclass(frozen=True, slots=True)
class InsightInfo:
    id: str
    kind: str
    title: str
    run_id: str | None
    details: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SinkInfo:
    id: str
    name: str
    url: str
    header_names: list[str]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DeliveryInfo:
    sink_id: str
    insight_id: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None


async def add_insight(
    s: AsyncSession,
    project_id: str,
    *,
    kind: str,
    title: str,
    run_id: str | None,
    details: dict[str, Any],
) -> str:
    """Record an insight and queue its delivery to every sink of the project."""
    insight = Insight(
        id=new_id("ins_"),
        project_id=project_id,
        kind=kind,
        title=title,
        run_id=run_id,
        details=details,
    )
    s.add(insight)
    await s.flush()
    sinks = await s.scalars(
        select(NotificationSink.id).where(owned_by(NotificationSink, project_id))
    )
    for sink_id in sinks:
        delivery = NotificationDelivery(sink_id=sink_id, insight_id=insight.id, status="pending")
        s.add(delivery)
        await s.flush()
        await enqueue(
            s,
            JobKind.NOTIFY_DELIVER,
            {"delivery": delivery.pk},
            dedupe_key=f"deliver:{delivery.pk}",
        )
    return insight.id


InsightKey = tuple[datetime, str]
"""Where a page of insights ends: its last insight's `created_at` and id (the list's order)."""


async def list_insights(
    db: Database,
    project_id: str,
    *,
    run_id: str | None,
    limit: int,
    after: InsightKey | None = None,
) -> tuple[list[InsightInfo], InsightKey | None]:
    """Newest first, from after `after`; returns the page and where it ends (None on the
    last page)."""
    query = select(Insight).where(owned_by(Insight, project_id))
    if run_id is not None:
        query = query.where(Insight.run_id == run_id)
    if after is not None:
        created, insight_id = after
        query = query.where(
            or_(
                Insight.created_at < created,
                and_(Insight.created_at == created, Insight.id < insight_id),
            )
        )
    query = query.order_by(Insight.created_at.desc(), Insight.id.desc()).limit(limit + 1)
    async with db.read() as s:
        rows = list(await s.scalars(query))
    page = rows[:limit]
    end = (page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return [
        InsightInfo(r.id, r.kind, r.title, r.run_id, dict(r.details), r.created_at) for r in page
    ], end


SINK_NAME_UNIQUE = "uq_notification_sinks_project_id_name"
"""The constraint that keeps sink names unique in a project (`Database.write_unique`)."""


async def create_sink(
    db: Database, project_id: str, *, name: str, url: str, headers: dict[str, str]
) -> SinkInfo:
    """A new sink; 409 when the project has one of that name (two would be told apart in its
    deliveries only by id)."""
    sealed = db.secrets.seal_headers(headers)

    async def work(s: AsyncSession) -> NotificationSink:
        taken = await s.scalar(
            select(NotificationSink.id).where(
                owned_by(NotificationSink, project_id), NotificationSink.name == name
            )
        )
        if taken is not None:
            raise Conflict(
                f"a notification sink named {name!r} already exists ({taken}); pick another "
                "name, or delete that one first",
                field="name",
            )
        row = NotificationSink(
            id=new_id("sink_"), project_id=project_id, name=name, url=url, headers=sealed
        )
        s.add(row)
        return row

    row = await db.write_unique(work, SINK_NAME_UNIQUE)
    return SinkInfo(row.id, row.name, row.url, sorted(headers), row.created_at)


async def list_sinks(db: Database, project_id: str) -> list[SinkInfo]:
    async with db.read() as s:
        rows = await s.scalars(
            select(NotificationSink)
            .where(owned_by(NotificationSink, project_id))
            .order_by(NotificationSink.created_at, NotificationSink.id)
        )
        return [SinkInfo(r.id, r.name, r.url, sorted(r.headers), r.created_at) for r in rows]


async def delete_sink(db: Database, project_id: str, sink_id: str) -> None:
    """Remove a sink and its deliveries' records: nothing more is sent to it, a delivery under
    way included (its outcome has no row left to be written to). NotFound when the project has
    no such sink."""
    async with db.write() as s:
        row = await owned(s, SINK, project_id, sink_id, for_update=True)
        await s.delete(row)


async def list_deliveries(
    db: Database, project_id: str, sink_id: str, *, limit: int, after: int | None = None
) -> tuple[list[DeliveryInfo], int | None]:
    """Oldest first by row key, from after `after`; returns the page and the key it ends at
    when more follow (None on the last page)."""
    query = select(NotificationDelivery).where(NotificationDelivery.sink_id == sink_id)
    if after is not None:
        query = query.where(NotificationDelivery.pk > after)
    async with db.read() as s:
        await owned(s, SINK, project_id, sink_id)
        rows = list(await s.scalars(query.order_by(NotificationDelivery.pk).limit(limit + 1)))
    page = rows[:limit]
    end = page[-1].pk if len(rows) > limit else None
    return [
        DeliveryInfo(
            r.sink_id,
            r.insight_id,
            r.status,
            r.attempts,
            r.last_status_code,
            r.last_error,
            r.delivered_at,
        )
        for r in page
    ], end
