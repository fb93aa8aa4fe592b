"""`POST /v1/traces`: the OTLP/HTTP trace receiver (protobuf and JSON, gzip accepted).

Spans are acknowledged only once they are committed: a 200 means every span not counted in
`partialSuccess.rejectedSpans` is durable. Dubious values in stored spans are reported in
`partialSuccess.errorMessage` too, with `rejectedSpans` unchanged (OTLP's warning).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from neens.api.body import read_body
from neens.api.deps import IngestDep
from neens.engine.ingest import ingest_spans
from neens.errors import UnsupportedMediaType
from neens.ingest.otlp import decode_json, decode_protobuf, encode_response, rejections_message

router = APIRouter(tags=["traces"])

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_OTLP_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
            JSON: {"schema": {"type": "object", "description": "ExportTraceServiceRequest"}},
        },
    }
}


@router.post(
    "/v1/traces",
    operation_id="traces-export",
    openapi_extra=_OTLP_BODY,
    response_class=Response,
    responses={200: {"content": {PROTOBUF: {}, JSON: {}}, "description": "Export response"}},
)
async def export_traces(request: Request, ingest: IngestDep) -> Response:
    """Receive an OTLP ExportTraceServiceRequest. Answers in the encoding it was sent."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(
            f"Content-Type {content_type or '(none)'!r} is not accepted; send {PROTOBUF} or {JSON}",
            field="Content-Type",
        )
    body = await read_body(request, ingest.settings.max_request_bytes)
    is_json = content_type == JSON
    batch = decode_json(body) if is_json else decode_protobuf(body)
    flagged: list[str] = []
    rejections = list(batch.rejections)
    if batch.spans:
        ingested = await ingest_spans(
            ingest.writer, ingest.principal.project_id, batch.spans, "otlp"
        )
        if ingested.queued:
            ingest.worker.notify()
        flagged = ingested.flagged
        rejections += ingested.rejected
    message = rejections_message(rejections, flagged)
    return Response(
        encode_response(len(rejections), message, json=is_json),
        media_type=content_type,
    )
