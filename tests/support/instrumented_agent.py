"""One small agent traced by a real instrumentation package, for the compatibility suite.

    python tests/support/instrumented_agent.py MODE

The agent answers "What is the weather in Paris?" with two model calls through the official
`openai` client (the first asks for the `get_weather` tool, the second answers) and one tool
call. MODE picks the instrumentation, used as its documentation shows:

    openinference      openinference-instrumentation-openai; agent and tool spans with the
                       OpenInference attributes (no `agent.name`: the span's name names it)
    genai-span         opentelemetry-instrumentation-openai-v2, content on the spans
                       (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY); GenAI
                       invoke_agent and execute_tool spans
    genai-event        the same with content sent as OTLP log records (EVENT_ONLY) to /v1/logs;
                       the agent span carries no content
    genai-event-late   the same, the log records batched and held: exported only once the
                       spans are in and a line is read from stdin (after the trace id is printed)
    openllmetry        opentelemetry-instrumentation-openai (OpenLLMetry); agent and tool spans
                       with the attributes traceloop-sdk's @agent / @tool decorators write
    traceloop          traceloop-sdk: Traceloop.init with only the openai instrumentation,
                       exporting to Neens; the agent is an @agent inside a @workflow, the tool
                       a @tool
    logfire            logfire (send_to_logfire=False) with instrument_openai; the agent and tool
                       are @logfire.instrument-ed functions, the tool tagged "tool"

Environment: NEENS_URL and NEENS_KEY (where to export), OPENAI_BASE_URL (the stand-in
provider). Prints the trace id.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

QUESTION = "What is the weather in Paris?"
SYSTEM = "You answer weather questions."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def get_weather(city: str) -> str:
    return f"sunny, 21°C in {city}"


def agent(client: Any, call_tool: Callable[[dict[str, Any]], str]) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    [call] = message.tool_calls
    result = call_tool(json.loads(call.function.arguments))
    messages.append(message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    answer: str = second.choices[0].message.content
    return answer


def main(mode: str) -> None:
    late = mode == "genai-event-late"
    mode = mode.removesuffix("-late")
    import openai
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    url, headers = os.environ["NEENS_URL"], {"Authorization": f"Bearer {os.environ['NEENS_KEY']}"}
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=headers)
    client = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="not-a-real-key")

    if mode == "logfire":
        import logfire
        from opentelemetry import trace

        logfire.configure(
            send_to_logfire=False,
            console=False,
            additional_span_processors=[SimpleSpanProcessor(exporter)],
        )
        logfire.instrument_openai(client)

        @logfire.with_tags("tool").instrument("get_weather", record_return=True)
        def tool(city: str) -> str:
            return get_weather(city)

        trace_ids: list[int] = []

        @logfire.instrument("weather-agent", record_return=True)
        def weather_agent(question: str) -> str:
            trace_ids.append(trace.get_current_span().get_span_context().trace_id)
            return agent(client, lambda arguments: tool(**arguments))

        weather_agent(QUESTION)
        logfire.force_flush()
        print(format(trace_ids[0], "032x"))
        return

    if mode == "traceloop":
        print(format(_traceloop(url, headers, client), "032x"))
        return

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("weather-agent")
    logger_provider = None
    if mode == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif mode in ("genai-span", "genai-event"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as V2

        logger_provider = _logger_provider(url, headers, late) if mode == "genai-event" else None
        V2().instrument(tracer_provider=provider, logger_provider=logger_provider)
    elif mode == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(tracer_provider=provider)
    else:
        raise SystemExit(f"unknown mode {mode!r}")

    with tracer.start_as_current_span(_agent_span_name(mode)) as root:
        for key, value in _agent_attributes(mode).items():
            root.set_attribute(key, value)

        def call_tool(arguments: dict[str, Any]) -> str:
            with tracer.start_as_current_span(_tool_span_name(mode)) as span:
                result = get_weather(**arguments)
                for key, value in _tool_attributes(mode, arguments, result).items():
                    span.set_attribute(key, value)
                return result

        answer = agent(client, call_tool)
        for key, value in _agent_output_attributes(mode, answer).items():
            root.set_attribute(key, value)
        trace_id = root.get_span_context().trace_id
    provider.shutdown()
    if late:
        print(format(trace_id, "032x"), flush=True)
        sys.stdin.readline()
    if logger_provider is not None:
        logger_provider.shutdown()
    print(format(trace_id, "032x"))


def _traceloop(url: str, headers: dict[str, str], client: Any) -> int:
    """The agent as traceloop-sdk's documentation writes it; returns its trace id."""
    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent as traceloop_agent
    from traceloop.sdk.decorators import tool, workflow
    from traceloop.sdk.instruments import Instruments

    Traceloop.init(
        app_name="weather-service",
        api_endpoint=url,
        headers=headers,
        disable_batch=True,
        instruments={Instruments.OPENAI},
        telemetry_enabled=False,
    )

    @tool(name="get_weather")
    def weather_tool(city: str) -> str:
        return get_weather(city)

    @traceloop_agent(name="weather-agent")
    def weather_agent(question: str) -> str:
        return agent(client, lambda arguments: weather_tool(**arguments))

    trace_ids: list[int] = []

    @workflow(name="answer")
    def answer(question: str) -> str:
        trace_ids.append(trace.get_current_span().get_span_context().trace_id)
        return weather_agent(question)

    answer(QUESTION)
    return trace_ids[0]


