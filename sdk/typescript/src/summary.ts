/**
 * The outcome of `neens-eval run` / `neens-eval push`: the verdict, the exit code, and how it is
 * shown (a summary for a person, or one JSON object with `--json`) — the Python SDK's, key for key.
 *
 * The verdict, in order: `no_verdict` (exit 3) when the server went away or `--timeout` ran out;
 * `failed` (exit 1) when items could not be run, the server gate failed, or a `block` rule
 * failed; `passed` (exit 0) otherwise. `--no-gate` turns 1 and 3 into 0, never a usage error.
 */

import { EXIT_UNREACHABLE } from "./errors.js";
import { fixed, formatG, percent, pyDumps, quoteExcerpt, shellJoin } from "./format.js";
import { type Json, type RuleResult, checkName, formatValue, isBlocking, ruleToJson } from "./gateRules.js";
import type { Stream } from "./waiting.js";

export type Verdict = "passed" | "failed" | "no_verdict";
export type Outcome = "finished" | "stalled" | "timeout" | "unreachable";

/** An item whose command failed locally and that the server never captured. */
export interface NotRun {
  itemId: string;
  input: string;
  reason: string;
  /** Recorded on the server as an error, so the run's verdict counts it. */
  recorded: boolean;
}

export interface EvalResult {
  runId: string;
  url: string;
  mode: string;
  versionLabel: string;
  run: Json;
  outcome: Outcome;
  /** False with --no-gate: the verdict is reported but does not fail the command. */
  enforce: boolean;
  gate: Json | null;
  items: Json[];
  comparison: Json | null;
  rules: RuleResult[];
  notRun: NotRun[];
  waitedS: number;
  timeoutS: number;
  policySource: string | null;
  error: string | null;
  warnings: string[];
  command: string[];
  lastSeen: Json | null;
}

export function newResult(fields: Partial<EvalResult> & Pick<EvalResult, "runId" | "url" | "mode" | "versionLabel" | "run" | "outcome" | "enforce">): EvalResult {
  return {
    gate: null,
    items: [],
    comparison: null,
    rules: [],
    notRun: [],
    waitedS: 0,
    timeoutS: 0,
    policySource: null,
    error: null,
    warnings: [],
    command: [],
    lastSeen: null,
    ...fields,
  };
}

const status = (result: EvalResult): string => String(result.run["status"] ?? "unknown");
const blockingRules = (result: EvalResult): RuleResult[] => result.rules.filter(isBlocking);
const warningRules = (result: EvalResult): RuleResult[] =>
  result.rules.filter((rule) => (rule.status === "fail" || rule.status === "missing") && !isBlocking(rule));

export function verdict(result: EvalResult): Verdict {
  if (result.outcome === "unreachable") return "no_verdict";
  if (result.notRun.length) return "failed";
  if (result.outcome !== "finished") return "no_verdict";
  if (result.gate === null || !result.gate["passed"] || blockingRules(result).length) return "failed";
  return "passed";
}

export function exitCode(result: EvalResult): number {
  const v = verdict(result);
  if (v === "no_verdict") return result.enforce ? EXIT_UNREACHABLE : 0;
  if (v === "failed" && result.enforce) return 1;
  return 0;
}

/** Why the verdict is not `passed`, one sentence each. */
export function reasons(result: EvalResult): string[] {
  const out: string[] = [];
  if (result.outcome === "unreachable") {
    out.push(result.error ?? "the server could not be reached");
    return out;
  }
  if (result.notRun.length) {
    const count = result.notRun.length;
    const consequence = result.notRun.every((n) => n.recorded) ? "they count as errors in the run" : "so the run cannot finish";
    out.push(`${count} item${count > 1 ? "s were" : " was"} not run: the agent command failed, ${consequence}`);
  }
  if (result.outcome === "stalled" && !result.notRun.length) {
    out.push(
      `the run is still ${status(result)}: the items whose command failed were captured ` +
        `after all; run the command again to wait for the verdict`,
    );
  }
  if (result.outcome === "timeout") {
    const pending = count(result.run, "pending");
    out.push(
      `no verdict after ${formatG(result.timeoutS)} s (--timeout): the run is still ` +
        `${status(result)} with ${pending} item${pending === 1 ? "" : "s"} pending`,
    );
  }
  if (result.gate !== null) {
    for (const reason of asList(result.gate["reasons"])) out.push(`server gate: ${String(reason)}`);
  }
  for (const rule of blockingRules(result)) out.push(`rule ${checkName(rule.check)}: ${rule.reason}`);
  return out;
}

