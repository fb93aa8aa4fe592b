/**
 * The environment `neens-eval run` gives the agent command: the prompt and the correlation
 * attributes that link its trace to a pre-prod item, exactly as the Python SDK sets them.
 *
 * `OTEL_RESOURCE_ATTRIBUTES` is a comma-separated list of `key=value` pairs with percent-encoded
 * values (OpenTelemetry's SDK environment variable specification). The three correlation keys
 * are added to what the user set; a user value for one of them is replaced, every other pair is
 * kept byte for byte. The OTLP exporter is pointed at `$NEENS_BASE_URL/v1/traces` only when the
 * user has pointed it nowhere, and the API key is only ever added for Neens's own endpoint.
 */

export const RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES";
const TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
const HEADERS = "OTEL_EXPORTER_OTLP_HEADERS";
const TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
const PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL";

export const RUN_ID_ATTR = "neens.eval_run_id";
export const ITEM_ID_ATTR = "neens.dataset_item_id";
export const VERSION_LABEL_ATTR = "neens.version_label";
export const ITEM_INPUT_VAR = "NEENS_ITEM_INPUT";
/** Linux refuses to start a program with one environment string this long (MAX_ARG_STRLEN). */
const MAX_ENV_STRING_BYTES = 128 * 1024 - 1;

type Env = Record<string, string | undefined>;

/** Python's `urllib.parse.quote(value, safe="")`: everything but `A-Za-z0-9_.-~` is encoded. */
export function percentEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** `existing` with `ours` added (percent-encoded), replacing any pair with one of our keys. */
export function mergeResourceAttributes(existing: string | undefined, ours: Record<string, string>): string {
  const kept: string[] = [];
  for (const pair of (existing ?? "").split(",")) {
    if (!pair.trim()) continue;
    const key = (pair.split("=", 1)[0] as string).trim();
    if (key in ours) continue;
    kept.push(pair.trim());
  }
  for (const [key, value] of Object.entries(ours)) kept.push(`${key}=${percentEncode(value)}`);
  return kept.join(",");
}

/** Decode an OTel `key=value,...` variable (values percent-decoded); bad pairs are skipped. */
export function parsePairs(value: string | undefined): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const pair of (value ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at < 0) continue;
    const key = pair.slice(0, at).trim();
    if (!key) continue;
    const raw = pair.slice(at + 1).trim();
    let decoded = raw;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      decoded = raw;
    }
    pairs[key] = decoded;
  }
  return pairs;
}

/** The OTLP exporter variables to set on top of `env` (only those that change). */
export function exporterEnv(env: Env, baseUrl: string, apiKey: string): Record<string, string> {
  const out: Record<string, string> = {};
  let tracesEndpoint = (env[TRACES_ENDPOINT] ?? "").trim();
  const endpoint = (env[ENDPOINT] ?? "").trim();
  if (!tracesEndpoint && !endpoint) {
    tracesEndpoint = `${baseUrl}/v1/traces`;
    out[TRACES_ENDPOINT] = tracesEndpoint;
    if (!env[TRACES_PROTOCOL] && !env[PROTOCOL]) out[TRACES_PROTOCOL] = "http/protobuf";
  }
  const effective = tracesEndpoint || `${endpoint.replace(/\/+$/, "")}/v1/traces`;
  if (!sameOriginAndPrefix(effective, baseUrl)) return out;
  const headersVar = (env[TRACES_HEADERS] ?? "").trim() ? TRACES_HEADERS : HEADERS;
  const headers = (env[headersVar] ?? "").trim();
  if (Object.keys(parsePairs(headers)).some((key) => key.toLowerCase() === "authorization")) return out;
  const auth = `Authorization=${percentEncode(`Bearer ${apiKey}`)}`;
  // The traces variable wins over the generic one in every OTel SDK, so carry its pairs over.
  out[TRACES_HEADERS] = headers ? `${headers},${auth}` : auth;
  return out;
}

/** The environment of one item's command, and whether the prompt fit in NEENS_ITEM_INPUT. */
export function itemEnv(
  base: Env,
  ids: { runId: string; itemId: string; versionLabel: string; prompt: string },
): { env: Record<string, string>; fits: boolean } {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) if (value !== undefined) env[key] = value;
  env[RESOURCE_ATTRIBUTES] = mergeResourceAttributes(base[RESOURCE_ATTRIBUTES], {
    [RUN_ID_ATTR]: ids.runId,
    [ITEM_ID_ATTR]: ids.itemId,
    [VERSION_LABEL_ATTR]: ids.versionLabel,
  });
  env["NEENS_EVAL_RUN_ID"] = ids.runId;
  env["NEENS_DATASET_ITEM_ID"] = ids.itemId;
  env["NEENS_VERSION_LABEL"] = ids.versionLabel;
  const fits =
    !ids.prompt.includes("\u0000") &&
    ITEM_INPUT_VAR.length + 1 + Buffer.byteLength(ids.prompt, "utf8") <= MAX_ENV_STRING_BYTES;
  if (fits) env[ITEM_INPUT_VAR] = ids.prompt;
  else delete env[ITEM_INPUT_VAR];
  return { env, fits };
}

/** Whether `url` is under `baseUrl` (same scheme, host, port and path prefix). */
function sameOriginAndPrefix(url: string, baseUrl: string): boolean {
  let target: URL;
  let base: URL;
  try {
    target = new URL(url);
    base = new URL(baseUrl);
  } catch {
    return false;
  }
  const port = (u: URL): string => u.port || (u.protocol === "https:" ? "443" : "80");
  return (
    target.protocol === base.protocol &&
    target.hostname.toLowerCase() === base.hostname.toLowerCase() &&
    port(target) === port(base) &&
    `${target.pathname.replace(/\/+$/, "")}/`.startsWith(`${base.pathname.replace(/\/+$/, "")}/`)
  );
}
