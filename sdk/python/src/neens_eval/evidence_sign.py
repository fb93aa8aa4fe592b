"""Signing an evidence bundle, and checking a signature: a DSSE envelope (Dead Simple Signing
Envelope, github.com/secure-systems-lab/dsse) whose payload is an in-toto Statement v1 listing
every file of the bundle with its sha256, signed with an offline Ed25519 key.

The signature covers the pre-authentication encoding of the payload,

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

(LEN in ASCII decimal), so neither the payload type nor the payload can be swapped. The key
id is the sha256 of the raw 32-byte public key. Keys are PEM files: a PKCS#8 private key to
sign, a SubjectPublicKeyInfo public key to check (`openssl genpkey -algorithm ed25519`, see
docs/evidence.md). This needs the `cryptography` package, imported only here and only when a
bundle is signed or a signature checked, so the rest of the client stays dependency-free.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from neens_eval.errors import ConfigError

PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://neens.dev/evidence-bundle/v1"
SIGNATURE_FILE: Final = "manifest.dsse.json"


class SignatureProblem(Exception):
    """The bundle's signature does not hold (a result, not a usage error)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def statement(files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement: one subject per file, the manifest's description as predicate."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": hashlib.sha256(data).hexdigest()}}
            for name, data in sorted(files.items())
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "format": manifest.get("format"),
            "kind": manifest.get("kind"),
            "subject": manifest.get("subject"),
            "createdAt": manifest.get("createdAt"),
        },
    }


class _Crypto(NamedTuple):
    serialization: Any
    ed25519: Any
    invalid_signature: type[Exception]


def _crypto(flag: str) -> _Crypto:
    """The parts of `cryptography` used here. It is optional, so it is looked up by name, and
    only when a bundle is signed or a signature checked."""
    try:
        return _Crypto(
            importlib.import_module("cryptography.hazmat.primitives.serialization"),
            importlib.import_module("cryptography.hazmat.primitives.asymmetric.ed25519"),
            importlib.import_module("cryptography.exceptions").InvalidSignature,
        )
    except ImportError:
        raise ConfigError(
            f"{flag} needs the cryptography package, which is not installed here: "
            "pip install cryptography (it comes with the neens server package)"
        ) from None


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()


def _raw_public(public_key: Any) -> bytes:
    serialization = _crypto("--key").serialization
    raw: bytes = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw


def load_private_key(path: Path) -> Any:
    crypto = _crypto("--sign")
    serialization = crypto.serialization

    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"--sign {path}: cannot read it ({error.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise ConfigError(
            f"--sign {path}: not an unencrypted PEM private key ({error}); make one with "
            "openssl genpkey -algorithm ed25519 -out signing.pem"
        ) from None
    if not isinstance(key, crypto.ed25519.Ed25519PrivateKey):
        raise ConfigError(f"--sign {path}: an Ed25519 key is needed, got {type(key).__name__}")
    return key


def load_public_key(path: Path) -> Any:
    crypto = _crypto("--key")
    serialization = crypto.serialization

    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"--key {path}: cannot read it ({error.strerror})") from None
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as error:
        raise ConfigError(
            f"--key {path}: not a PEM public key ({error}); export it with "
            "openssl pkey -in signing.pem -pubout -out signing.pub.pem"
        ) from None
    if not isinstance(key, crypto.ed25519.Ed25519PublicKey):
        raise ConfigError(f"--key {path}: an Ed25519 key is needed, got {type(key).__name__}")
    return key


def sign_statement(
    files: Mapping[str, bytes], manifest: Mapping[str, Any], key_path: Path
) -> dict[str, Any]:
    """The DSSE envelope over the Statement of `files`, signed with the key at `key_path`."""
    key = load_private_key(key_path)
    payload = json.dumps(statement(files, manifest), sort_keys=True).encode()
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {
                "keyid": key_id(_raw_public(key.public_key())),
                "sig": base64.b64encode(signature).decode(),
            }
        ],
    }


def check_envelope(root: Path, envelope: Any, public_key: Any) -> list[str]:
    """What is wrong with the envelope of the bundle in `root`: one of its signatures must
    verify with `public_key`, and its Statement must list exactly the bundle's files with their
    sha256. An empty list when it holds."""
    invalid_signature = _crypto("--key").invalid_signature
    payload = _payload(envelope)
    if payload is None:
        return [f"{SIGNATURE_FILE} is not a DSSE envelope of {PAYLOAD_TYPE} with a base64 payload"]
    wanted = key_id(_raw_public(public_key))
    problems: list[str] = []
    for entry in envelope.get("signatures") or []:
        if not isinstance(entry, dict) or entry.get("keyid") not in (None, "", wanted):
            continue
        try:
            public_key.verify(
                base64.b64decode(str(entry.get("sig")), validate=True),
                pae(PAYLOAD_TYPE, payload),
            )
        except (invalid_signature, ValueError):
            continue
        break
    else:
        problems.append("no signature in the envelope verifies with the given --key")
    return problems + statement_problems(root, envelope)


def _payload(envelope: Any) -> bytes | None:
    if not isinstance(envelope, dict) or envelope.get("payloadType") != PAYLOAD_TYPE:
        return None
    try:
        return base64.b64decode(str(envelope.get("payload")), validate=True)
    except ValueError:
        return None


def statement_problems(root: Path, envelope: Any) -> list[str]:
    """What is wrong with the envelope's Statement: it must list exactly the bundle's files
    (all but the envelope) with their sha256. Standard library only: this much is checked even
    without a key."""
    payload = _payload(envelope)
    if payload is None:
        return [f"{SIGNATURE_FILE} is not a DSSE envelope of {PAYLOAD_TYPE} with a base64 payload"]
    try:
        claimed = json.loads(payload)
    except ValueError:
        return [f"{SIGNATURE_FILE}: its payload is not JSON"]
    if not isinstance(claimed, dict) or claimed.get("_type") != STATEMENT_TYPE:
        return [f"{SIGNATURE_FILE} does not carry an in-toto Statement v1"]
    subjects = {
        str(s.get("name")): (s.get("digest") or {}).get("sha256")
        for s in claimed.get("subject") or []
        if isinstance(s, dict)
    }
    present = {p.name for p in root.iterdir() if p.is_file() and p.name != SIGNATURE_FILE}
    problems = []
    for name in sorted(present | set(subjects)):
        if name not in subjects:
            problems.append(f"{name}: in the bundle but not in the signed Statement")
        elif name not in present:
            problems.append(f"{name}: in the signed Statement, missing from the bundle")
        elif hashlib.sha256((root / name).read_bytes()).hexdigest() != subjects[name]:
            problems.append(f"{name}: its sha256 differs from the signed Statement's")
    return problems