def _logger_provider(url: str, headers: dict[str, str], held: bool) -> Any:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor

    exporter = OTLPLogExporter(endpoint=f"{url}/v1/logs", headers=headers)
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(
        # Held: batched as the SDK does by default, but never sent before shutdown.
        BatchLogRecordProcessor(exporter, schedule_delay_millis=3_600_000)
        if held
        else SimpleLogRecordProcessor(exporter)
    )
    return logger_provider


def _agent_span_name(mode: str) -> str:
    return "invoke_agent weather-agent" if mode.startswith("genai") else "weather-agent"


def _tool_span_name(mode: str) -> str:
    return "execute_tool get_weather" if mode.startswith("genai") else "get_weather"


def _genai_messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _agent_attributes(mode: str) -> dict[str, Any]:
    if mode == "openinference":
        return {"openinference.span.kind": "AGENT", "input.value": QUESTION}
    if mode == "genai-span":
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather-agent",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": _genai_messages("user", QUESTION),
        }
    if mode == "genai-event":
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather-agent",
            "gen_ai.request.model": "gpt-4o-mini",
        }
    return {  # openllmetry: what traceloop-sdk's @agent(name="weather-agent") records
        "traceloop.span.kind": "agent",
        "traceloop.entity.name": "weather-agent",
        "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
    }


def _agent_output_attributes(mode: str, answer: str) -> dict[str, Any]:
    if mode == "openinference":
        return {"output.value": answer}
    if mode == "genai-span":
        return {"gen_ai.output.messages": _genai_messages("assistant", answer)}
    if mode == "genai-event":
        return {}
    return {"traceloop.entity.output": json.dumps(answer)}


def _tool_attributes(mode: str, arguments: dict[str, Any], result: str) -> dict[str, Any]:
    if mode == "openinference":
        return {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": json.dumps(arguments),
            "output.value": result,
        }
    if mode.startswith("genai"):
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": json.dumps(arguments),
            "gen_ai.tool.call.result": result,
        }
    return {  # openllmetry: what traceloop-sdk's @tool(name="get_weather") records
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "get_weather",
        "traceloop.entity.input": json.dumps({"args": [], "kwargs": arguments}),
        "traceloop.entity.output": json.dumps(result),
    }


if __name__ == "__main__":
    main(sys.argv[1])
