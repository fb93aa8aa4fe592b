"""Cursors of the list routes: an opaque token for "the rows after this one".

A cursor holds the last row's sort key, tagged with the list it came from. Keyset paging
(`WHERE key < last ORDER BY key DESC`) reads a deep page as fast as the first and, the key being
immutable, never skips or repeats a row when rows are added while a client pages. Clients pass
`nextCursor` back as it is; its inside may change between versions. Anything that does not
decode to a key of the right list is a 422 naming `cursor`.

The key is sealed (AES-GCM, with a key derived from the server's secret keys for this purpose
alone), not merely encoded: a sort key is often a row number every project's rows share, and
read in the clear it would tell one tenant how many sessions or scores all the others add. A
sealed cursor is also one no client can forge. Any server process with the same secret keys
reads another's cursors, and rotation works as for secrets (the first key seals, all open).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import UTC, datetime
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from fastapi import Query

from neens.errors import Unprocessable
from neens.secrets import SecretBox

Key = tuple[Any, ...]

MAX_CURSOR_CHARS = 512
"""Far longer than any cursor Neens hands out; longer text is refused before decoding."""

_INT_RANGE = (0, 2**62)
"""Row keys and positions are non-negative; the bound keeps `key + 1` within a 64-bit column."""

CURSOR_DESCRIPTION = (
    "The `nextCursor` of the previous page, passed back unchanged, to read the page after it."
)


def cursor_query(description: str = CURSOR_DESCRIPTION) -> Any:
    """The `cursor` query parameter, as every list route declares it."""
    return Query(default=None, max_length=MAX_CURSOR_CHARS, description=description)


PURPOSE: Final = "neens list cursors"
"""The HKDF info the cursor keys are derived with (`SecretBox.derived_keys`)."""
_NONCE_BYTES: Final = 12


def _keys_of(box: SecretBox) -> list[AESGCM]:
    return [AESGCM(key) for key in box.derived_keys(PURPOSE)]


def encode_cursor(kind: str, key: Key, box: SecretBox) -> str:
    """The cursor for the rows after `key` in the list `kind`, sealed with `box`'s first key."""
    values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
    raw = json.dumps([kind, *values], separators=(",", ":"), ensure_ascii=True).encode()
    nonce = os.urandom(_NONCE_BYTES)
    sealed = nonce + _keys_of(box)[0].encrypt(nonce, raw, kind.encode())
    return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def _opened(cursor: str, kind: str, box: SecretBox) -> bytes:
    sealed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    nonce, body = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    if len(nonce) != _NONCE_BYTES:
        raise _refuse()
    for key in _keys_of(box):
        try:
            return key.decrypt(nonce, body, kind.encode())
        except InvalidTag:
            continue
    raise _refuse()


def _refuse() -> Unprocessable:
    return Unprocessable(
        "cursor must be the nextCursor of a previous page of this list, passed back unchanged",
        field="cursor",
    )


def decode_cursor(
    kind: str, cursor: str | None, shape: tuple[type, ...], box: SecretBox
) -> Key | None:
    """The key `cursor` holds, opened with `box` and checked against the list `kind` and its
    key's types (`int`, `str` or `datetime`); None without a cursor."""
    if cursor is None:
        return None
    if not cursor.isascii() or len(cursor) > MAX_CURSOR_CHARS:
        raise _refuse()
    try:
        raw = _opened(cursor, kind, box)
        decoded = json.loads(raw.decode("ascii"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise _refuse() from None
    if not isinstance(decoded, list) or len(decoded) != len(shape) + 1 or decoded[0] != kind:
        raise _refuse()
    return tuple(_value(v, t) for v, t in zip(decoded[1:], shape, strict=True))


def _value(value: object, kind: type) -> Any:
    if kind is int:
        if type(value) is not int or not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise _refuse()
        return value
    if not isinstance(value, str) or not value.isprintable() or len(value) > 256:
        raise _refuse()
    if kind is datetime:
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            raise _refuse() from None
        if instant.tzinfo is None:
            raise _refuse()
        try:
            return instant.astimezone(UTC)
        except OverflowError:
            raise _refuse() from None
    return value


def next_cursor(kind: str, key: Key | None, box: SecretBox) -> str | None:
    return None if key is None else encode_cursor(kind, key, box)
