"""`POST /v1/traces`: the OTLP/HTTP trace receiver (protobuf and JSON, gzip accepted).

Spans are acknowledged only once they are committed: a 200 means every span not counted in
`partialSuccess.rejectedSpans` is durable. Dubious values in stored spans are reported in
`partialSuccess.errorMessage` too, with `rejectedSpans` unchanged (OTLP's warning).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from neens.api.deps import IngestDep
from neens.api.otlp_http import EXPORT_RESPONSES, otlp_request_body, read_otlp_body
from neens.engine.ingest import ingest_spans
from neens.ingest.otlp import decode_json, decode_protobuf, encode_response, rejections_message

router = APIRouter(tags=["traces"])


@router.post(
    "/v1/traces",
    operation_id="traces-export",
    openapi_extra=otlp_request_body("ExportTraceServiceRequest"),
    response_class=Response,
    responses=EXPORT_RESPONSES,
)
async def export_traces(request: Request, ingest: IngestDep) -> Response:
    """Receive an OTLP ExportTraceServiceRequest. Answers in the encoding it was sent."""
    otlp = await read_otlp_body(request, ingest.settings.max_request_bytes)
    batch = decode_json(otlp.body) if otlp.is_json else decode_protobuf(otlp.body)
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
        encode_response(len(rejections), message, json=otlp.is_json),
        media_type=otlp.content_type,
    )