/** Items by outcome, from `/items` when it was read, else from the run's counts. */
export function counts(result: EvalResult): Record<string, number | null> {
  if (result.items.length) {
    const statuses = result.items.map((item) => item["status"]);
    const verdicts = result.items.filter((item) => item["status"] === "scored").map((item) => item["passed"]);
    const tally = (values: unknown[], wanted: unknown): number => values.filter((v) => v === wanted).length;
    return {
      total: result.items.length,
      passed: tally(verdicts, true),
      failed: tally(verdicts, false),
      scored: tally(statuses, "scored"),
      error: tally(statuses, "error"),
      pending: tally(statuses, "pending"),
      captured: tally(statuses, "captured"),
    };
  }
  const total = result.run["itemCount"];
  return {
    total: typeof total === "number" && Number.isInteger(total) ? total : null,
    passed: null,
    failed: null,
    scored: count(result.run, "scored"),
    error: count(result.run, "error"),
    pending: count(result.run, "pending"),
    captured: count(result.run, "captured"),
  };
}

export function regressions(result: EvalResult): Json[] {
  const ids = asList(result.comparison?.["regressions"]);
  const byId = new Map(result.items.map((item) => [String(item["item_id"]), item]));
  return ids.map((itemId) => {
    const item = byId.get(String(itemId)) ?? {};
    return { itemId, input: item["input"] ?? null, score: item["score"] ?? null };
  });
}

export function resultToJson(result: EvalResult): Json {
  return {
    runId: result.runId,
    url: result.url,
    mode: result.mode,
    versionLabel: result.versionLabel,
    status: status(result),
    verdict: verdict(result),
    exitCode: exitCode(result),
    enforced: result.enforce,
    reasons: reasons(result),
    counts: counts(result),
    passRate: result.gate?.["passRate"] ?? null,
    gate: result.gate,
    rules: result.rules.map(ruleToJson),
    regressions: regressions(result),
    notRun: result.notRun.map((n) => ({ itemId: n.itemId, input: n.input, reason: n.reason, recorded: n.recorded })),
    warnings: result.warnings,
    policy: result.policySource,
    error: result.error,
    lastSeen: result.lastSeen,
  };
}

export function writeJson(result: EvalResult, stream: Stream): void {
  stream.write(`${JSON.stringify(resultToJson(result))}\n`);
}

/** The summary a person reads: the run, the server gate, regressions, rules, the verdict. */
export function writeSummary(result: EvalResult, stream: Stream): void {
  const lines: string[] = [];
  const tally = counts(result);
  lines.push(`Pre-prod run ${result.runId} (${result.mode} mode), version ${result.versionLabel}: ${status(result)}`);
  if (result.items.length) {
    const parts = [`${tally["total"]} items`, `${tally["passed"]} passed`, `${tally["failed"]} failed`];
    for (const key of ["error", "pending", "captured"]) {
      if (tally[key]) parts.push(`${tally[key]} ${key === "error" ? "errored" : key}`);
    }
    lines.push(`  ${parts.join(", ")}`);
  }
  lines.push(`  ${apiHint(result.url)}`);

  if (result.gate !== null) {
    const rate = result.gate["passRate"];
    const shownRate = typeof rate === "number" ? `, pass rate ${percent(rate, 0)}` : "";
    lines.push("", `Server gate: ${result.gate["passed"] ? "passed" : "failed"}${shownRate}, policy ${pyDumps(result.gate["gate"] ?? null)}`);
    for (const reason of asList(result.gate["reasons"])) lines.push(`  - ${String(reason)}`);
    for (const row of asList(result.gate["costRules"]) as Json[]) {
      lines.push(
        `  - cost rule ${String(row["rule"])}: ${String(row["status"]).toUpperCase()} (observed ` +
          `${number6(row["observed"])}, threshold ${number6(row["threshold"])})`,
      );
    }
  }

  const regressed = regressions(result);
  if (regressed.length) {
    lines.push("", `Regressions (${regressed.length}): the baseline passed, the candidate failed`);
    for (const row of regressed) {
      const score = row["score"];
      const shown = typeof score === "number" ? ` score ${fixed(score, 2)}` : "";
      lines.push(`  - ${String(row["itemId"])} ${quoteExcerpt(row["input"])}${shown}`);
    }
  }

  if (result.rules.length) {
    lines.push("", `Rules${result.policySource ? ` (${result.policySource})` : ""}:`);
    const table = result.rules.map((rule) => [
      rule.status.toUpperCase(),
      rule.severity,
      checkName(rule.check),
      rule.observed === null ? "-" : formatValue(rule.check, rule.observed),
      formatValue(rule.check, rule.check.threshold),
      rule.reason,
    ]);
    const header = ["status", "severity", "rule", "observed", "threshold", ""];
    const all = [header, ...table];
    const widths = [0, 1, 2, 3, 4].map((i) => Math.max(...all.map((row) => (row[i] as string).length)));
    for (const row of all) {
      const cells = widths.map((width, i) => (row[i] as string).padEnd(width));
      lines.push(`  ${cells.join("  ")}  ${row[5] as string}`.trimEnd());
    }
  }

  if (result.notRun.length) {
    const where = result.notRun.every((n) => n.recorded) ? "recorded as errors on the server" : "still pending on the server";
    lines.push("", `Not run (${result.notRun.length}): ${where}`);
    for (const n of result.notRun) lines.push(`  - ${n.itemId} ${quoteExcerpt(n.input)}: ${n.reason}`);
  }

  if (result.warnings.length) {
    lines.push("", "Warnings:");
    for (const warning of result.warnings) lines.push(`  - ${warning}`);
  }

  lines.push("");
  const v = verdict(result);
  const warned = warningRules(result);
  if (v === "passed" && warned.length) {
    lines.push(
      `Gate passed, with ${warned.length} warning${warned.length > 1 ? "s" : ""} (a rule of severity ` +
        `warn that fails or is missing is reported and does not block):`,
    );
    for (const rule of warned) lines.push(`  - rule ${checkName(rule.check)}: ${rule.reason}`);
  } else if (v === "passed") {
    lines.push("Gate passed.");
  } else if (v === "failed") {
    lines.push("Gate FAILED:");
    for (const reason of reasons(result)) lines.push(`  - ${reason}`);
    if (!result.enforce) lines.push("--no-gate: reported only, exiting 0.");
  } else {
    lines.push("No verdict:");
    for (const reason of reasons(result)) lines.push(`  - ${reason}`);
    if (result.outcome === "unreachable" && result.lastSeen !== null) lines.push(`  - ${describeLastSeen(result.lastSeen)}`);
    if (!result.enforce) lines.push("--no-gate: reported only, exiting 0.");
  }
  lines.push(...nextSteps(result));
  stream.write(`${lines.join("\n")}\n`);
}

