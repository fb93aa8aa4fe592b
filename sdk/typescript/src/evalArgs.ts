/**
 * The command line of `neens-eval run` and `neens-eval push`: the flags, their types, and the
 * checks on which flags go together — the Python `neens eval run|push` flags, one for one.
 */

import { ArgumentTypeError, type CommandSpec, type OptionSpec, type Parsed } from "./args.js";
import { parseNumber, parseWindow, pyRepr, RETRY_WINDOW_VAR } from "./client.js";
import { ConfigError } from "./errors.js";
import { formatG } from "./format.js";
import { type GatePolicy, type Json, emptyPolicy } from "./gateRules.js";
import { POLICY_ENV_VAR, checkServerGate, flagRule, loadPolicy, withFlagRules } from "./gatePolicy.js";

export const DEFAULT_TIMEOUT_S = 600;
export const DEFAULT_ITEM_TIMEOUT_S = 300;
const WINDOW_UNITS_S: Record<string, number> = { m: 60, h: 3600, d: 86400 };
const MAX_WINDOW_S = 366 * 86400;

/** The seconds a baseline window such as 7d, 24h or 30m spans, or null when `text` is not one
 * or is longer than 366 days (tests/shared/baseline_ranges.json holds both SDKs and the server
 * to the same rules). */
export function windowSeconds(text: string): number | null {
  const match = /^([1-9][0-9]{0,3})([mhd])$/.exec(text);
  if (match === null) return null;
  const seconds = Number(match[1]) * (WINDOW_UNITS_S[match[2] as string] as number);
  return seconds <= MAX_WINDOW_S ? seconds : null;
}

export const EXIT_CODES_HELP = `exit codes:
  0  the gate passed (or --no-gate, whatever the verdict or its absence)
  1  the gate failed: the server gate, a \`block\` rule, or items whose command failed
  2  usage or configuration error: a bad flag or policy file, a missing NEENS_BASE_URL or
     NEENS_API_KEY, a refused key, a dataset without a golden version
  3  no verdict: the server could not be reached for the whole retry window, or --timeout
     ran out
`;

const CREATE_ONLY: [string, string][] = [
  ["dataset", "--dataset"],
  ["versionLabel", "--version-label"],
  ["name", "--name"],
  ["datasetVersion", "--dataset-version"],
  ["baseline", "--baseline"],
  ["minPassRate", "--min-pass-rate"],
  ["maxRegressions", "--max-regressions"],
  ["judges", "--judge"],
  ["agentConnection", "--agent-connection"],
];

function createOptions(): OptionSpec[] {
  return [
    { flag: "--dataset", metavar: "NAME|ID", kind: "value", help: "the golden dataset: its name, or its id (ds_…)" },
    { flag: "--version-label", metavar: "LABEL", kind: "value", help: "what is evaluated: a git SHA, pr-482, …" },
    { flag: "--name", metavar: "NAME", kind: "value", help: "a name for the run (default: the version label)" },
    {
      flag: "--dataset-version",
      metavar: "ID",
      kind: "value",
      help: "pin a dataset version (dsv_…) instead of the dataset's golden version",
    },
    {
      flag: "--baseline",
      metavar: "prod:WINDOW|run:ID",
      kind: "value",
      convert: baseline,
      help: "compare with production over a window (prod:7d, prod:24h) or an earlier run (run:ppr_…)",
    },
    {
      flag: "--judge",
      dest: "judges",
      metavar: "ID",
      kind: "extend",
      help: "judges that score the run (jdg_…; repeatable); default: the Primary Score",
    },
    { flag: "--project-id", metavar: "ID", kind: "value", help: "not supported: the API key decides the project" },
  ];
}

