/**
 * A small JSON client for the Neens HTTP API on Node's built-in `fetch`, so it needs no dependency.
 *
 * Retries follow the Python SDK's rule: retry only when the server cannot have acted on the
 * request, or when acting twice is harmless. GET and PUT are retried on every connection failure
 * and on 502/503/504. A POST is retried only when it cannot have reached the application (the
 * connection was refused, or the server said 503); a POST that times out waiting for its answer,
 * whose connection drops afterwards, or that meets a 502/504 is reported at once as `Unreachable`
 * with `maybeApplied` set, rather than risking a duplicate.
 *
 * Retries go on for a window (60 s by default, `NEENS_RETRY_WINDOW`), waiting 0.5, 1, 2, 4 and
 * then 5 s between tries. Redirects are never followed: the key must only ever reach
 * `NEENS_BASE_URL`, and a redirect almost always means that variable is slightly wrong.
 */

import { ApiError, ConfigError, Unreachable } from "./errors.js";
import { fixed, formatG } from "./format.js";
import { VERSION } from "./version.js";

export const BASE_URL_VAR = "NEENS_BASE_URL";
export const API_KEY_VAR = "NEENS_API_KEY";
export const RETRY_WINDOW_VAR = "NEENS_RETRY_WINDOW";
const RETRY_STATUSES = new Set([502, 503, 504]);
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE"]);
/** Failures that happen before the request is sent: the server cannot have acted on it. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

export type Params = Record<string, string | number | boolean | null | undefined>;
export type Env = Record<string, string | undefined>;

export interface RetryPolicy {
  /** How long retries may go on, from the first try; 0 disables retries. */
  windowS: number;
  backoffS: number;
  maxBackoffS: number;
  /** What set `windowS`, named when the retries give up: NEENS_RETRY_WINDOW, or a flag. */
  windowFrom?: string;
}

export const DEFAULT_RETRY: RetryPolicy = { windowS: 60, backoffS: 0.5, maxBackoffS: 5 };

export function retryDelay(policy: RetryPolicy, retry: number): number {
  return Math.min(policy.backoffS * 2 ** Math.min(retry, 64), policy.maxBackoffS);
}

/** The default policy, with the window from NEENS_RETRY_WINDOW when it is set. */
export function retryFromEnv(env: Env = process.env): RetryPolicy {
  const text = (env[RETRY_WINDOW_VAR] ?? "").trim();
  if (!text) return { ...DEFAULT_RETRY };
  return { ...DEFAULT_RETRY, windowS: parseWindow(text, RETRY_WINDOW_VAR) };
}

/** A retry window in seconds (0 or more), or a `ConfigError` naming `what`. */
export function parseWindow(text: string, what: string): number {
  const value = parseNumber(text);
  if (value === null || !(value >= 0) || !Number.isFinite(value)) {
    throw new ConfigError(
      `${what}: ${pyRepr(text)} is not a number of seconds (0 or more), such as 60; it is how ` +
        `long Neens is retried when it does not answer`,
    );
  }
  return value;
}

/** A decimal number as Python's float() reads one, or null. */
export function parseNumber(text: string): number | null {
  const trimmed = text.trim();
  if (!/^[+-]?(\d+(_\d+)*\.?\d*(_\d+)*|\.\d+)([eE][+-]?\d+)?$/.test(trimmed)) {
    if (/^[+-]?(inf|infinity)$/i.test(trimmed)) return trimmed.startsWith("-") ? -Infinity : Infinity;
    if (/^[+-]?nan$/i.test(trimmed)) return NaN;
    return null;
  }
  return Number(trimmed.replaceAll("_", ""));
}

/** Python's repr() of a string, for messages that quote what the user typed. */
export function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text
    .replaceAll("\\", "\\\\")
    .replaceAll("\n", "\\n")
    .replaceAll("\r", "\\r")
    .replaceAll("\t", "\\t");
  return quote + (quote === "'" ? escaped.replaceAll("'", "\\'") : escaped) + quote;
}

export interface RetryNotice {
  method: string;
  path: string;
  problem: string;
  waitedS: number;
  windowS: number;
}

/** The one line the CLI shows while it waits for Neens. */
export function describeNotice(notice: RetryNotice): string {
  const left = Math.max(notice.windowS - notice.waitedS, 0);
  return (
    `neens: Neens does not answer ${notice.method} ${notice.path} (${notice.problem}); ` +
    `retrying for up to ${fixed(left, 0)} s more`
  );
}

/** Talks JSON to one Neens server with one API key. */
export class Client {
  readonly baseUrl: string;
  readonly timeoutS: number;
  retry: RetryPolicy;
  onRetry: ((notice: RetryNotice) => void) | null = null;
  readonly #apiKey: string;

