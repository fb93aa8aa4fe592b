"""Keeping every stored secret encrypted with the current key.

`reencrypt` runs when a server or worker starts (`rotate=False`: values stored before encryption
existed are encrypted, and every value is checked to decrypt, so a wrong key is reported at
start rather than as failed calls later) and from `neens secrets reencrypt` (`rotate=True`:
values encrypted with an older key are encrypted again with the first one, after which the
older key can be dropped). Secrets are a few rows per project, so one pass over them is cheap.
"""

from __future__ import annotations

from sqlalchemy import select

from neens.secrets import PREFIX, SecretBox
from neens.store.db import Database
from neens.store.models import AgentConnection, Judge, NotificationSink


def _fresh(box: SecretBox, stored: str, what: str, rotate: bool) -> str | None:
    """The value to store instead of `stored`, or None to keep it."""
    plain = box.open(stored, what=what)
    if stored.startswith(PREFIX) and (not rotate or box.is_current(stored)):
        return None  # only a rotation decrypts a second time, to tell the key apart
    return box.seal(plain)


def _fresh_headers(
    box: SecretBox, headers: dict[str, str], what: str, rotate: bool
) -> dict[str, str] | None:
    changed = False
    out: dict[str, str] = {}
    for name, value in headers.items():
        new = _fresh(box, value, f"header {name!r} of {what}", rotate)
        changed = changed or new is not None
        out[name] = value if new is None else new
    return out if changed else None


async def reencrypt(db: Database, *, rotate: bool) -> int:
    """Encrypt plaintext secrets (and, with `rotate`, older-key ones) with the first key.

    Returns how many rows were rewritten; raises `SecretKeyError` naming the first secret that
    no configured key decrypts (nothing is written then).
    """
    box = db.secrets
    rewritten = 0
    async with db.write() as s:
        for connection in await s.scalars(select(AgentConnection).order_by(AgentConnection.id)):
            headers = _fresh_headers(
                box, connection.headers, f"agent connection {connection.id}", rotate
            )
            if headers is not None:
                connection.headers = headers
                rewritten += 1
        for sink in await s.scalars(select(NotificationSink).order_by(NotificationSink.id)):
            headers = _fresh_headers(box, sink.headers, f"notification sink {sink.id}", rotate)
            if headers is not None:
                sink.headers = headers
                rewritten += 1
        for judge in await s.scalars(
            select(Judge).where(Judge.secret.is_not(None)).order_by(Judge.id)
        ):
            assert judge.secret is not None
            secret = _fresh(box, judge.secret, f"the API key of judge {judge.id}", rotate)
            if secret is not None:
                judge.secret = secret
                rewritten += 1
    return rewritten
