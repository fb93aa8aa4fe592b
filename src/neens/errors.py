"""Every error Neens raises on purpose, as one tree.

    NeensError                 base; carries an HTTP status, a stable code and optionally a field
    ├── InvalidInput           400: a body that cannot be decoded at all (bad protobuf, bad JSON)
    ├── Unprocessable          422: a well-formed body whose content is wrong; names the field
    ├── NotAuthenticated       401: no key, or a key Neens does not know (or revoked)
    ├── Forbidden              403: a known key whose role may not do this
    ├── NotFound               404: no such resource in the caller's project (never "elsewhere")
    ├── Conflict               409: the resource exists already, or its state forbids the change
    │   └── RunTransitionRefused      a run status change its lifecycle does not allow
    ├── Gone                   410: the resource existed and is no longer served (an expired or
    │                               revoked share link)
    ├── PayloadTooLarge        413: a body over the documented cap
    └── UnsupportedMediaType   415: a content type the route does not read

`neens.api.errors` turns each into the single JSON error shape
`{"error": {"code", "message", "field"?}}`; nothing else produces error bodies.
"""

from __future__ import annotations


class NeensError(Exception):
    """Base of every error Neens raises on purpose."""

    status_code: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code


class InvalidInput(NeensError):
    """A body that cannot be decoded at all."""

    status_code = 400
    code = "invalid_input"


class Unprocessable(NeensError):
    """A decodable body whose content is wrong."""

    status_code = 422
    code = "unprocessable"


class NotAuthenticated(NeensError):
    """No API key, or one Neens does not know."""

    status_code = 401
    code = "not_authenticated"


class Forbidden(NeensError):
    """A valid key whose role may not do this."""

    status_code = 403
    code = "forbidden"


class NotFound(NeensError):
    """No such resource in the caller's project."""

    status_code = 404
    code = "not_found"


class Conflict(NeensError):
    """The resource exists already, or its state forbids the change."""

    status_code = 409
    code = "conflict"


class RunTransitionRefused(Conflict):
    """A pre-prod run status change that the run lifecycle does not allow."""

    def __init__(self, message: str, *, current: str, to: str) -> None:
        super().__init__(message)
        self.current = current
        self.to = to


class Gone(NeensError):
    """A resource that existed and is no longer served: an expired or revoked share link."""

    status_code = 410
    code = "gone"


class PayloadTooLarge(NeensError):
    """A request body over the documented cap."""

    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(NeensError):
    """A content type the route does not read."""

    status_code = 415
    code = "unsupported_media_type"