function nextSteps(result: EvalResult): string[] {
  const again = `neens-eval run --run-id ${result.runId} -- ${result.command.length ? shellJoin(result.command) : "<your agent command>"}`;
  if (result.notRun.length && result.notRun.every((n) => n.recorded)) {
    return ["Fix the agent, then start a new run: the failed items are errors in this one."];
  }
  if (result.notRun.length) return [`Fix the agent, then run only the missing items: ${again}`];
  if (result.outcome !== "timeout" && result.outcome !== "unreachable") return [];
  if (result.mode !== "runner" || result.outcome === "unreachable") {
    return [`The run goes on at the server; follow it again with: ${followCommand(result)}`];
  }
  if (count(result.run, "captured") + count(result.run, "scored") === 0) {
    return [
      "No trace reached the run: check that the agent exports OpenTelemetry traces to " +
        "Neens (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and flushes them before it exits.",
      `Then wait again with: ${again}`,
    ];
  }
  return [`The run goes on at the server; wait again, with a longer --timeout: ${again}`];
}

/** The command that picks the run up again and gates on it. */
export function followCommand(result: EvalResult): string {
  if (result.mode === "runner" && result.command.length) {
    return `neens-eval run --run-id ${result.runId} -- ${shellJoin(result.command)}`;
  }
  return `neens-eval push --run-id ${result.runId}`;
}

/** The run's address, said for what it is: JSON from the API, which needs the key. */
export function apiHint(url: string): string {
  return `details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" ${url}`;
}

/** `last seen at …: running, 1/3 captured, 0/3 scored` (counts as of that moment). */
export function describeLastSeen(seen: Json): string {
  const tally = (typeof seen["counts"] === "object" && seen["counts"] !== null ? seen["counts"] : {}) as Json;
  const total = seen["itemCount"] ?? "?";
  const n = (key: string): number => Number(tally[key] ?? 0) || 0;
  const captured = n("captured") + n("scored") + n("error");
  const done = n("scored") + n("error");
  return (
    `last seen at ${String(seen["at"])}: ${String(seen["status"])}, ${captured}/${String(total)} captured, ` +
    `${done}/${String(total)} scored (${String(tally["pending"] ?? "?")} pending)`
  );
}

function count(run: Json, key: string): number {
  const tally = run["counts"];
  const value = typeof tally === "object" && tally !== null ? (tally as Json)[key] : undefined;
  return typeof value === "number" && Number.isInteger(value) ? value : 0;
}

function number6(value: unknown): string {
  return typeof value === "number" ? formatG(value, 6) : "-";
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