  constructor(baseUrl: string, apiKey: string, options: { timeoutS?: number; retry?: RetryPolicy } = {}) {
    const url = baseUrl.trim();
    const key = apiKey.trim();
    for (const problem of [baseUrlProblem(url), apiKeyProblem(key)]) {
      if (problem) throw new ConfigError(problem);
    }
    this.baseUrl = url.replace(/\/+$/, "");
    this.timeoutS = options.timeoutS ?? 30;
    this.retry = options.retry ?? { ...DEFAULT_RETRY };
    this.#apiKey = key;
  }

  /** A client from NEENS_BASE_URL and NEENS_API_KEY. */
  static fromEnv(env: Env = process.env, retry?: RetryPolicy): Client {
    const baseUrl = (env[BASE_URL_VAR] ?? "").trim();
    if (!baseUrl) {
      throw new ConfigError(
        `${BASE_URL_VAR} is not set; set it to the address of your Neens server, ` +
          `for example: export ${BASE_URL_VAR}=http://127.0.0.1:8000`,
      );
    }
    const apiKey = (env[API_KEY_VAR] ?? "").trim();
    if (!apiKey) {
      throw new ConfigError(
        `${API_KEY_VAR} is not set; create an API key for your project ` +
          `(\`neens keys create\` on the server) and export ${API_KEY_VAR}=<the key>`,
      );
    }
    for (const [name, problem] of [
      [BASE_URL_VAR, baseUrlProblem(baseUrl)],
      [API_KEY_VAR, apiKeyProblem(apiKey)],
    ] as const) {
      if (problem) throw new ConfigError(`${name}: ${problem}`);
    }
    return new Client(baseUrl, apiKey, { retry: retry ?? retryFromEnv(env) });
  }

  get(path: string, params?: Params): Promise<unknown> {
    return this.request("GET", path, undefined, params);
  }

  post(path: string, body: unknown): Promise<unknown> {
    return this.request("POST", path, body, undefined);
  }

  put(path: string, body: unknown): Promise<unknown> {
    return this.request("PUT", path, body, undefined);
  }

  /** The absolute URL for `path` and `params` (params whose value is null are left out). */
  url(path: string, params?: Params): string {
    if (!path.startsWith("/")) throw new Error(`API paths start with '/': ${path}`);
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params ?? {})) {
      if (value === null || value === undefined) continue;
      query.append(key, typeof value === "boolean" ? (value ? "true" : "false") : String(value));
    }
    const text = query.toString();
    return `${this.baseUrl}${path}${text ? `?${text}` : ""}`;
  }

  private async request(method: string, path: string, body: unknown, params?: Params): Promise<unknown> {
    const url = this.url(path, params);
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      "Content-Type": "application/json",
      Accept: "application/json",
      "User-Agent": `neens-eval/${VERSION} (node)`,
    };
    const idempotent = IDEMPOTENT.has(method);
    const started = performance.now();
    let problem = "";
    let tries = 0;
    for (;;) {
      tries += 1;
      let response: Response | null = null;
      try {
        response = await fetch(url, {
          method,
          headers,
          body: data,
          redirect: "manual",
          signal: AbortSignal.timeout(this.timeoutS * 1000),
        });
      } catch (error) {
        const failure = describeFailure(error);
        problem = failure.problem;
        if (failure.tls) {
          throw new Unreachable(
            `TLS with ${this.baseUrl} failed (${failure.problem}); check ${BASE_URL_VAR} and ` +
              `the server's certificate`,
          );
        }
        if (failure.sent && !idempotent) throw this.maybeApplied(method, path, problem);
      }
      if (response !== null) {
        let payload: string;
        try {
          payload = await response.text();
        } catch (error) {
          // The answer broke off while it was read: the request was received.
          problem = describeFailure(error).problem;
          if (!idempotent) throw this.maybeApplied(method, path, problem);
          payload = "";
          response = null;
        }
        if (response !== null) {
          const status = response.status;
          if (status < 300) return this.decode(status, payload, method, path);
          if (RETRY_STATUSES.has(status)) {
            problem = `HTTP ${status} ${response.statusText}`.trimEnd();
            if (!(idempotent || status === 503)) throw this.maybeApplied(method, path, problem);
          } else if (status < 400) {
            throw this.redirected(status, response.headers.get("location"));
          } else {
            throw ApiError.fromBody(status, response.statusText, payload);
          }
        }
      }
      const waited = (performance.now() - started) / 1000;
      const left = this.retry.windowS - waited;
      if (left <= 0) break;
      this.onRetry?.({ method, path, problem, waitedS: waited, windowS: this.retry.windowS });
      await sleep(Math.min(retryDelay(this.retry, tries - 1), left));
    }
    const elapsed = (performance.now() - started) / 1000;
    throw new Unreachable(
      `could not reach Neens at ${this.baseUrl} after ${tries} ` +
        `${tries === 1 ? "attempt" : "attempts"} over ${fixed(elapsed, 0)} s (${problem}); ` +
        `check ${BASE_URL_VAR} and that the server is running (retries last ` +
        `${formatG(this.retry.windowS)} s, ${this.retry.windowFrom ?? RETRY_WINDOW_VAR} changes it)`,
    );
  }

  private decode(status: number, payload: string, method: string, path: string): unknown {
    if (!payload.trim()) return null;
    try {
      return JSON.parse(payload);
    } catch {
      throw new ApiError(
        status,
        "invalid_response",
        `the answer to ${method} ${path} is not JSON; check that ${BASE_URL_VAR} ` +
          `(${this.baseUrl}) is the address of the Neens API`,
      );
    }
  }

  private maybeApplied(method: string, path: string, problem: string): Unreachable {
    return new Unreachable(
      `no answer from Neens at ${this.baseUrl} to ${method} ${path} (${problem}); the ` +
        `request may or may not have been applied, so check before running it again`,
      { maybeApplied: true },
    );
  }

  private redirected(status: number, location: string | null): ApiError {
    const target = location ? ` to ${location}` : "";
    return new ApiError(
      status,
      "redirect",
      `Neens answered with a redirect${target}; set ${BASE_URL_VAR} to the address the ` +
        `server is really served at (redirects are not followed so the API key is only ` +
        `ever sent to ${this.baseUrl})`,
    );
  }
}

