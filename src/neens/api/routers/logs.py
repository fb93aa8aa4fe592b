"""`POST /v1/logs`: the OTLP/HTTP log receiver (protobuf and JSON, gzip accepted).

Only GenAI content events are kept (docs/traces.md, "Content sent as logs"): each is attached to
the span its trace and span ids name, whether that span has arrived yet or not; when that changes
the output a pre-prod run scored, the item is scored again, or flagged if the run has finished.
Other log records are acknowledged and not stored. Auth, size cap and partial success are those
of `/v1/traces`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from neens.api.deps import IngestDep
from neens.api.otlp_http import EXPORT_RESPONSES, otlp_request_body, read_otlp_body
from neens.engine.ingest import ingest_log_events
from neens.ingest.otlp_logs import (
    decode_logs_json,
    decode_logs_protobuf,
    encode_logs_response,
    logs_rejections_message,
)

router = APIRouter(tags=["traces"])


@router.post(
    "/v1/logs",
    operation_id="traces-export_logs",
    openapi_extra=otlp_request_body("ExportLogsServiceRequest"),
    response_class=Response,
    responses=EXPORT_RESPONSES,
)
async def export_logs(request: Request, ingest: IngestDep) -> Response:
    """Receive an OTLP ExportLogsServiceRequest. Answers in the encoding it was sent."""
    otlp = await read_otlp_body(request, ingest.settings.max_request_bytes)
    decoded = decode_logs_json(otlp.body) if otlp.is_json else decode_logs_protobuf(otlp.body)
    if await ingest_log_events(ingest.writer.db, ingest.principal.project_id, decoded.events):
        ingest.worker.notify()
    message = logs_rejections_message(decoded.rejections)
    return Response(
        encode_logs_response(len(decoded.rejections), message, json=otlp.is_json),
        media_type=otlp.content_type,
    )
