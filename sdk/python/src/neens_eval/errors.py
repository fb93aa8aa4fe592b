"""Every error the Neens client raises on purpose, as one tree.

    NeensClientError        base; `exit_code` is what the `neens` command exits with
    ├── ConfigError         exit 2: bad usage or configuration (missing variable, bad input file)
    ├── ApiError            the server answered with an error body (status, code, message, field)
    │   │                   exit 2 for a 4xx answer (fix the request), 3 for a 5xx one
    │   └── AuthError       exit 2: 401 or 403, the API key was refused
    └── Unreachable         exit 3: no usable answer from the server, even after retries
        └── BodyCutOff      the connection was closed while the body was sent (too large?)

Exit codes 1 and 4 are results, not errors, so no error here ever maps to them: 1 is "a
requirement you asked for is not met" (a failed gate, `--require-all-arms`), and 4
(`EXIT_UNTRUSTED`) is "the evidence cannot be trusted or does not exist" (a void, failed or
cancelled model sweep).

The server's error body is `{"error": {"code": str, "message": str, "field"?: str}}`;
`ApiError.from_body` reads it and falls back to the HTTP status line when the body is anything
else (a proxy's HTML page, for instance).
"""

from __future__ import annotations

import json

EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_UNTRUSTED = 4
"""A result that must never look like a pass: a void sweep (its comparison is not fair), or a
failed or cancelled one (the evidence does not exist)."""


class NeensClientError(Exception):
    """Base of every error the client raises on purpose."""

    exit_code: int = EXIT_USAGE


class ConfigError(NeensClientError):
    """The command line, the environment or an input file is wrong; nothing was sent."""

    exit_code = EXIT_USAGE


class ApiError(NeensClientError):
    """The server answered with an error.

    `str()` is one line meant for a person: the message, the field it concerns when the server
    named one, and the status and code so the error can be looked up.
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        # A 4xx means the request must change before it can succeed; a 5xx is the server's
        # problem, which the caller handles like an outage (retry later, alert the operator).
        self.exit_code = EXIT_UNREACHABLE if status >= 500 else EXIT_USAGE
        super().__init__(status, code, message, field)

    def __str__(self) -> str:
        # The server often starts its message with the field already; do not say it twice.
        where = f" (field {self.field})" if self.field and self.field not in self.message else ""
        return f"{_one_line(self.message)}{where} [HTTP {self.status} {self.code}]"

    @classmethod
    def from_body(cls, status: int, reason: str, body: bytes) -> ApiError:
        """Build the error for an HTTP error answer, picking `AuthError` for 401 and 403."""
        code, message, field = f"http_{status}", reason or "error", None
        try:
            document = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            document = None
        error = document.get("error") if isinstance(document, dict) else None
        if isinstance(error, dict):
            if isinstance(error.get("code"), str):
                code = error["code"]
            if isinstance(error.get("message"), str):
                message = error["message"]
            if isinstance(error.get("field"), str):
                field = error["field"]
        error_class = AuthError if status in (401, 403) else ApiError
        return error_class(status, code, message, field)


class AuthError(ApiError):
    """401 or 403: the API key is missing, unknown, revoked, or its role may not do this."""

    def __str__(self) -> str:
        hint = (
            "check NEENS_API_KEY"
            if self.status == 401
            else "use a key whose role is allowed to do this"
        )
        return f"{super().__str__()}; {hint}"


class Unreachable(NeensClientError):
    """No usable answer from the server after every retry: refused, reset, timed out, or 502-504.

    `maybe_applied` is set when a request that creates something was sent but got no answer:
    the server may have acted on it, so it was not sent again.
    """

    exit_code = EXIT_UNREACHABLE

    def __init__(self, message: str, *, maybe_applied: bool = False) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class BodyCutOff(Unreachable):
    """The server closed the connection while the request's body was being sent, and no answer
    could be read: typically a body over the server's size limit (NEENS_MAX_REQUEST_BYTES),
    refused before it was read. The request was not sent again (a bigger body will not fit the
    next time either), and the server cannot have acted on a body it did not receive whole."""

    def __init__(self, message: str, *, body_bytes: int) -> None:
        super().__init__(message)
        self.body_bytes = body_bytes


def _one_line(text: str) -> str:
    """Collapse a message onto one line so each error stays one line on a terminal or in CI."""
    return " ".join(text.split())
