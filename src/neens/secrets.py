"""Secrets at rest: agent-connection headers, judge API keys and notification-sink headers.

Each secret value is encrypted with Fernet (AES-128-CBC with an HMAC-SHA256, from the
`cryptography` package) and stored as `enc:<token>`; header names stay readable so the API can
list them without decrypting anything. Keys come from `NEENS_SECRET_KEYS`, comma-separated: the
first encrypts, every one decrypts (`MultiFernet`), which is how a key is rotated (add the new key
first, run `neens secrets reencrypt`, then drop the old one).

Without `NEENS_SECRET_KEYS`, the embedded SQLite setup keeps one generated key in
`<NEENS_HOME>/secret.key` (mode 0600), next to the database it protects. On PostgreSQL the key
must be configured: servers and workers on several machines share one database, and a key
generated on one of them could not decrypt what another wrote.

Values stored before encryption existed (no `enc:` prefix) are read as they are and encrypted
when the server or a worker starts (`store.secrets.reencrypt`).

The same keys sign the pages' session cookies, through keys derived from them for that purpose
alone (`SecretBox.derived_keys`), so a cookie reveals nothing of the keys that encrypt secrets.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy.engine import make_url

from neens.settings import Settings

PREFIX = "enc:"
KEY_FILE = "secret.key"


class SecretKeyError(Exception):
    """The secret keys are missing or malformed, or cannot decrypt a stored secret."""


@dataclass(frozen=True, slots=True)
class SecretBox:
    """Encrypts with the first key, decrypts with any."""

    primary: Fernet
    keys: MultiFernet
    raw: tuple[bytes, ...] = ()
    """The keys' bytes, in the configured order, for `derived_keys`."""
    _derived: dict[str, list[bytes]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`derived_keys` by purpose, derived once: every page request and list page needs them."""

    def seal(self, value: str) -> str:
        return PREFIX + self.primary.encrypt(value.encode()).decode("ascii")

    def open(self, stored: str, *, what: str) -> str:
        """The plain value; `what` names the secret in the error when no key decrypts it."""
        if not stored.startswith(PREFIX):
            return stored
        try:
            return self.keys.decrypt(stored[len(PREFIX) :].encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            raise SecretKeyError(
                f"{what} cannot be decrypted with NEENS_SECRET_KEYS: the key it was encrypted "
                "with is not among them; add that key back (it may stay second in the list)"
            ) from None

    def is_current(self, stored: str) -> bool:
        """Whether `stored` is encrypted with the first key (nothing to re-encrypt)."""
        if not stored.startswith(PREFIX):
            return False
        try:
            self.primary.decrypt(stored[len(PREFIX) :].encode("ascii"))
        except InvalidToken:
            return False
        return True

    def derived_keys(self, purpose: str) -> list[bytes]:
        """One 32-byte key per configured key, in the same order, for another use than
        encrypting secrets (the pages' signed cookies, list cursors): HKDF-SHA256 with `purpose`
        as its info, so a key derived for one purpose reveals nothing of the secret keys or of
        another purpose's keys. The first signs; all verify, so rotation works as it does for
        secrets.
        """
        keys = self._derived.get(purpose)
        if keys is None:
            keys = self._derived[purpose] = [
                HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(
                    key
                )
                for key in self.raw
            ]
        return keys

    def seal_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {name: self.seal(value) for name, value in headers.items()}

    def open_headers(self, headers: dict[str, str], *, what: str) -> dict[str, str]:
        return {
            name: self.open(value, what=f"header {name!r} of {what}")
            for name, value in headers.items()
        }


def generate_key() -> str:
    """A new random key, in the form `NEENS_SECRET_KEYS` takes."""
    return Fernet.generate_key().decode("ascii")


def box_from_keys(keys: list[str]) -> SecretBox:
    if not keys:
        raise SecretKeyError("NEENS_SECRET_KEYS is empty: give at least one key")
    fernets = []
    for index, key in enumerate(keys):
        try:
            fernets.append(Fernet(key.encode("ascii")))
        except (ValueError, UnicodeError):
            raise SecretKeyError(
                f"NEENS_SECRET_KEYS key #{index + 1} is not a valid key (32 url-safe base64 "
                "bytes); make one with `neens secrets generate-key`"
            ) from None
    raw = tuple(base64.urlsafe_b64decode(key.encode("ascii")) for key in keys)
    return SecretBox(fernets[0], MultiFernet(fernets), raw)


def parse_keys(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def load_secret_box(settings: Settings) -> SecretBox:
    """The keys in use: `NEENS_SECRET_KEYS`, else (SQLite only) `<home>/secret.key`."""
    if settings.secret_keys:
        return box_from_keys(parse_keys(settings.secret_keys))
    if make_url(settings.resolved_database_url()).get_backend_name() != "sqlite":
        raise SecretKeyError(
            "NEENS_SECRET_KEYS is required with PostgreSQL, so that every server and worker "
            "encrypts and decrypts stored secrets with the same key: create one with "
            "`neens secrets generate-key` and set it on each of them"
        )
    return box_from_keys([_home_key(settings.home / KEY_FILE)])


def _home_key(path: Path) -> str:
    """The key kept in `path`, created (mode 0600) on first use."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(100):  # another process may have created it and not yet written it
            if key := path.read_text(encoding="ascii").strip():
                return key
            time.sleep(0.01)
        raise SecretKeyError(
            f"{path} is empty: delete it only if no secret was stored yet"
        ) from None
    key = generate_key()
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(key + "\n")
    return key
