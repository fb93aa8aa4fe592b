/**
 * `neens-eval sweep-preview|sweep-start|sweep-get|sweep-cancel|sweep-decide`: the Python
 * `neens sweep preview|start|get|cancel|decide`, with the same flags, `--json` (the server's
 * answer as it sent it) and exit codes: a sweep is informational (0) unless `--require-all-arms`
 * (or `--require-winner` for decide) asks for more (1); no verdict is 3; a void, failed or
 * cancelled sweep is 4. A start request is never sent twice.
 */

import { ArgumentTypeError, type CommandSpec, type OptionSpec, type Parsed } from "./args.js";
import type { Command } from "./cli.js";
import { type Client, Client as NeensClient, describeNotice, expectObject, pyRepr, retryFromEnv, unexpected } from "./client.js";
import { percentEncode } from "./correlation.js";
import { ApiError, ConfigError, EXIT_UNREACHABLE, EXIT_UNTRUSTED, NeensClientError, Unreachable } from "./errors.js";
import { count, fraction, number, positiveInt, retryWindow, seconds } from "./evalArgs.js";
import { fixed, formatG, groupedFixed, pyDumps } from "./format.js";
import type { Json } from "./gateRules.js";
import { decisionReport } from "./decisionRender.js";
import { Board, type BoardRow, ObjectPoller, type ObjectWait, waitUntilTerminal } from "./waiting.js";

const SWEEP_STATUSES = new Set(["pending", "running", "completed", "completed_with_failures", "failed", "cancelled", "void"]);
export const SWEEP_TERMINAL = new Set(["completed", "completed_with_failures", "failed", "cancelled", "void"]);
const OUTCOMES = new Set(["recommended", "no_arm_clears", "not_finished", "unavailable"]);
const EXPLAINED_STATUSES = new Set(["void", "failed", "cancelled"]);
const DEFAULT_SWEEP_TIMEOUT_S = 3600;
const RETRY_NOTICE_EVERY_S = 10;
type Seen = "read" | "finished" | "timeout";

interface Conclusion {
  exitCode: number;
  lines: string[];
}

// --- flags -------------------------------------------------------------------------------------

interface Arm {
  label: string;
  connectionId: string;
  text: string;
}

/** `sonnet=conn_…` as an arm: the label is everything before the last `=`. */
function parseArm(text: string): Arm {
  const at = text.lastIndexOf("=");
  const label = at < 0 ? "" : text.slice(0, at).trim();
  const connection = at < 0 ? "" : text.slice(at + 1).trim();
  if (at < 0 || !label || !connection) {
    throw new ArgumentTypeError(`${pyRepr(text)} is not LABEL=CONNECTION_ID; write one arm per flag, such as --arm sonnet=conn_01J…`);
  }
  if (/\s/.test(connection)) {
    throw new ArgumentTypeError(
      `${pyRepr(text)}: the connection id ${pyRepr(connection)} contains whitespace; write LABEL=CONNECTION_ID, such as --arm sonnet=conn_01J…`,
    );
  }
  if (label.startsWith("conn_") && !connection.startsWith("conn_")) {
    throw new ArgumentTypeError(`${pyRepr(text)} looks reversed: write LABEL=CONNECTION_ID, such as --arm ${connection}=${label}`);
  }
  return { label, connectionId: connection, text };
}

function usd(text: string): number {
  const value = (() => {
    try {
      return number(text);
    } catch {
      throw new ArgumentTypeError(`${pyRepr(text)} is not an amount in USD, such as 10`);
    }
  })();
  if (value < 0) throw new ArgumentTypeError(`${text} is not an amount in USD (0 or more), such as 10`);
  return value;
}

function definition(creating: boolean): OptionSpec[] {
  return [
    { flag: "--dataset-id", metavar: "ID", kind: "value", help: "the golden dataset (ds_…)" },
    { flag: "--dataset-version-id", metavar: "ID", kind: "value", help: "pin a dataset version (dsv_…) instead of the dataset's golden version" },
    { flag: "--arm", dest: "arms", metavar: "LABEL=CONN_ID", kind: "append", convert: parseArm, help: "one arm: a label and the agent connection it calls (repeat, at least twice)" },
    { flag: "--pass-k", metavar: "K", kind: "value", convert: positiveInt, help: "runs per arm; an arm passes only when all K are green (default: the server's, 3)" },
    { flag: "--version-label", metavar: "LABEL", kind: "value", help: `what is evaluated: a git SHA, a date${creating ? " (required)" : ""}` },
    { flag: "--name", metavar: "NAME", kind: "value", help: "a name for the sweep (default: the version label)" },
    { flag: "--budget-usd", metavar: "USD", kind: "value", convert: usd, help: "refuse to start when the estimate is over USD, and stop the sweep when its spend crosses it" },
    { flag: "--judge-id", dest: "judgeIds", metavar: "ID", kind: "append", help: "a judge that scores every run (jdg_…; repeat); default: the Primary Score" },
    { flag: "--min-pass-rate", metavar: "X", kind: "value", convert: fraction, help: "the gate every run is held to: the least share of items that must pass (0..1)" },
    { flag: "--max-regressions", metavar: "N", kind: "value", convert: count, help: "the gate every run is held to: the most items that may regress" },
  ];
}