/** Why `baseUrl` cannot be used, or null. Checked up front so a typo is a usage error. */
function baseUrlProblem(baseUrl: string): string | null {
  const match = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)/.exec(baseUrl);
  const port = match?.[2]?.match(/:([^:\]]*)$/)?.[1];
  if (port !== undefined && port !== "" && !(/^\d+$/.test(port) && Number(port) <= 65535)) {
    return `the port in ${pyRepr(baseUrl)} is not a number between 0 and 65535`;
  }
  let parsed: URL | null = null;
  try {
    parsed = new URL(baseUrl);
  } catch {
    parsed = null;
  }
  if (parsed === null || !["http:", "https:"].includes(parsed.protocol) || !parsed.hostname) {
    return (
      `the Neens base URL must start with http:// or https://, such as ` +
      `http://127.0.0.1:8000 (got ${pyRepr(baseUrl)})`
    );
  }
  return null;
}

function apiKeyProblem(apiKey: string): string | null {
  if (!apiKey || /\s/.test(apiKey)) {
    return "the API key is empty or contains whitespace; paste the whole key";
  }
  return null;
}

interface Failure {
  problem: string;
  /** The request may have reached the server. */
  sent: boolean;
  tls: boolean;
}

/** A short description of a network failure, such as "connection refused". */
function describeFailure(error: unknown): Failure {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return { problem: "timed out", sent: true, tls: false };
  }
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const code = (cause as { code?: unknown } | null)?.code;
  const text = typeof code === "string" ? code : "";
  if (text === "ECONNREFUSED") return { problem: "connection refused", sent: false, tls: false };
  if (NOT_SENT_CODES.has(text)) {
    return { problem: describeError(cause), sent: false, tls: false };
  }
  if (text.startsWith("ERR_TLS") || text.includes("CERT") || text.startsWith("ERR_SSL")) {
    return { problem: describeError(cause), sent: false, tls: true };
  }
  if (text === "ECONNRESET" || text === "UND_ERR_SOCKET" || text === "EPIPE") {
    return { problem: "connection closed by the server", sent: true, tls: false };
  }
  return { problem: describeError(cause), sent: true, tls: false };
}

function describeError(error: unknown): string {
  if (error instanceof Error) return oneLineText(error.message || error.name);
  return oneLineText(String(error));
}

function oneLineText(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ");
}

export function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(seconds, 0) * 1000));
}

/** The error for an answer that is not what Neens answers: most likely the wrong server. */
export function unexpected(what: string, expected: string): ApiError {
  return new ApiError(
    200,
    "unexpected_response",
    `unexpected answer to ${what}: expected ${expected}; check that NEENS_BASE_URL points ` +
      `at a Neens server and that @neens/eval is up to date (npm install @neens/eval@latest)`,
  );
}

/** `answer` when it is a JSON object, else the `unexpected` error naming `what`. */
export function expectObject(answer: unknown, what: string): Record<string, unknown> {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) {
    throw unexpected(what, "a JSON object");
  }
  return answer as Record<string, unknown>;
}