function gateOptions(): OptionSpec[] {
  return [
    { flag: "--min-pass-rate", metavar: "X", kind: "value", convert: fraction, help: "server gate: the least share of items that must pass (0..1)" },
    { flag: "--max-regressions", metavar: "N", kind: "value", convert: count, help: "server gate: the most items that may regress against the baseline" },
    { flag: "--gate-policy", metavar: "PATH", kind: "value", help: `a gate policy file, JSON or YAML (default: $${POLICY_ENV_VAR})` },
    { flag: "--max-cost-delta-pct", metavar: "PCT", kind: "value", convert: pct, help: "block rule: cost may grow at most PCT% over the baseline (negative: must shrink)" },
    { flag: "--max-latency-delta-pct", metavar: "PCT", kind: "value", convert: pct, help: "block rule: latency may grow at most PCT% over the baseline" },
    { flag: "--min-avg-score", metavar: "X", kind: "value", convert: fraction, help: "block rule: the mean item score must be at least X (0..1)" },
    { flag: "--max-abs-failures", metavar: "N", kind: "value", convert: count, help: "block rule: at most N items may fail or error" },
    {
      flag: "--timeout",
      metavar: "SECONDS",
      kind: "value",
      convert: seconds,
      default: DEFAULT_TIMEOUT_S,
      help: `how long to wait for the verdict (default ${DEFAULT_TIMEOUT_S}); then exit 3`,
    },
    {
      flag: "--retry-window",
      metavar: "SECONDS",
      kind: "value",
      convert: retryWindow,
      help: `how long to keep retrying while Neens does not answer, then exit 3 (default: $${RETRY_WINDOW_VAR}, else 60)`,
    },
    { flag: "--no-gate", kind: "flag", help: "print the gate but exit 0 when it fails (usage errors still exit 2)" },
    { flag: "--json", dest: "asJson", kind: "flag", help: "write one JSON result to stdout (the summary goes to stderr)" },
    { flag: "--summary-md", metavar: "FILE", kind: "value", help: "also write the result as markdown to FILE, for a CI step to post on the pull request" },
  ];
}

export const RUN_SPEC: CommandSpec = {
  name: "run",
  usage: "neens-eval run (--create --dataset NAME|ID --version-label LABEL | --run-id ID) [options] -- COMMAND [ARG ...]",
  description:
    "Invoke COMMAND once per frozen prompt still pending in the run, with the prompt on stdin and in " +
    "$NEENS_ITEM_INPUT, and the correlation attributes (neens.eval_run_id, neens.dataset_item_id, " +
    "neens.version_label) in OTEL_RESOURCE_ATTRIBUTES; then wait for the verdict and exit with it.",
  options: [
    { flag: "--create", kind: "flag", help: "create a new run and drive it" },
    { flag: "--run-id", metavar: "ID", kind: "value", help: "drive an existing run (ppr_…): run its pending items, or just wait for a push run" },
    ...createOptions(),
    { flag: "--concurrency", metavar: "N", kind: "value", convert: positiveInt, default: 1, help: "items run at the same time (default 1); each is tagged with its own item id" },
    {
      flag: "--item-timeout",
      metavar: "SECONDS",
      kind: "value",
      convert: seconds,
      default: DEFAULT_ITEM_TIMEOUT_S,
      help: `kill one item's command after this long (default ${DEFAULT_ITEM_TIMEOUT_S})`,
    },
    ...gateOptions(),
  ],
  positionals: [{ dest: "command", metavar: "COMMAND", kind: "rest", help: "the agent command, after --" }],
  epilog: EXIT_CODES_HELP,
};

export const PUSH_SPEC: CommandSpec = {
  name: "push",
  usage: "neens-eval push (--dataset NAME|ID --version-label LABEL --agent-connection ID | --run-id ID) [options]",
  description:
    "Create a push-mode run: Neens calls the agent connection with every golden prompt and scores the " +
    "answers. Wait for the verdict and exit with it. With --run-id, follow an existing run (push or " +
    "runner mode) instead, and gate on it.",
  options: [
    { flag: "--agent-connection", metavar: "ID", kind: "value", help: "the agent connection Neens calls (conn_…), see POST /agent-connections" },
    { flag: "--run-id", metavar: "ID", kind: "value", help: "follow an existing run (ppr_…) to its verdict instead of creating one" },
    ...createOptions(),
    ...gateOptions(),
  ],
  positionals: [],
  epilog: EXIT_CODES_HELP,
};

/** The gate sent at create: the policy's `gate` block, with the flags' thresholds on top. */
export function serverGate(policy: GatePolicy, args: Parsed): Json {
  const gate: Json = { ...(policy.gate ?? {}) };
  if (args["minPassRate"] !== null) gate["min_pass_rate"] = args["minPassRate"];
  if (args["maxRegressions"] !== null) gate["max_regressions"] = args["maxRegressions"];
  return gate;
}