function output(waits: boolean, require: "all-arms" | "winner" = "all-arms"): OptionSpec[] {
  const options: OptionSpec[] = [];
  if (waits) {
    options.push(
      { flag: "--wait", kind: "flag", help: "follow the sweep until it is finished, each arm's state live on stderr" },
      {
        flag: "--timeout",
        metavar: "SECONDS",
        kind: "value",
        convert: seconds,
        default: DEFAULT_SWEEP_TIMEOUT_S,
        help: `with --wait: how long to wait (default ${DEFAULT_SWEEP_TIMEOUT_S}); then exit 3`,
      },
      require === "winner"
        ? { flag: "--require-winner", kind: "flag", help: "exit 1 unless the verdict recommends an arm, 3 while the sweep has not finished" }
        : { flag: "--require-all-arms", kind: "flag", help: "exit 1 unless every arm passed pass^k (default: a sweep is informational)" },
    );
  }
  options.push(
    { flag: "--retry-window", metavar: "SECONDS", kind: "value", convert: retryWindow, help: "how long to keep retrying while Neens does not answer, then exit 3 (default: $NEENS_RETRY_WINDOW, else 60)" },
    { flag: "--json", dest: "asJson", kind: "flag", help: "write the server's JSON answer to stdout (the summary goes to stderr)" },
  );
  return options;
}

const SWEEP_EXIT_CODES = `exit codes:
  0  the sweep was previewed, started, read or cancelled, or it finished (a sweep is
     informational: arms that did not all pass still exit 0)
  1  --require-all-arms, and an arm of the finished sweep did not pass pass^k
  2  usage or configuration error, or the server refused the request
  3  no verdict: the server could not be reached for the whole retry window, or --timeout ran out
  4  the sweep is void (always, with the reason, --json too), failed or cancelled
`;

const specs: Record<string, CommandSpec> = {
  "sweep-preview": {
    name: "sweep-preview",
    usage: "neens-eval sweep-preview (--dataset-id ID | --dataset-version-id ID) --arm LABEL=CONN_ID --arm LABEL=CONN_ID ... [options]",
    description: "Ask Neens what the sweep would call and cost (POST /model-sweeps/preview). Nothing is created and nothing is called.",
    options: [...definition(false), ...output(false)],
    positionals: [],
    epilog: SWEEP_EXIT_CODES,
  },
  "sweep-start": {
    name: "sweep-start",
    usage: "neens-eval sweep-start (--dataset-id ID | --dataset-version-id ID) --version-label LABEL --arm LABEL=CONN_ID --arm LABEL=CONN_ID ... [options]",
    description: "Create the sweep (POST /model-sweeps), which launches every arm's runs at once; with --wait, follow it to the end.",
    options: [...definition(true), ...output(true)],
    positionals: [],
    epilog: SWEEP_EXIT_CODES,
  },
  "sweep-get": {
    name: "sweep-get",
    usage: "neens-eval sweep-get SWEEP_ID [--wait] [--timeout SECONDS] [--require-all-arms] [--retry-window SECONDS] [--json]",
    description: "Read a sweep (GET /model-sweeps/{id}) and print it; with --wait, follow it to the end.",
    options: output(true),
    positionals: [{ dest: "sweepId", metavar: "SWEEP_ID", kind: "one", required: true, help: "the sweep (msw-…)" }],
    epilog: SWEEP_EXIT_CODES,
  },
  "sweep-cancel": {
    name: "sweep-cancel",
    usage: "neens-eval sweep-cancel SWEEP_ID [--retry-window SECONDS] [--json]",
    description: "Cancel an unfinished sweep (POST /model-sweeps/{id}/cancel).",
    options: output(false),
    positionals: [{ dest: "sweepId", metavar: "SWEEP_ID", kind: "one", required: true, help: "the sweep (msw-…)" }],
    epilog: SWEEP_EXIT_CODES,
  },
  "sweep-decide": {
    name: "sweep-decide",
    usage:
      "neens-eval sweep-decide (--sweep-id ID | SWEEP_ID) [--bar X] [--baseline-arm ARM_ID] [--wait] [--timeout SECONDS] [--require-winner] [--retry-window SECONDS] [--json]",
    description: "Read the server's verdict over the sweep (GET /model-sweeps/{id}/comparison): which arm to ship, at what bar and cost, per agent.",
    options: [
      { flag: "--sweep-id", dest: "sweepIdFlag", metavar: "ID", kind: "value", help: "the sweep to decide (msw-…)" },
      { flag: "--bar", metavar: "X", kind: "value", convert: fraction, help: "the pass rate an arm must clear, 0..1 (0.9 is 90%)" },
      { flag: "--baseline-arm", metavar: "ARM_ID", kind: "value", help: "the arm (msa-…) savings, regressions and new passes are measured against" },
      ...output(true, "winner"),
    ],
    positionals: [{ dest: "sweepId", metavar: "SWEEP_ID", kind: "one", help: "the sweep (msw-…), the same as --sweep-id" }],
    epilog: SWEEP_EXIT_CODES.replace("--require-all-arms, and an arm of the finished sweep did not pass pass^k", "--require-winner, and the verdict of the finished sweep recommends no arm"),
  },
};

