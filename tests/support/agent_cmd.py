"""A small agent command for the `neens eval run` tests, instrumented with the real OpenTelemetry
SDK the way a user's agent is: it reads its prompt from stdin, answers from a table, and exports
one trace (a root agent span carrying `output.value`, an LLM call with token usage, tool calls)
through `OTLPSpanExporter()` configured only by the environment `neens eval run` prepared:
OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_HEADERS.

Knobs (environment variables), so one golden dataset can pass, fail, crash or hang per test:

    AGENT_WRONG     prompts, one per line, answered wrongly (the item fails)
    AGENT_CRASH     prompts on which the agent exits with code 3 before exporting anything
    AGENT_HANG      prompts on which the agent sleeps for a minute (for --item-timeout)
    AGENT_SILENT    prompts on which the agent exits 0 without exporting (no trace arrives)
    AGENT_MODEL     the LLM span's model (default gpt-4o; an unknown model is unpriced)
    AGENT_INPUT_TOKENS / AGENT_OUTPUT_TOKENS   usage on the LLM span (default 500 / 50)
    AGENT_TOOLS     tool calls per run (default 1), so steps = 1 + AGENT_TOOLS
    AGENT_LATENCY_MS  the root span's duration (default 900)
    AGENT_SLEEP_S   real seconds to sleep before answering (to make concurrent runs overlap)
    AGENT_LOG       a file to append one JSON line per invocation to (what the agent saw)

Run it as `python tests/support/agent_cmd.py`.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports below, so concurrent runs can be seen to overlap

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

ANSWERS = {
    "Where is order 17?": "Order 17 shipped on 3 June.",
    "Can I return shoes?": "Yes, within 30 days, with the receipt.",
    "Do you ship to Canada?": "Yes, Canada takes 5 to 7 working days.",
}
WRONG_ANSWER = "Sorry, I have no idea at all."


def _prompts(name: str) -> set[str]:
    return {line for line in os.environ.get(name, "").splitlines() if line}


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def main() -> int:
    prompt = sys.stdin.read()
    resource = Resource.create({"service.name": "support-agent"})
    seen = {
        "prompt": prompt,
        "env_input": os.environ.get("NEENS_ITEM_INPUT"),
        "resource": {k: v for k, v in resource.attributes.items() if isinstance(v, str)},
        "endpoint": os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        "has_auth_header": "Authorization="
        in os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", ""),
        "pid": os.getpid(),
        "start": STARTED,
    }
    try:
        return answer(prompt, resource)
    finally:
        seen["end"] = time.time()
        if os.environ.get("AGENT_LOG"):
            with open(os.environ["AGENT_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps(seen) + "\n")


def answer(prompt: str, resource: Resource) -> int:
    if prompt in _prompts("AGENT_CRASH"):
        print("agent: the model provider refused the request", file=sys.stderr)
        return 3
    if prompt in _prompts("AGENT_HANG"):
        time.sleep(60)
    time.sleep(float(os.environ.get("AGENT_SLEEP_S", "0")))
    text = WRONG_ANSWER if prompt in _prompts("AGENT_WRONG") else ANSWERS.get(prompt, "?")
    if prompt not in _prompts("AGENT_SILENT"):
        export(prompt, text, resource)
    print(text)  # a real agent prints its answer; `neens eval run` must keep stdout clean
    return 0


def export(prompt: str, answer: str, resource: Resource) -> None:
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("support-agent")
    t0 = time.time_ns()
    latency_ns = _int("AGENT_LATENCY_MS", 900) * 1_000_000
    tools = _int("AGENT_TOOLS", 1)
    root = tracer.start_span("agent.run", start_time=t0)
    root.set_attribute("openinference.span.kind", "AGENT")
    root.set_attribute("input.value", prompt)
    with trace.use_span(root, end_on_exit=False):
        llm = tracer.start_span("llm", start_time=t0 + 1_000_000)
        llm.set_attribute("openinference.span.kind", "LLM")
        llm.set_attribute("llm.model_name", os.environ.get("AGENT_MODEL", "gpt-4o"))
        llm.set_attribute("llm.token_count.prompt", _int("AGENT_INPUT_TOKENS", 500))
        llm.set_attribute("llm.token_count.completion", _int("AGENT_OUTPUT_TOKENS", 50))
        llm.end(end_time=t0 + 2_000_000)
        for index in range(tools):
            tool = tracer.start_span(f"tool_{index}", start_time=t0 + 3_000_000)
            tool.set_attribute("openinference.span.kind", "TOOL")
            tool.end(end_time=t0 + 4_000_000)
    root.set_attribute("output.value", answer)
    root.end(end_time=t0 + latency_ns)
    provider.shutdown()  # flushes: the root span is exported before the command exits


if __name__ == "__main__":
    sys.exit(main())
