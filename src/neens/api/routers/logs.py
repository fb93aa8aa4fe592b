"""`POST /v1/logs`: the OTLP/HTTP log receiver (protobuf and JSON, gzip accepted).

Only GenAI content events are kept (docs/traces.md, "Content sent as logs"): each is attached to
the span its trace and span ids name, whether that span has arrived yet or not. Other log records
are acknowledged and not stored. Auth, size cap and partial success are those of `/v1/traces`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from neens.api.body import read_body
from neens.api.deps import IngestDep
from neens.api.routers.traces import JSON, PROTOBUF
from neens.errors import UnsupportedMediaType
from neens.ingest.otlp_logs import (
    decode_logs_json,
    decode_logs_protobuf,
    encode_logs_response,
    logs_rejections_message,
)
from neens.store.sessions import write_log_events

router = APIRouter(tags=["traces"])

_OTLP_LOGS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
            JSON: {"schema": {"type": "object", "description": "ExportLogsServiceRequest"}},
        },
    }
}


@router.post(
    "/v1/logs",
    operation_id="traces-export_logs",
    openapi_extra=_OTLP_LOGS_BODY,
    response_class=Response,
    responses={200: {"content": {PROTOBUF: {}, JSON: {}}, "description": "Export response"}},
)
async def export_logs(request: Request, ingest: IngestDep) -> Response:
    """Receive an OTLP ExportLogsServiceRequest. Answers in the encoding it was sent."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(
            f"Content-Type {content_type or '(none)'!r} is not accepted; send {PROTOBUF} or {JSON}",
            field="Content-Type",
        )
    body = await read_body(request, ingest.settings.max_request_bytes)
    is_json = content_type == JSON
    decoded = decode_logs_json(body) if is_json else decode_logs_protobuf(body)
    await write_log_events(ingest.writer.db, ingest.principal.project_id, decoded.events)
    message = logs_rejections_message(decoded.rejections)
    return Response(
        encode_logs_response(len(decoded.rejections), message, json=is_json),
        media_type=content_type,
    )