const given = (value: unknown): string | null => (typeof value === "string" && value.trim() ? value.trim() : null);

function sweepBody(args: Parsed, creating: boolean): Json {
  const datasetId = given(args["datasetId"]);
  const versionId = given(args["datasetVersionId"]);
  if (datasetId === null && versionId === null) {
    throw new ConfigError("give the golden dataset with --dataset-id ds_…, or pin a version with --dataset-version-id dsv_…");
  }
  const label = given(args["versionLabel"]);
  if (creating && label === null) throw new ConfigError('--version-label is required to start a sweep, for example: --version-label "$GIT_SHA"');
  if (creating && args["requireAllArms"] && !args["wait"]) {
    throw new ConfigError(
      "--require-all-arms needs --wait: a sweep that was just started has no verdict yet; " +
        "add --wait, or check it later with `neens-eval sweep-get SWEEP_ID --require-all-arms`",
    );
  }
  const arms = (args["arms"] ?? []) as Arm[];
  if (!arms.length) {
    throw new ConfigError("give the arms to compare, one --arm LABEL=CONNECTION_ID each, at least two: --arm sonnet=conn_… --arm mini=conn_…");
  }
  const body: Json = {};
  if (args["name"] !== null) body["name"] = args["name"];
  if (label !== null) body["versionLabel"] = label;
  if (datasetId !== null) body["datasetId"] = datasetId;
  if (versionId !== null) body["datasetVersionId"] = versionId;
  if (args["passK"] !== null) body["passK"] = args["passK"];
  if (args["budgetUsd"] !== null) body["budgetUsd"] = args["budgetUsd"];
  const judges = args["judgeIds"] as string[] | null;
  if (judges && judges.length) body["judgeDeploymentIds"] = [...judges];
  const gate: Json = {};
  if (args["minPassRate"] !== null) gate["min_pass_rate"] = args["minPassRate"];
  if (args["maxRegressions"] !== null) gate["max_regressions"] = args["maxRegressions"];
  if (Object.keys(gate).length) body["gate"] = gate;
  body["arms"] = arms.map((arm) => ({ label: arm.label, agentConnectionId: arm.connectionId }));
  return body;
}

const FIELD_FLAGS: Record<string, string> = {
  name: "--name",
  versionLabel: "--version-label",
  datasetId: "--dataset-id",
  datasetVersionId: "--dataset-version-id",
  passK: "--pass-k",
  budgetUsd: "--budget-usd",
  judgeDeploymentIds: "--judge-id",
  gate: "--min-pass-rate/--max-regressions",
  arms: "--arm",
};
const DECIDE_FIELD_FLAGS: Record<string, string> = { bar: "--bar", baselineArm: "--baseline-arm", sweep_id: "--sweep-id" };

/** A 4xx refusal said in terms of the flag that carried the field; null when it names none. */
function refusedAsUsage(error: ApiError, arms: Arm[], flags: Record<string, string> = FIELD_FLAGS): ConfigError | null {
  if (!(error.status >= 400 && error.status < 500) || !error.field) return null;
  const match = /^arms\[(\d+)\]/.exec(error.field);
  if (match !== null && Number(match[1]) < arms.length) {
    const index = Number(match[1]);
    return new ConfigError(`--arm ${pyRepr((arms[index] as Arm).text)} (arm ${index + 1}): ${error.message}`);
  }
  const flag = flags[(error.field.split(".", 1)[0] as string).split("[", 1)[0] as string];
  return flag === undefined ? null : new ConfigError(`${flag}: ${error.message}`);
}

