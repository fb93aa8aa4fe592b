/**
 * Every error the Neens client raises on purpose, as one tree (the same as the Python SDK's):
 *
 *     NeensClientError        base; `exitCode` is what `neens-eval` exits with
 *     ├── ConfigError         exit 2: bad usage or configuration (missing variable, bad input file)
 *     ├── ApiError            the server answered with an error body (status, code, message, field)
 *     │   │                   exit 2 for a 4xx answer (fix the request), 3 for a 5xx one
 *     │   └── AuthError       exit 2: 401 or 403, the API key was refused
 *     └── Unreachable         exit 3: no usable answer from the server, even after retries
 *
 * Exit codes 1 and 4 are results, not errors: 1 is "a requirement you asked for is not met" (a
 * failed gate, `--require-all-arms`), 4 is "the evidence cannot be trusted or does not exist"
 * (a void, failed or cancelled model sweep).
 */

export const EXIT_USAGE = 2;
export const EXIT_UNREACHABLE = 3;
export const EXIT_UNTRUSTED = 4;

export class NeensClientError extends Error {
  exitCode: number = EXIT_USAGE;
}

/** The command line, the environment or an input file is wrong; nothing was sent. */
export class ConfigError extends NeensClientError {
  override exitCode = EXIT_USAGE;
}

/** The server answered with an error; `message` is one line meant for a person. */
export class ApiError extends NeensClientError {
  readonly status: number;
  readonly code: string;
  readonly serverMessage: string;
  readonly field: string | null;

  constructor(status: number, code: string, message: string, field: string | null = null) {
    super(describeApiError(status, code, message, field));
    this.status = status;
    this.code = code;
    this.serverMessage = message;
    this.field = field;
    // A 4xx means the request must change; a 5xx is the server's problem, handled like an outage.
    this.exitCode = status >= 500 ? EXIT_UNREACHABLE : EXIT_USAGE;
  }

  /** The error for an HTTP error answer, an `AuthError` for 401 and 403. */
  static fromBody(status: number, reason: string, body: string): ApiError {
    let code = `http_${status}`;
    let message = reason || "error";
    let field: string | null = null;
    let document: unknown = null;
    try {
      document = JSON.parse(body);
    } catch {
      document = null;
    }
    const error = isObject(document) ? document["error"] : undefined;
    if (isObject(error)) {
      if (typeof error["code"] === "string") code = error["code"];
      if (typeof error["message"] === "string") message = error["message"];
      if (typeof error["field"] === "string") field = error["field"];
    }
    return status === 401 || status === 403
      ? new AuthError(status, code, message, field)
      : new ApiError(status, code, message, field);
  }
}

/** 401 or 403: the API key is missing, unknown, revoked, or its role may not do this. */
export class AuthError extends ApiError {
  constructor(status: number, code: string, message: string, field: string | null = null) {
    super(status, code, message, field);
    const hint =
      status === 401 ? "check NEENS_API_KEY" : "use a key whose role is allowed to do this";
    this.message = `${this.message}; ${hint}`;
  }
}

/**
 * No usable answer from the server after every retry. `maybeApplied` is set when a request that
 * creates something was sent but got no answer: it may have been applied, so it was not resent.
 */
export class Unreachable extends NeensClientError {
  override exitCode = EXIT_UNREACHABLE;
  readonly maybeApplied: boolean;

  constructor(message: string, options: { maybeApplied?: boolean } = {}) {
    super(message);
    this.maybeApplied = options.maybeApplied ?? false;
  }
}

function describeApiError(
  status: number,
  code: string,
  message: string,
  field: string | null,
): string {
  // The server often starts its message with the field already; do not say it twice.
  const where = field && !message.includes(field) ? ` (field ${field})` : "";
  return `${oneLine(message)}${where} [HTTP ${status} ${code}]`;
}

/** Collapse a message onto one line so each error stays one line on a terminal or in CI. */
export function oneLine(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ");
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
