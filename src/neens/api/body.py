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
    """Every member of a gzip body, one after another (RFC 1952 allows several; `gzip -d`
    reads them all), under `cap` in total. Zero bytes after the last member are padding, as
    gzip allows; anything else there is refused, never skipped."""
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, cap + 1 - len(out))
            if len(out) + len(part) > cap or inflater.unconsumed_tail:
                raise too_large(cap)
            part += inflater.flush()
        except zlib.error as exc:
            where = "body" if not out else "data after the first gzip member"
            raise InvalidInput(
                f"{where} is not valid gzip: {exc}", field="Content-Encoding"
            ) from exc
        if not inflater.eof:
            raise InvalidInput("gzip body is truncated", field="Content-Encoding")
        out += part
        if len(out) > cap:
            raise too_large(cap)
        rest = inflater.unused_data
        if not rest.strip(b"\x00"):
            return bytes(out)