async function refusalsAsFlags<T>(args: Parsed, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    const usage = refusedAsUsage(error, (args["arms"] ?? []) as Arm[]);
    if (usage === null) throw error;
    throw usage;
  }
}

// --- commands ----------------------------------------------------------------------------------

async function previewCommand(args: Parsed): Promise<number> {
  const body = sweepBody(args, false);
  const board = new Board(process.stderr);
  const client = makeClient(args, board);
  const preview = expectObject(await refusalsAsFlags(args, () => client.post("/model-sweeps/preview", body)), "POST /model-sweeps/preview");
  if (args["asJson"]) {
    process.stderr.write(previewTable(preview));
    writeJson(preview);
  } else {
    process.stdout.write(previewTable(preview));
  }
  return 0;
}

async function startCommand(args: Parsed): Promise<number> {
  const body = sweepBody(args, true);
  const board = new Board(process.stderr);
  const client = makeClient(args, board);
  let created: unknown;
  try {
    created = await refusalsAsFlags(args, () => client.post("/model-sweeps", body));
  } catch (error) {
    if (!(error instanceof Unreachable) || !error.maybeApplied) throw error;
    throw new Unreachable(
      `${error.message}: list the newest sweeps (curl -sH "Authorization: Bearer $NEENS_API_KEY" ` +
        `${client.baseUrl}/model-sweeps) and follow the one of version ${String(body["versionLabel"])}, ` +
        `if it is there, with \`neens-eval sweep-get SWEEP_ID --wait\``,
      { maybeApplied: true },
    );
  }
  const sweep = asSweep(created, "POST /model-sweeps");
  board.log(
    `neens: started sweep ${String(sweep["id"])} (${(body["arms"] as unknown[]).length} arms, ` +
      `pass^${String(sweep["passK"] ?? "None")}); follow it with \`neens-eval sweep-get ${String(sweep["id"])} --wait\``,
  );
  if (!args["wait"]) return finish(client, sweep, args, "read");
  return followToEnd(client, sweep, args, board);
}

async function getCommand(args: Parsed): Promise<number> {
  const board = new Board(process.stderr);
  const client = makeClient(args, board);
  const path = sweepPath(String(args["sweepId"]));
  const sweep = asSweep(await client.get(path), `GET ${path}`);
  if (!args["wait"] || SWEEP_TERMINAL.has(String(sweep["status"]))) return finish(client, sweep, args, args["wait"] ? "finished" : "read");
  return followToEnd(client, sweep, args, board);
}

async function cancelCommand(args: Parsed): Promise<number> {
  const board = new Board(process.stderr);
  const client = makeClient(args, board);
  const path = `${sweepPath(String(args["sweepId"]))}/cancel`;
  const sweep = asSweep(await client.post(path, null), `POST ${path}`);
  return finish(client, sweep, args, "read", true);
}

async function decideCommand(args: Parsed): Promise<number> {
  const positional = given(args["sweepId"]);
  const flag = given(args["sweepIdFlag"]);
  if (positional !== null && flag !== null && positional !== flag) {
    throw new ConfigError(`two different sweeps were given (${positional} and --sweep-id ${flag}); give one, with --sweep-id msw-…`);
  }
  const sweepId = flag ?? positional;
  if (sweepId === null) throw new ConfigError("give the sweep to decide with --sweep-id msw-…");
  const baselineArm = args["baselineArm"] as string | null;
  if (baselineArm !== null && given(baselineArm) === null) {
    throw new ConfigError("--baseline-arm is empty; give the arm id (msa-…) to compare against, or leave the flag out to compare against the first arm");
  }
  const bar = args["bar"] as number | null;
  // The bar as Python's repr writes it, so it reaches the server with every digit it was given.
  const params = { bar: bar === null ? null : Number.isInteger(bar) ? `${bar}.0` : String(bar), baselineArm: given(baselineArm) };
  const board = new Board(process.stderr);
  const client = makeClient(args, board);
  const comparisonPath = `${sweepPath(sweepId)}/comparison`;
  const read = async (): Promise<Json> => {
    let answer: unknown;
    try {
      answer = await client.get(comparisonPath, params);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const usage = refusedAsUsage(error, [], DECIDE_FIELD_FLAGS);
      if (usage === null) throw error;
      throw usage;
    }
    const comparison = expectObject(answer, `GET ${comparisonPath}`);
    if (typeof comparison["sweepId"] !== "string") throw new ApiError(200, "unexpected_response", `GET ${comparisonPath} answered without a sweep id`);
    return comparison;
  };
  let comparison = await read();
  let sweep: Json | null = null;
  let seen: Seen = "read";
  if (args["wait"]) {
    seen = "finished";
    if (!SWEEP_TERMINAL.has(String(comparison["status"]))) {
      const waited = await follow(client, sweepId, args, board, null, `\`neens-eval sweep-decide ${sweepId} --wait\``, false);
      sweep = waited.document;
      seen = waited.outcome === "finished" ? "finished" : "timeout";
      comparison = await read();
    }
  }
  const status = String(comparison["status"]);
  if (EXPLAINED_STATUSES.has(status) && (sweep === null || sweep["status"] !== status)) {
    try {
      sweep = expectObject(await client.get(sweepPath(sweepId)), `GET ${sweepPath(sweepId)}`);
    } catch (error) {
      if (!(error instanceof NeensClientError)) throw error;
      board.log(`neens: the sweep's reason could not be read (${error.message})`);
      sweep = null;
    }
  }
  const conclusion = concludeDecision(comparison, seen, Boolean(args["requireWinner"]), args["timeout"] as number, sweep);
  const report = decisionReport(comparison, client.url(comparisonPath, params));
  if (args["asJson"]) {
    process.stderr.write(report);
    writeJson(comparison);
  } else {
    process.stdout.write(report);
  }
  for (const line of conclusion.lines) process.stderr.write(`${line}\n`);
  return conclusion.exitCode;
}

