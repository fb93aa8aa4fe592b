"""A runner-mode run that waits for traces says why none linked: a misspelled correlation key,
or traces that carry no correlation attributes at all."""

from __future__ import annotations

import os

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.otlp import export_request, span
from tests.support.preprod import create_run, golden_dataset

ITEMS = [{"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."}]
PROTO = {"Content-Type": "application/x-protobuf"}


async def _export(client: httpx.AsyncClient, key: CreatedKey, **attributes: str) -> str:
    body = export_request([span(os.urandom(16), os.urandom(8), "agent.run", **attributes)])
    r = await client.post(
        "/v1/traces", content=body.SerializeToString(), headers={**auth(key), **PROTO}
    )
    assert r.status_code == 200, r.text
    return ExportTraceServiceResponse.FromString(r.content).partial_success.error_message


async def _waiting_message(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> str:
    run = (await client.get(f"/preprod-evals/{run_id}", headers=auth(key))).json()
    assert run["status"] == "awaiting_traces"
    message: str = run["waitingFor"]["message"]
    return message


async def test_a_misspelled_run_id_key_is_named_on_the_run_and_to_the_exporter(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    assert "misspelled" not in await _waiting_message(client, ingest_key, run["id"])

    answer = await _export(client, ingest_key, **{"neens.eval_runid": run["id"]})

    assert "attribute 'neens.eval_runid' looks like 'neens.eval_run_id'" in answer
    message = await _waiting_message(client, ingest_key, run["id"])
    assert message.startswith("waiting for your runner: 1 item still without a trace")
    assert "1 trace(s) received since the run was created have a misspelled correlation key" in (
        message
    )
    assert "'neens.eval_runid' looks like 'neens.eval_run_id'" in message


async def test_traces_without_correlation_attributes_are_counted_on_the_run(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)

    await _export(client, ingest_key, **{"service.name": "my-agent"})
    await _export(client, ingest_key, **{"service.name": "my-agent"})

    message = await _waiting_message(client, ingest_key, run["id"])
    assert "2 trace(s) received since the run was created carry no neens.eval_run_id" in message
    assert "OTEL_RESOURCE_ATTRIBUTES" in message
