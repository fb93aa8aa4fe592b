"""A session's input and output are stored once: when they are, verbatim, an attribute of one
of its spans, the session row refers to that attribute instead of holding a second copy, and
every reader still gets the text."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import httpx
from sqlalchemy import select, text

from neens.domain.spans import SpanRecord
from neens.store import migrate
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import TraceSession
from neens.store.session_reads import SessionFilter, list_sessions
from neens.store.sessions import _text_or_reference
from tests.conftest import auth
from tests.support.otlp import agent_trace, export_request, span

PROTO = {"Content-Type": "application/x-protobuf"}
PROMPT = "Where is order 17? " + "é" * 5_000
ANSWER = "It shipped yesterday. " + "🚚" * 3_000


async def _export(client: httpx.AsyncClient, key: CreatedKey, spans: list[Any]) -> None:
    body = export_request(spans).SerializeToString()
    r = await client.post("/v1/traces", content=body, headers={**auth(key), **PROTO})
    assert r.status_code == 200, r.text


async def _row(db: Database, trace_id: str) -> Any:
    async with db.read() as s:
        return (
            await s.execute(
                text(
                    "SELECT input, input_span_id, input_key, output, output_span_id, output_key "
                    "FROM sessions WHERE trace_id = :t"
                ),
                {"t": trace_id},
            )
        ).one()


async def _read(db: Database, trace_id: str) -> tuple[str | None, str | None]:
    async with db.read() as s:
        row = (
            await s.execute(
                select(TraceSession.input, TraceSession.output).where(
                    TraceSession.trace_id == trace_id
                )
            )
        ).one()
    return row.input, row.output


async def test_a_verbatim_attribute_is_referred_to_and_reads_back_exactly(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace(prompt=PROMPT, answer=ANSWER)
    await _export(client, ingest_key, spans)
    row = await _row(db, tid.hex())
    root = spans[0].span_id.hex()
    assert (row.input, row.input_span_id, row.input_key) == (None, root, "input.value")
    assert (row.output, row.output_span_id, row.output_key) == (None, root, "output.value")
    assert await _read(db, tid.hex()) == (PROMPT, ANSWER)
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert (session["input"], session["output"]) == (PROMPT, ANSWER)
    listed = (await client.get("/sessions", headers=auth(ingest_key))).json()
    [item] = [s for s in listed["sessions"] if s["id"] == tid.hex()]
    assert item["input"] == PROMPT


async def test_spans_arriving_later_re_derive_the_reference(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace(prompt=PROMPT, answer=ANSWER)
    await _export(client, ingest_key, spans[1:])  # the root (which holds both texts) comes last
    before = await _read(db, tid.hex())
    assert before[0] != PROMPT
    await _export(client, ingest_key, spans[:1])
    row = await _row(db, tid.hex())
    assert row.input is None and row.input_key == "input.value"
    assert await _read(db, tid.hex()) == (PROMPT, ANSWER)


async def test_text_derived_from_messages_is_stored_as_text(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    messages_in = [{"role": "user", "parts": [{"type": "text", "content": "hello there"}]}]
    messages_out = [{"role": "assistant", "parts": [{"type": "text", "content": "hi back"}]}]
    llm = span(
        tid,
        os.urandom(8),
        "chat",
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(messages_in),
            "gen_ai.output.messages": json.dumps(messages_out),
        },
    )
    await _export(client, ingest_key, [llm])
    row = await _row(db, tid.hex())
    assert (row.input, row.input_key, row.output, row.output_key) == (
        "hello there",
        None,
        "hi back",
        None,
    )
    assert await _read(db, tid.hex()) == ("hello there", "hi back")


async def test_a_list_with_previews_cuts_texts_in_the_database_by_characters(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    """Referred texts (a span's attribute) and texts of the row alike, cut by characters, not
    bytes: `é` and `🚚` take two and four bytes in UTF-8."""
    referred, spans = agent_trace(prompt=PROMPT, answer=ANSWER)
    await _export(client, ingest_key, spans)
    own = os.urandom(16)
    messages = [{"role": "user", "parts": [{"type": "text", "content": "é🚚" * 40}]}]
    llm = span(
        own,
        os.urandom(8),
        "chat",
        **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(messages)},
    )
    await _export(client, ingest_key, [llm])
    assert (await _row(db, own.hex())).input == "é🚚" * 40  # held by the row itself

    page, _ = await list_sessions(
        db, ingest_key.project_id, SessionFilter(), limit=10, after=None, preview_chars=25
    )
    texts = {s.trace_id: (s.summary.input, s.summary.output) for s in page}
    assert texts[referred.hex()] == (PROMPT[:25], ANSWER[:25])
    assert texts[own.hex()] == (("é🚚" * 40)[:25], None)
    whole, _ = await list_sessions(db, ingest_key.project_id, SessionFilter(), limit=10, after=None)
    assert {s.trace_id: (s.summary.input, s.summary.output) for s in whole}[referred.hex()] == (
        PROMPT,
        ANSWER,
    )
    assert [s.trace_id for s in page] == [s.trace_id for s in whole]


def test_a_key_that_a_json_path_would_need_to_escape_keeps_the_text() -> None:
    value = "some prompt"
    record = SpanRecord(
        trace_id="t",
        span_id="s1",
        parent_span_id=None,
        name="agent",
        kind=None,
        start_time=None,
        end_time=None,
        status_code=None,
        status_message=None,
        attributes={'input "value"': value},
    )
    assert _text_or_reference(value, "s1", [record]) == (value, None, None)
    safe = replace(record, attributes={"input.value": value})
    assert _text_or_reference(value, "s1", [safe]) == (None, "s1", "input.value")
    # An equal string that is not the attribute's own value is not taken for it.
    assert _text_or_reference("".join(["some ", "prompt"]), "s1", [safe])[0] == value
    assert _text_or_reference(value, "other", [safe]) == (value, None, None)


async def test_going_back_a_revision_copies_referred_text_into_the_row(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey, database_url: str
) -> None:
    tid, spans = agent_trace(prompt=PROMPT, answer=ANSWER)
    await _export(client, ingest_key, spans)
    await migrate.downgrade(database_url, "0018")
    async with db.read() as s:
        row = (
            await s.execute(
                text("SELECT input, output FROM sessions WHERE trace_id = :t"), {"t": tid.hex()}
            )
        ).one()
    assert (row.input, row.output) == (PROMPT, ANSWER)
    await migrate.upgrade(database_url)
    assert await _read(db, tid.hex()) == (PROMPT, ANSWER)