async function followToEnd(client: Client, sweep: Json, args: Parsed, board: Board): Promise<number> {
  const waited = await follow(client, String(sweep["id"]), args, board, sweep, `\`neens-eval sweep-get ${String(sweep["id"])} --wait\``, Boolean(args["asJson"]));
  return finish(client, waited.document, args, waited.outcome === "finished" ? "finished" : "timeout");
}

async function follow(client: Client, sweepId: string, args: Parsed, board: Board, first: Json | null, again: string, writeLast: boolean): Promise<ObjectWait> {
  const poller = new ObjectPoller(client, sweepPath(sweepId));
  board.log(`neens: waiting for sweep ${sweepId} (timeout ${formatG(args["timeout"] as number)} s)`);
  let last: Json | null = first;
  try {
    const waited = await waitUntilTerminal(poller, {
      terminal: SWEEP_TERMINAL,
      timeoutS: args["timeout"] as number,
      first,
      show: (document) => {
        last = asSweep(document, `GET ${poller.path}`);
        board.update(liveRows(last));
      },
    });
    board.close();
    return waited;
  } catch (error) {
    board.close();
    if (error instanceof NeensClientError && error.exitCode === EXIT_UNREACHABLE) {
      const when = poller.seenAt !== null ? `${poller.seenAt.toISOString().slice(0, 19)}Z` : "its start";
      const status = last !== null ? String((last as Json)["status"]) : "not read yet";
      board.log(`neens: no verdict for sweep ${sweepId}; as last seen (${when}) it was ${status}; the server keeps it: once it is back, follow it again with ${again}`);
      if (writeLast && last !== null) writeJson(last);
    }
    throw error;
  }
}

function finish(client: Client, sweep: Json, args: Parsed, seen: Seen, cancelling = false): number {
  const conclusion = conclude(sweep, seen, Boolean(args["requireAllArms"]), cancelling, (args["timeout"] as number | undefined) ?? null);
  const table = sweepTable(sweep, `${client.baseUrl}${sweepPath(String(sweep["id"]))}`);
  if (args["asJson"]) {
    process.stderr.write(table);
    writeJson(sweep);
  } else {
    process.stdout.write(table);
  }
  for (const line of conclusion.lines) process.stderr.write(`${line}\n`);
  return conclusion.exitCode;
}

function asSweep(answer: unknown, what: string): Json {
  const sweep = expectObject(answer, what);
  if (typeof sweep["id"] !== "string") throw new ApiError(200, "unexpected_response", `${what} answered without a sweep id`);
  return sweep;
}

function sweepPath(sweepId: string): string {
  return `/model-sweeps/${percentEncode(sweepId.trim())}`;
}

function writeJson(document: Json): void {
  process.stdout.write(`${JSON.stringify(document)}\n`);
}

function makeClient(args: Parsed, board: Board): Client {
  const retry = retryFromEnv(process.env);
  if (args["retryWindow"] !== null && args["retryWindow"] !== undefined) {
    retry.windowS = args["retryWindow"] as number;
    retry.windowFrom = "--retry-window";
  }
  const client = NeensClient.fromEnv(process.env, retry);
  let saidAt: number | null = null;
  client.onRetry = (notice) => {
    if (saidAt !== null && notice.waitedS - saidAt < RETRY_NOTICE_EVERY_S) return;
    saidAt = notice.waitedS;
    board.log(describeNotice(notice));
  };
  return client;
}

// --- exit codes --------------------------------------------------------------------------------