export async function policyFromArgs(args: Parsed, env: Record<string, string | undefined>): Promise<GatePolicy> {
  let path = args["gatePolicy"] as string | null;
  if (path === null && (env[POLICY_ENV_VAR] ?? "").trim()) path = (env[POLICY_ENV_VAR] as string).trim();
  let policy = path !== null ? await loadPolicy(path) : emptyPolicy();
  const flags: [string, string, string, unknown][] = [
    ["--max-cost-delta-pct", "cost", "max_delta_pct", args["maxCostDeltaPct"]],
    ["--max-latency-delta-pct", "latency", "max_delta_pct", args["maxLatencyDeltaPct"]],
    ["--min-avg-score", "min_avg_score", "min_avg_score", args["minAvgScore"]],
    ["--max-abs-failures", "max_abs_failures", "max_abs_failures", args["maxAbsFailures"]],
  ];
  policy = withFlagRules(
    policy,
    flags.filter(([, , , value]) => value !== null).map(([flag, dimension, budget, value]) => flagRule(flag, dimension, budget, Number(value))),
  );
  for (const note of policy.notes) process.stderr.write(`neens: note: ${note}\n`);
  if (policy.gate !== null) checkServerGate(policy.gate, `gate policy ${policy.source}: gate`);
  return policy;
}

export function refuseCreateFlags(args: Parsed, instead: string): void {
  const given = CREATE_ONLY.filter(([dest]) => args[dest] !== null && args[dest] !== undefined).map(([, flag]) => flag);
  if (given.length) {
    const several = given.length > 1;
    throw new ConfigError(
      `${given.join(", ")} ${several ? "are" : "is"} only for creating a run: with ` +
        `${instead} the run keeps the dataset, baseline, judges and server gate it was ` +
        `created with; drop ${several ? "them" : "it"} (client-side rules such as ` +
        `--min-avg-score or --gate-policy still apply)`,
    );
  }
}

export function requireCreateFields(args: Parsed): void {
  const missing = CREATE_ONLY.slice(0, 2)
    .filter(([dest]) => !String(args[dest] ?? "").trim())
    .map(([, flag]) => flag);
  if (missing.length) {
    throw new ConfigError(
      `${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} required to create ` +
        `a run, for example: --dataset support-golden --version-label "$GIT_SHA"`,
    );
  }
}

export function refuseProjectId(args: Parsed): void {
  if (args["projectId"] !== null) {
    throw new ConfigError(
      "--project-id is not supported: the API key decides the project of the run; drop " +
        "--project-id and set NEENS_API_KEY to a key of the project you want",
    );
  }
}

function baseline(text: string): Json {
  const at = text.indexOf(":");
  const kind = at < 0 ? text : text.slice(0, at);
  const value = at < 0 ? "" : text.slice(at + 1);
  if (kind === "prod" && windowSeconds(value) !== null) return { kind: "prod_window", range: value };
  if (kind === "run" && value.trim()) return { kind: "preprod_run", value: value.trim() };
  throw new ArgumentTypeError(
    `${pyRepr(text)} is not a baseline; use prod:WINDOW (prod:7d, prod:24h, prod:30m; at most ` +
      `366 days) or run:RUN_ID (run:ppr_…)`,
  );
}

export function number(text: string): number {
  const value = parseNumber(text);
  if (value === null) throw new ArgumentTypeError(`${pyRepr(text)} is not a number`);
  if (!Number.isFinite(value)) throw new ArgumentTypeError(`${pyRepr(text)} is not a finite number`);
  return value;
}

export function fraction(text: string): number {
  const value = number(text);
  if (!(value >= 0 && value <= 1)) throw new ArgumentTypeError(`${text} is not between 0 and 1 (0.9 means 90%)`);
  return value;
}

function pct(text: string): number {
  const value = number(text);
  if (value < -100) throw new ArgumentTypeError(`${text} is below -100 (cheaper than free)`);
  return value;
}

export function retryWindow(text: string): number {
  try {
    return parseWindow(text, "--retry-window");
  } catch (error) {
    if (error instanceof ConfigError) throw new ArgumentTypeError(error.message.replace(/^--retry-window: /, ""));
    throw error;
  }
}

export function seconds(text: string): number {
  const value = number(text);
  if (value <= 0) throw new ArgumentTypeError(`${text} is not a positive number of seconds`);
  return value;
}

export function count(text: string): number {
  if (!/^\s*[+-]?\d+(_\d+)*\s*$/.test(text)) throw new ArgumentTypeError(`${pyRepr(text)} is not a whole number`);
  const value = Number(text.trim().replaceAll("_", ""));
  if (value < 0) throw new ArgumentTypeError(`${text} is negative`);
  return value;
}

export function positiveInt(text: string): number {
  const value = count(text);
  if (value < 1) throw new ArgumentTypeError(`${text} must be at least 1`);
  return value;
}

export { formatG };
