// The compatibility suite's agent, traced with the OpenTelemetry JS SDK and the GenAI semantic
// conventions as JS GenAI instrumentations write them (gen_ai.input.messages /
// gen_ai.output.messages with parts), exported with the OTLP/HTTP exporter named on the command
// line: `node agent.js proto|json`. It asks the stand-in provider at OPENAI_BASE_URL twice (the
// first reply asks for the get_weather tool) and calls the tool once. NEENS_URL and NEENS_KEY say
// where to export; OTEL_RESOURCE_ATTRIBUTES is applied through the environment resource detector,
// as docs/preprod.md shows. Prints the trace id.
"use strict";

const { context, trace } = require("@opentelemetry/api");
const { NodeTracerProvider, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-node");
const { detectResources, envDetector } = require("@opentelemetry/resources");

const QUESTION = "What is the weather in Paris?";
const SYSTEM = "You answer weather questions.";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
];

function exporter(kind) {
  const options = {
    url: `${process.env.NEENS_URL}/v1/traces`,
    headers: { Authorization: `Bearer ${process.env.NEENS_KEY}` },
  };
  if (kind === "proto") {
    const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
    return new OTLPTraceExporter(options);
  }
  const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");
  return new OTLPTraceExporter(options);
}

function parts(role, text) {
  return { role, parts: [{ type: "text", content: text }] };
}

function genaiMessages(messages) {
  return messages.map((message) => {
    if (message.role === "tool") {
      return {
        role: "tool",
        parts: [{ type: "tool_call_response", id: message.tool_call_id, response: message.content }],
      };
    }
    if (message.tool_calls) {
      return {
        role: "assistant",
        parts: message.tool_calls.map((call) => ({
          type: "tool_call",
          id: call.id,
          name: call.function.name,
          arguments: JSON.parse(call.function.arguments),
        })),
      };
    }
    return parts(message.role, message.content);
  });
}

async function chat(tracer, messages) {
  return tracer.startActiveSpan("chat gpt-4o-mini", async (span) => {
    span.setAttributes({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.input.messages": JSON.stringify(genaiMessages(messages)),
    });
    const response = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer not-a-real-key" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages, tools: TOOLS }),
    });
    const body = await response.json();
    const message = body.choices[0].message;
    span.setAttributes({
      "gen_ai.response.model": body.model,
      "gen_ai.usage.input_tokens": body.usage.prompt_tokens,
      "gen_ai.usage.output_tokens": body.usage.completion_tokens,
      "gen_ai.output.messages": JSON.stringify(genaiMessages([message])),
    });
    span.end();
    return message;
  });
}

async function main() {
  const provider = new NodeTracerProvider({
    resource: detectResources({ detectors: [envDetector] }),
    spanProcessors: [new SimpleSpanProcessor(exporter(process.argv[2]))],
  });
  provider.register(); // the async context manager, so child spans find their parent
  const tracer = provider.getTracer("weather-agent");
  const root = tracer.startSpan("invoke_agent weather-agent", {
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "weather-agent",
      "gen_ai.input.messages": JSON.stringify([parts("user", QUESTION)]),
    },
  });
  const rootContext = trace.setSpan(context.active(), root);
  const answer = await context.with(rootContext, async () => {
    const messages = [
      { role: "system", content: SYSTEM },
      { role: "user", content: QUESTION },
    ];
    const first = await chat(tracer, messages);
    const call = first.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    const result = `sunny, 21°C in ${args.city}`;
    tracer.startActiveSpan("execute_tool get_weather", (span) => {
      span.setAttributes({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": call.function.arguments,
        "gen_ai.tool.call.result": result,
      });
      span.end();
    });
    messages.push(first, { role: "tool", tool_call_id: call.id, content: result });
    return (await chat(tracer, messages)).content;
  });
  root.setAttribute("gen_ai.output.messages", JSON.stringify([parts("assistant", answer)]));
  root.end();
  await provider.forceFlush();
  await provider.shutdown();
  process.stdout.write(`${root.spanContext().traceId}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