function conclude(sweep: Json, seen: Seen, requireAllArms: boolean, cancelling: boolean, timeoutS: number | null): Conclusion {
  const sweepId = String(sweep["id"]);
  const status = String(sweep["status"]);
  if (!SWEEP_STATUSES.has(status)) throw unexpected(`GET /model-sweeps/${sweepId}`, `a sweep status, not ${pyRepr(status)}`);
  if (status === "void") {
    const diverged = list(sweep["divergedArms"]).map(String).join(", ") || "unknown";
    return {
      exitCode: EXIT_UNTRUSTED,
      lines: [
        `neens: sweep ${sweepId} is VOID: ${String(sweep["voidReason"] || "no reason given")}`,
        `neens: diverged arms: ${diverged}. The arms did not run under identical conditions, so no comparison can be drawn from this sweep.`,
      ],
    };
  }
  const reason = String(sweep["reason"] || "no reason given");
  if (status === "failed") return { exitCode: EXIT_UNTRUSTED, lines: [`neens: sweep ${sweepId} failed: ${reason}`] };
  if (status === "cancelled") {
    if (cancelling) return { exitCode: 0, lines: [`neens: sweep ${sweepId} is cancelled: ${reason}`] };
    return { exitCode: EXIT_UNTRUSTED, lines: [`neens: sweep ${sweepId} was cancelled: ${reason}; its evidence is incomplete`] };
  }
  if (status === "pending" || status === "running") {
    const again = `\`neens-eval sweep-get ${sweepId} --wait\``;
    if (seen === "timeout") {
      return {
        exitCode: EXIT_UNREACHABLE,
        lines: [`neens: no verdict after ${formatG(timeoutS ?? 0)} s (--timeout): sweep ${sweepId} is still ${status}; it goes on at the server: follow it again with ${again}`],
      };
    }
    if (requireAllArms) {
      return {
        exitCode: EXIT_UNREACHABLE,
        lines: [`neens: no verdict: sweep ${sweepId} is still ${status}, so whether every arm passed is not known yet (--require-all-arms); wait with ${again}`],
      };
    }
    return { exitCode: 0, lines: [] };
  }
  if (!requireAllArms) return { exitCode: 0, lines: [] };
  const arms = list(sweep["arms"]).filter(isJson);
  const missing = arms.filter((arm) => arm["passed"] !== true);
  if (!missing.length) return { exitCode: 0, lines: ["neens: every arm passed pass^k (--require-all-arms)."] };
  return {
    exitCode: 1,
    lines: [
      `neens: --require-all-arms: ${missing.length} of ${arms.length} arms did not pass pass^k:`,
      ...missing.map((arm) => `neens:   - ${String(arm["label"])}: ${whyNotPassed(arm)}`),
    ],
  };
}

function whyNotPassed(arm: Json): string {
  const p = progress(arm);
  if (arm["status"] === "failed") return `failed: ${String(arm["error"] || "no error recorded")}`;
  if (arm["passed"] === false) return `${String(arm["greenRuns"] ?? 0)}/${p.runs} runs green`;
  return `no verdict (${p.runsFinished}/${p.runs} runs finished)`;
}

function concludeDecision(comparison: Json, seen: Seen, requireWinner: boolean, timeoutS: number, sweep: Json | null): Conclusion {
  const sweepId = String(comparison["sweepId"]);
  const status = String(comparison["status"]);
  const verdict = isJson(comparison["verdict"]) ? comparison["verdict"] : {};
  const outcome = verdict["outcome"];
  if (!SWEEP_STATUSES.has(status)) throw unexpected(`GET /model-sweeps/${sweepId}/comparison`, `a status, not ${pyRepr(status)}`);
  if (typeof outcome !== "string" || !OUTCOMES.has(outcome)) {
    throw unexpected(`GET /model-sweeps/${sweepId}/comparison`, `a verdict outcome, not ${typeof outcome === "string" ? pyRepr(outcome) : "None"}`);
  }
  const known: Json = sweep !== null && sweep["status"] === status ? sweep : {};
  if (status === "void" || comparison["comparable"] !== true || outcome === "unavailable") {
    const reason = comparison["voidReason"] || known["voidReason"] || "no reason given";
    const diverged = list(known["divergedArms"]).map(String).join(", ");
    return {
      exitCode: EXIT_UNTRUSTED,
      lines: [
        `neens: sweep ${sweepId} is VOID: ${oneLine(String(reason))}`,
        `${diverged ? `neens: diverged arms: ${diverged}. ` : "neens: "}The arms did not run under identical conditions, so no arm is ranked or recommended.`,
      ],
    };
  }
  if (status === "failed" || status === "cancelled") {
    const why = oneLine(String(known["reason"] || "no reason given"));
    const said = status === "failed" ? "failed" : "was cancelled";
    return { exitCode: EXIT_UNTRUSTED, lines: [`neens: sweep ${sweepId} ${said}: ${why}; its evidence is incomplete, so its verdict is not one to act on`] };
  }
  const again = "run this command again with --wait";
  if (status === "pending" || status === "running" || outcome === "not_finished") {
    if (seen === "timeout") {
      return {
        exitCode: EXIT_UNREACHABLE,
        lines: [`neens: no verdict after ${formatG(timeoutS)} s (--timeout): sweep ${sweepId} is still ${status}; it goes on at the server: ${again} to wait longer`],
      };
    }
    if (requireWinner) {
      return {
        exitCode: EXIT_UNREACHABLE,
        lines: [`neens: no verdict: sweep ${sweepId} is still ${status}, so whether an arm clears the bar is not known yet (--require-winner); ${again}`],
      };
    }
    return { exitCode: 0, lines: [`neens: sweep ${sweepId} is still ${status}: no verdict yet; ${again}`] };
  }
  if (outcome === "recommended") {
    return requireWinner ? { exitCode: 0, lines: [`neens: ${String(verdict["recommendedLabel"])} is recommended (--require-winner).`] } : { exitCode: 0, lines: [] };
  }
  if (!requireWinner) return { exitCode: 0, lines: [] };
  return { exitCode: 1, lines: [`neens: --require-winner: no arm is recommended: ${oneLine(String(verdict["sentence"]))}`] };
}

