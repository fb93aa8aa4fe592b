"""Runner mode with the real OpenTelemetry SDK: an agent run per frozen prompt, its trace
exported to a live server, tagged through resource attributes as `neens eval run` tags it."""

from __future__ import annotations

import time

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from neens.store.keys import CreatedKey
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e

ANSWERS = {
    "Where is order 17?": "Order 17 shipped on 3 June.",
    "Can I return shoes?": "Yes, within 30 days.",
}


def run_agent(server: LiveServer, key: CreatedKey, prompt: str, tags: dict[str, str]) -> None:
    """The agent: a root span with the answer, an LLM call and a tool call, exported in one
    batch (children end first, so the root arrives last)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support", **tags}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"{server.url}/v1/traces", headers={"Authorization": f"Bearer {key.key}"}
            )
        )
    )
    tracer = provider.get_tracer("support-agent")
    with tracer.start_as_current_span("agent.run") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        root.set_attribute("input.value", prompt)
        with tracer.start_as_current_span("llm") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
            llm.set_attribute("llm.model_name", "gpt-4o")
            llm.set_attribute("llm.token_count.prompt", 500)
            llm.set_attribute("llm.token_count.completion", 50)
        with tracer.start_as_current_span("lookup_order") as tool:
            tool.set_attribute("openinference.span.kind", "TOOL")
        root.set_attribute("output.value", ANSWERS[prompt])
    provider.shutdown()


def test_traces_from_the_sdk_link_to_their_items_and_the_gate_passes(
    live_server: LiveServer, key: CreatedKey
) -> None:
    h = {"Authorization": f"Bearer {key.key}"}
    with httpx.Client(timeout=30, base_url=live_server.url, headers=h) as api:
        dataset = api.post("/datasets", json={"name": "golden"}).json()
        items = [{"input": q, "expected_output": a} for q, a in ANSWERS.items()]
        api.post(f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": True})
        run = api.post(
            "/preprod-evals",
            json={
                "dataset_id": dataset["id"],
                "version_label": "local-test",
                "gate": {"min_pass_rate": 0.9, "cost": {"max_avg_usd": 0.01}},
            },
        ).json()
        for item in api.get(f"/preprod-evals/{run['id']}/items").json()["items"]:
            run_agent(
                live_server,
                key,
                item["input"],
                {
                    "neens.eval_run_id": run["id"],
                    "neens.dataset_item_id": item["item_id"],
                    "neens.version_label": "local-test",
                },
            )
        deadline = time.monotonic() + 30
        while (status := api.get(f"/preprod-evals/{run['id']}").json()["status"]) in (
            "awaiting_traces",
            "running",
        ):
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
        assert status == "completed"
        gate = api.get(f"/preprod-evals/{run['id']}/gate").json()
        assert gate["passed"] is True, gate
        assert gate["passRate"] == 1.0
        # gpt-4o: 500 x $2.50/M + 50 x $10/M per session.
        assert gate["costRules"][0]["status"] == "pass"
        assert gate["costRules"][0]["observed"] == pytest.approx(0.00175)
        comparison = api.get(f"/preprod-evals/{run['id']}/comparison").json()
        assert comparison["candidate"]["avgStepCount"] == 2
