"""Reading raw request bodies under the documented size cap, gzip included.

The cap (`NEENS_MAX_REQUEST_BYTES`) applies to the bytes received on every route
(`neens.api.middleware.BodyLimitMiddleware`) and, here, to the decompressed size too, so a small
gzip bomb is refused with 413 instead of being inflated into memory.
"""

from __future__ import annotations

import zlib

from fastapi import Request

from neens.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType


def too_large(cap: int) -> PayloadTooLarge:
    """The 413 for any body over the cap, on any route."""
    return PayloadTooLarge(
        f"request body is over the {cap}-byte limit (NEENS_MAX_REQUEST_BYTES); "
        "split it into smaller requests (fewer spans, sessions or items per request)"
    )


async def read_body(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise too_large(cap)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise too_large(cap)
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported; send gzip or no encoding",
            field="Content-Encoding",
        )
    return gunzip(body, cap)


def gunzip(body: bytes, cap: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, cap + 1)
        if len(out) > cap or inflater.unconsumed_tail:
            raise too_large(cap)
        out += inflater.flush()
    except zlib.error as exc:
        raise InvalidInput(f"body is not valid gzip: {exc}", field="Content-Encoding") from exc
    if not inflater.eof:
        raise InvalidInput("gzip body is truncated", field="Content-Encoding")
    if len(out) > cap:
        raise too_large(cap)
    return out
