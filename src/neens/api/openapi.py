"""The OpenAPI document, completed with the error answers every route can give.

FastAPI documents only the success answer and a 422 in its own validation shape. Clients (and
schemathesis) need every status a route can answer, each in the one error shape, and the bearer
key the routes take; this adds them from what each operation has (a body, parameters, a key).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from neens.api.errors import ErrorEnvelope

SECURITY_SCHEME = "apiKey"
OPEN_TAGS = frozenset({"health"})
"""Operations with these tags take no key (the index and `/healthz`); every other one does."""
OPEN_OPERATIONS = frozenset({"share_links-shared"})
"""Operations that take no key though their tag's others do (`GET /share/{token}`)."""
_ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}
_WHEN = {
    "400": "The body cannot be decoded: malformed JSON (with its position), protobuf or gzip, "
    "or nested too deeply.",
    "401": "No key, a malformed Authorization header, or an unknown or revoked key.",
    "403": "The key's role may not use this route.",
    "404": "No such resource in the key's project.",
    "409": "The resource exists already, or its state forbids the change.",
    "413": "The body is over NEENS_MAX_REQUEST_BYTES.",
    "415": "A Content-Type or Content-Encoding the route does not read.",
    "422": "A well-formed request with a wrong field or parameter; every problem is listed.",
}


def _error_statuses(method: str, operation: dict[str, Any], needs_key: bool) -> list[str]:
    statuses = []
    has_body = "requestBody" in operation
    has_params = bool(operation.get("parameters"))
    if has_body:
        statuses += ["400", "413", "415"]
    if needs_key:
        statuses += ["401", "403"]
    if has_params or has_body:
        statuses.append("404")
    if needs_key and method in ("post", "put", "patch", "delete"):
        statuses.append("409")
    if has_body or has_params:
        statuses.append("422")
    return statuses


def document_errors(schema: dict[str, Any]) -> None:
    """Add the error answers, the error shape and the bearer key to `schema` in place."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    envelope = ErrorEnvelope.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    schemas.update(envelope.pop("$defs", {}))
    schemas["ErrorEnvelope"] = envelope
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (nk_live_…) created with `neens keys create`.",
    }
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            needs_key = not (
                OPEN_TAGS.intersection(operation.get("tags", ()))
                or operation.get("operationId") in OPEN_OPERATIONS
            )
            if needs_key:
                operation.setdefault("security", [{SECURITY_SCHEME: []}])
            responses = operation.setdefault("responses", {})
            for status in _error_statuses(method, operation, needs_key):
                responses[status] = {
                    "description": _WHEN[status],
                    "content": {"application/json": {"schema": _ENVELOPE_REF}},
                }


def install_openapi(app: FastAPI) -> None:
    """Make `app.openapi()` return the completed document (built once, as FastAPI caches it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document_errors(build())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