// --- what a person reads -----------------------------------------------------------------------

function liveRows(sweep: Json): BoardRow[] {
  const status = String(sweep["status"]);
  const rows: BoardRow[] = [{ key: "", text: `neens: sweep ${String(sweep["id"])} ${status}: spent ${spent(sweep)}`, milestone: status }];
  for (const arm of list(sweep["arms"]).filter(isJson)) {
    const p = progress(arm);
    const finished = `${p.runsFinished}/${p.runs}`;
    const base = `neens:   ${String(arm["label"])}: ${String(arm["status"])}, runs ${finished}, items ${p.itemsDone}/${p.itemsTotal}`;
    rows.push({
      key: `arm:${String(arm["label"])}`,
      text: status === "void" ? base : `${base}, ${String(arm["greenRuns"] ?? 0)} green`,
      milestone: `${String(arm["status"])} ${finished} ${String(arm["greenRuns"] ?? null)}`,
    });
  }
  return rows;
}

function sweepTable(sweep: Json, url: string): string {
  const status = String(sweep["status"]);
  const budget = typeof sweep["budgetUsd"] === "number" ? ` of a ${dollars(sweep["budgetUsd"])} budget` : "";
  const lines = [
    `Model sweep ${String(sweep["id"])} ${JSON.stringify(sweep["name"] ?? null)}, version ${String(sweep["versionLabel"])}: ${status}`,
    `  dataset ${String(sweep["datasetId"])} version ${String(sweep["datasetVersionId"])}, pass^${String(sweep["passK"])}, spent ${spent(sweep)}${budget}`,
    `  judges ${list(sweep["judgeDeploymentIds"]).map(String).join(", ") || "-"}, gate ${pyDumps(sweep["gate"] ?? {})}`,
  ];
  let header: string[];
  if (status === "void") {
    const diverged = list(sweep["divergedArms"]).map(String).join(", ");
    lines.push("", `VOID: ${String(sweep["voidReason"] || "no reason given")}`, `  Diverged arms: ${diverged || "unknown"}. No comparison is drawn from this sweep.`, "");
    header = ["arm", "model", "status", "runs", "items"];
  } else {
    lines.push("");
    header = ["arm", "model", "status", "runs", "items", "green", "pass^k"];
  }
  const table = [header];
  const errors: string[] = [];
  for (const arm of list(sweep["arms"]).filter(isJson)) {
    const p = progress(arm);
    const row = [String(arm["label"]), String(arm["model"] || "-"), String(arm["status"]), `${p.runsFinished}/${p.runs}`, `${p.itemsDone}/${p.itemsTotal}`];
    if (status !== "void") row.push(`${String(arm["greenRuns"] ?? 0)} of ${p.runsFinished}`, passK(arm));
    table.push(row);
    if (arm["error"]) errors.push(`  - ${String(arm["label"])}: ${oneLine(String(arm["error"]))}`);
  }
  lines.push(...aligned(table));
  if (errors.length) lines.push("", "Arm errors:", ...errors);
  if ((status === "failed" || status === "cancelled") && sweep["reason"]) lines.push("", `Reason: ${oneLine(String(sweep["reason"]))}`);
  lines.push("", `  details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" ${url}`);
  return `${lines.join("\n")}\n`;
}

