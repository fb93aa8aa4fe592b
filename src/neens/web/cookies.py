"""The pages' session cookie: `<payload>.<signature>`, both base64url, signed with HMAC-SHA256.

The payload holds the id of the key that signed in (never the key), a CSRF token and when the
session began. It is signed, not encrypted: nothing in it is secret from its own browser. The
signing keys are derived from the server's secret keys (`SecretBox.derived_keys`), so a restart
keeps everyone signed in, every server of one database accepts the same cookie, and a rotated
secret key keeps verifying cookies until it is removed. Pure functions; no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

COOKIE = "neens_session"
PURPOSE = "neens pages session cookie v1"
"""The HKDF info the signing keys are derived with."""
LIFETIME_S = 12 * 3600
"""A session lasts 12 hours from sign-in; then the key is asked for again."""
CLOCK_SKEW_S = 300
"""A session stamped up to this far in the future (another server's clock) is still accepted."""
MAX_COOKIE_CHARS = 1024


@dataclass(frozen=True, slots=True)
class PageSession:
    key_id: str | None
    """The signed-in key's id; None before sign-in, when the cookie only carries the sign-in
    form's CSRF token."""
    csrf: str
    """Every form posts it back; compared in constant time."""
    issued_at: int
    """Unix seconds."""


def new_session(key_id: str | None, now: float) -> PageSession:
    return PageSession(key_id, secrets.token_urlsafe(32), int(now))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest())


def encode(session: PageSession, key: bytes) -> str:
    payload = _b64(
        json.dumps(
            {"k": session.key_id, "c": session.csrf, "t": session.issued_at},
            separators=(",", ":"),
        ).encode()
    )
    return f"{payload}.{_sign(key, payload)}"


def decode(cookie: str | None, keys: list[bytes], now: float) -> PageSession | None:
    """The session `cookie` holds when one of `keys` signed it and it has not expired; None
    for anything else (missing, altered, expired, from the future, malformed)."""
    if not cookie or len(cookie) > MAX_COOKIE_CHARS or not cookie.isascii():
        return None
    payload, dot, signature = cookie.partition(".")
    if not dot:
        return None
    if not any(hmac.compare_digest(_sign(key, payload), signature) for key in keys):
        return None
    try:
        data = json.loads(_unb64(payload))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    key_id, csrf, issued = data.get("k"), data.get("c"), data.get("t")
    if not (key_id is None or isinstance(key_id, str)) or not isinstance(csrf, str) or not csrf:
        return None
    if type(issued) is not int or not now - LIFETIME_S < issued <= now + CLOCK_SKEW_S:
        return None
    return PageSession(key_id, csrf, issued)
