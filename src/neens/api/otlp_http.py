"""What the OTLP/HTTP receivers (`/v1/traces`, `/v1/logs`) share: the two encodings, their
OpenAPI request body, and reading a body in the encoding its Content-Type names."""

from __future__ import annotations

from typing import Any, NamedTuple

from fastapi import Request

from neens.api.body import read_body
from neens.errors import UnsupportedMediaType

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {PROTOBUF: {}, JSON: {}}, "description": "Export response"}
}


def otlp_request_body(message: str) -> dict[str, Any]:
    """The `openapi_extra` of a receiver whose body is the OTLP `message` in either encoding."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                JSON: {"schema": {"type": "object", "description": message}},
            },
        }
    }


class OtlpBody(NamedTuple):
    body: bytes
    content_type: str
    """`PROTOBUF` or `JSON`: the answer is sent in the same encoding."""

    @property
    def is_json(self) -> bool:
        return self.content_type == JSON


async def read_otlp_body(request: Request, cap: int) -> OtlpBody:
    """The body under the size cap (gzip inflated), or 415 for an encoding OTLP does not use."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(
            f"Content-Type {content_type or '(none)'!r} is not accepted; send {PROTOBUF} or {JSON}",
            field="Content-Type",
        )
    return OtlpBody(await read_body(request, cap), content_type)