function passK(arm: Json): string {
  if (arm["passed"] === true) return "PASSED";
  if (arm["passed"] === false) return "not passed";
  return arm["status"] === "failed" ? "failed" : "no verdict";
}

function previewTable(preview: Json): string {
  const lines = [
    `Sweep preview: dataset ${String(preview["datasetId"])} version ${String(preview["datasetVersionId"])}, ${String(preview["itemCount"])} items, pass^${String(preview["passK"])}`,
    "",
  ];
  const arms = list(preview["arms"]).filter(isJson);
  const table = [["arm", "model", "calls", "estimate", "basis"]];
  for (const arm of arms) table.push([String(arm["label"]), String(arm["model"] || "-"), String(arm["calls"]), estimate(arm["estimatedUsd"]), String(arm["basis"])]);
  table.push(["total", "", String(preview["totalCalls"]), estimate(preview["estimatedUsd"]), ""]);
  lines.push(...aligned(table));
  const unpriced = arms.filter((arm) => arm["estimatedUsd"] === null || arm["estimatedUsd"] === undefined).map((arm) => String(arm["label"]));
  if (preview["partial"]) lines.push(`  partial: ${unpriced.length} of ${arms.length} arms unpriced (${unpriced.join(", ")}); the total counts the priced arms only`);
  lines.push("", "Basis:", ...arms.map((arm) => `  - ${String(arm["label"])}: ${oneLine(String(arm["basisDetail"] || arm["basis"]))}`), "");
  const budget = preview["budgetUsd"];
  if (typeof budget !== "number") lines.push("Budget: none given (--budget-usd); starting it is not checked against one.");
  else if (preview["wouldRefuse"] === true) lines.push(`Budget ${dollars(budget)}: starting it would be REFUSED: ${oneLine(String(preview["refusal"] ?? ""))}`);
  else if (preview["partial"]) lines.push(`Budget ${dollars(budget)}: starting it would not be refused on the budget; the estimate leaves unpriced arms out, so they are not checked against it.`);
  else lines.push(`Budget ${dollars(budget)}: starting it would not be refused on the budget.`);
  return `${lines.join("\n")}\n`;
}

function aligned(table: string[][]): string[] {
  const widths = (table[0] ?? []).map((_, i) => Math.max(...table.map((row) => (row[i] ?? "").length)));
  return table.map((row) => `  ${row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join("  ")}`.trimEnd());
}

function progress(arm: Json): { runsFinished: string; runs: string; itemsDone: string; itemsTotal: string } {
  const raw = isJson(arm["progress"]) ? arm["progress"] : {};
  const get = (key: string): string => (key in raw ? String(raw[key]) : "?");
  return { runsFinished: get("runsFinished"), runs: get("runs"), itemsDone: get("itemsDone"), itemsTotal: get("itemsTotal") };
}

function spent(sweep: Json): string {
  let text = typeof sweep["spentUsd"] === "number" ? dollars(sweep["spentUsd"]) : "unknown";
  const unpriced = sweep["unpricedCalls"];
  if (typeof unpriced === "number" && unpriced) text += ` (+${unpriced} unpriced call${unpriced !== 1 ? "s" : ""})`;
  return text;
}

function estimate(value: unknown): string {
  return typeof value === "number" ? dollars(value) : "unpriced";
}

/** Dollars with cents; under a dollar four decimals, and "<$0.0001" below that. */
function dollars(value: number): string {
  if (value === 0 || Math.abs(value) >= 1) {
    return `$${value < 0 ? "-" : ""}${groupedFixed(Math.abs(value), 2)}`;
  }
  if (Math.abs(value) < 0.0001) return "<$0.0001";
  return `$${value < 0 ? "-" : ""}${fixed(Math.abs(value), 4)}`;
}

function oneLine(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ");
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export const SWEEP_COMMANDS: Record<string, Command> = {
  "sweep-preview": { spec: specs["sweep-preview"] as CommandSpec, handler: previewCommand, summary: "what a model sweep would call and cost (nothing is created)" },
  "sweep-start": { spec: specs["sweep-start"] as CommandSpec, handler: startCommand, summary: "start a model sweep; with --wait, follow it to the end" },
  "sweep-get": { spec: specs["sweep-get"] as CommandSpec, handler: getCommand, summary: "read a model sweep; with --wait, follow it to the end" },
  "sweep-cancel": { spec: specs["sweep-cancel"] as CommandSpec, handler: cancelCommand, summary: "cancel an unfinished model sweep" },
  "sweep-decide": { spec: specs["sweep-decide"] as CommandSpec, handler: decideCommand, summary: "the server's verdict over a sweep: which arm to ship" },
};
