"""Delivering insights to notification sinks (webhooks), with retries that never block a run.

Job `notify.deliver`: POST the insight as JSON to the sink's URL. A failure (connection error,
timeout, non-2xx) is recorded on the delivery and the job is retried with backoff; after the
last attempt the delivery is marked `failed` and stays visible. A call the destination policy
refuses, or headers that cannot be decrypted, fail the delivery at once: retrying cannot help.
The sink's headers are decrypted only for the call; the request goes through the destination
policy (`engine.destinations`), and text copied from the sink's reply into the recorded error is
bounded. The run that produced the insight finished before any of this started.
"""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from neens.engine.destinations import MAX_EXCERPT_CHARS, DestinationRefused, excerpt
from neens.queue.worker import JobContext
from neens.secrets import SecretKeyError
from neens.store.jobs import MAX_ATTEMPTS
from neens.store.models import Insight, NotificationDelivery, NotificationSink
from neens.store.types import utcnow

DELIVERY_TIMEOUT_S = 10.0


class DeliveryFailed(Exception):
    """The sink did not accept the insight; the job is retried."""


async def _head(reply: httpx.Response) -> str:
    """The start of a reply's body, for the recorded error; the rest is never read."""
    head = b""
    async for chunk in reply.aiter_bytes():
        head += chunk
        if len(head) >= 4 * MAX_EXCERPT_CHARS:
            break
    return excerpt(head)


async def deliver(ctx: JobContext, payload: dict[str, Any]) -> None:
    db = ctx.db
    async with db.read() as s:
        delivery = await s.get(NotificationDelivery, int(payload["delivery"]))
        if delivery is None or delivery.status != "pending":
            return
        sink = await s.get(NotificationSink, delivery.sink_id)
        insight = await s.get(Insight, delivery.insight_id)
    if sink is None or insight is None:
        return
    body = {
        "insight": {
            "id": insight.id,
            "kind": insight.kind,
            "title": insight.title,
            "runId": insight.run_id,
            "details": insight.details,
            "createdAt": insight.created_at.isoformat(),
        }
    }
    client = ctx.http
    status_code: int | None = None
    error: str | None = None
    permanent = False
    """A failure no retry can change (the destination policy, an unreadable secret, a request
    that cannot be sent as configured)."""
    try:
        headers = db.secrets.open_headers(sink.headers, what=f"notification sink {sink.id}")
        async with client.stream(
            "POST", sink.url, json=body, headers=headers, timeout=DELIVERY_TIMEOUT_S
        ) as reply:
            status_code = reply.status_code
            if not reply.is_success:
                error = f"sink answered HTTP {status_code}: {await _head(reply)}".rstrip(": ")
    except SecretKeyError as exc:
        error, permanent = str(exc), True
    except DestinationRefused as exc:
        error, permanent = f"refused to call {sink.url}: {exc}", True
    except httpx.LocalProtocolError as exc:
        # The request itself cannot be sent as configured (a header value saved before such
        # values were refused): the same request would fail the same way every time.
        error, permanent = excerpt(f"{type(exc).__name__}: {exc}".strip(": ")), True
    except httpx.HTTPError as exc:
        error = excerpt(f"{type(exc).__name__}: {exc}".strip(": "))
    async with db.write() as s:
        row = await s.scalar(
            select(NotificationDelivery)
            .where(NotificationDelivery.pk == delivery.pk)
            .with_for_update()
        )
        if row is None:  # the sink was deleted while this was being sent
            return
        row.attempts += 1
        row.last_status_code = status_code
        row.last_error = error
        if error is None:
            row.status = "delivered"
            row.delivered_at = utcnow()
        elif permanent or row.attempts >= MAX_ATTEMPTS:
            row.status = "failed"
        attempts, status = row.attempts, row.status
    if error is not None and status == "pending":
        raise DeliveryFailed(f"attempt {attempts} of {MAX_ATTEMPTS}: {error}")
