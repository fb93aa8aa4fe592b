/**
 * The gate-as-code rules, evaluated: what a policy is, and how each check reads a run. A port of
 * the Python SDK's `neens_eval.gate_rules`, held to the same shared cases
 * (tests/shared/gate_cases.json and sdk/conformance).
 *
 * - A rule whose data is missing (an unpriced cost, a metric nothing was scored on) is `skipped`,
 *   never `pass`. A change in % against a baseline of 0 is undefined, so it is `skipped` too.
 * - A value equal to its threshold within float rounding meets it.
 * - Nothing is checked before the run is evaluated (completed or completed_with_regressions).
 *
 * Pure: no I/O.
 */

import { fixed, formatG, fsum, isClose, pyDumps } from "./format.js";

export type Severity = "block" | "warn";
export type MissingBaseline = "warn" | "block" | "pass";
export type RuleStatus = "pass" | "fail" | "skipped" | "missing";
export type Json = Record<string, unknown>;

export const EVALUATED_STATUSES = new Set(["completed", "completed_with_regressions"]);
export const REL_TOLERANCE = 1e-9;
export const ABS_TOLERANCE = 1e-12;

const UNITS: Record<string, string> = {
  "cost.max_avg_usd": " USD",
  "cost.max_delta_usd": " USD",
  "latency.max_avg_ms": " ms",
};

/** One budget of one rule: `cost.max_delta_pct <= 20`, `min_avg_score >= 0.8`, ... */
export interface Check {
  dimension: string;
  budget: string;
  threshold: number;
  severity: Severity;
  origin: string;
  metric: string | null;
}

export function checkName(check: Check): string {
  if (check.metric !== null) return `metric:${check.metric}`;
  if (check.dimension === check.budget) return check.dimension;
  return `${check.dimension}.${check.budget}`;
}

const baselineRelative = (check: Check): boolean => check.budget.includes("delta");
const isMinimum = (check: Check): boolean => check.budget.startsWith("min_");

export interface Rule {
  dimension: string;
  checks: Check[];
  origin: string;
}

export interface GatePolicy {
  gate: Json | null;
  rules: Rule[];
  onMissingBaseline: MissingBaseline;
  source: string | null;
  notes: string[];
}

export function emptyPolicy(): GatePolicy {
  return { gate: null, rules: [], onMissingBaseline: "warn", source: null, notes: [] };
}

export function policyChecks(policy: GatePolicy): Check[] {
  return policy.rules.flatMap((rule) => rule.checks);
}

export interface RuleResult {
  check: Check;
  status: RuleStatus;
  observed: number | null;
  reason: string;
  /** The severity in effect: the check's own, or `warn` for a missing baseline in warn mode. */
  severity: Severity;
}

export function isBlocking(result: RuleResult): boolean {
  return (result.status === "fail" || result.status === "missing") && result.severity === "block";
}

export function ruleToJson(result: RuleResult): Json {
  const out: Json = {
    rule: checkName(result.check),
    dimension: result.check.dimension,
    budget: result.check.budget,
    observed: result.observed,
    threshold: result.check.threshold,
    status: result.status,
    severity: result.severity,
    blocking: isBlocking(result),
    reason: result.reason,
    origin: result.check.origin,
  };
  if (result.check.metric !== null) out["metric"] = result.check.metric;
  return out;
}

/** What the rules read: the run detail, `/items`, `/comparison` and `/metrics` answers. */
export interface RunData {
  status: string;
  items: Json[];
  comparison: Json | null;
  metrics: Json[];
  /** The run's judges (and composite components), each with its name, or null if unreadable. */
  judges: Map<string, string | null>;
}

const evaluated = (data: RunData): boolean => EVALUATED_STATUSES.has(data.status);

function cohort(data: RunData, key: "baseline" | "candidate"): Json | null {
  const value = data.comparison ? data.comparison[key] : null;
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
}

/** Every client-side check, then the server gate's baseline-relative keys when the run has no
 * baseline (the server cannot tell "no regression" from "nothing to regress against"). */
export function evaluate(policy: GatePolicy, data: RunData): RuleResult[] {
  const results = policyChecks(policy).map((check) => evaluateCheck(check, policy.onMissingBaseline, data));
  results.push(...serverGateWithoutBaseline(policy, data));
  return results;
}

export function evaluateCheck(check: Check, mode: MissingBaseline, data: RunData): RuleResult {
  if (check.dimension === "metric") {
    const absent = metricAbsent(check, data);
    if (absent !== null) return { check, status: "missing", observed: null, reason: absent, severity: check.severity };
  }
  if (!evaluated(data)) return skipped(check, `not evaluated: the run is ${data.status}, not completed`);
  if (baselineRelative(check) && cohort(data, "baseline") === null) return missingBaseline(check, mode);
  const [observed, missing] = observe(check, data);
  if (observed === null) return skipped(check, missing);
  return verdict(check, observed);
}

function observe(check: Check, data: RunData): [number | null, string] {
  const candidate = cohort(data, "candidate") ?? {};
  const baseline = cohort(data, "baseline") ?? {};
  if (check.dimension === "max_abs_failures") {
    const failures = data.items.filter(
      (item) => item["status"] === "error" || (item["status"] === "scored" && item["passed"] === false),
    ).length;
    return [failures, ""];
  }
  if (check.dimension === "min_avg_score") {
    const scores = data.items
      .filter((item) => item["status"] === "scored" && finiteNumber(item["score"]) !== null)
      .map((item) => Number(item["score"]));
    if (scores.length === 0) return [null, "no item was scored"];
    return [fsum(scores) / scores.length, ""];
  }
  if (check.dimension === "metric") return observeMetric(check, data);
  const field = ({ cost: "avgCostUsd", latency: "avgLatencyMs", steps: "avgStepCount" } as Record<string, string>)[
    check.dimension
  ] as string;
  const what = ({ cost: "cost", latency: "latency", steps: "step count" } as Record<string, string>)[
    check.dimension
  ] as string;
  const cand = finiteNumber(candidate[field]);
  if (cand === null) return [null, `candidate ${what} unknown: ${whyUnknown(check.dimension, candidate)}`];
  if (check.budget.startsWith("max_avg")) return [cand, ""];
  const base = finiteNumber(baseline[field]);
  if (base === null) return [null, `baseline ${what} unknown: ${whyUnknown(check.dimension, baseline)}`];
  if (check.budget === "max_delta_usd") return [cand - base, ""];
  if (base === 0) return [null, `the baseline ${what} is 0, so a percentage change is undefined`];
  return [((cand - base) / base) * 100.0, ""];
}

function metricAbsent(check: Check, data: RunData): string | null {
  const names = new Set(data.metrics.map((row) => pyStr(row["metric"])));
  const scoredIds = new Set(data.metrics.map((row) => pyStr(row["judgeId"])));
  for (const name of data.judges.values()) if (name !== null) names.add(name);
  const metric = check.metric as string;
  if (names.has(metric) || scoredIds.has(metric) || data.judges.has(metric)) return null;
  for (const [judge, name] of data.judges) if (name === null && !scoredIds.has(judge)) return null;
  if (data.judges.size === 0 && data.metrics.length === 0) return null;
  const listed = names.size ? [...names].sort(pyCompare).map((name) => pyDumps(name)).join(", ") : "none";
  return (
    `no judge of this run produces metric ${pyDumps(metric)} (the run's metrics: ` +
    `${listed}); fix the name in the policy, or create the run with that judge (--judge)`
  );
}

function observeMetric(check: Check, data: RunData): [number | null, string] {
  const rows = data.metrics.filter((row) => row["metric"] === check.metric || row["judgeId"] === check.metric);
  const first = rows[0];
  if (first === undefined) {
    return [null, `metric ${pyDumps(check.metric)} has no score on this run: its judge scored nothing`];
  }
  const average = finiteNumber(first["avgScore"]);
  if (average === null) return [null, `metric ${pyDumps(check.metric)} scored no session`];
  return [average, ""];
}

function whyUnknown(dimension: string, group: Json): string {
  const sessions = pyStr(group["sessions"] ?? null);
  if (dimension === "cost") return `no priced session (${pyStr(group["pricedSessions"] ?? null)} of ${sessions} priced)`;
  return `not measured on its ${sessions} sessions`;
}

function verdict(check: Check, observed: number): RuleResult {
  let failed: boolean;
  let relation: string;
  if (isMinimum(check)) {
    failed = observed < check.threshold && !close(observed, check.threshold);
    relation = failed ? "is below the minimum" : "meets the minimum";
  } else {
    failed = observed > check.threshold && !close(observed, check.threshold);
    relation = failed ? "is above the maximum" : "is within the maximum";
  }
  const reason = `${describe(check)} ${formatValue(check, observed)} ${relation} ${formatValue(check, check.threshold)}`;
  return { check, status: failed ? "fail" : "pass", observed, reason, severity: check.severity };
}

function missingBaseline(check: Check, mode: MissingBaseline): RuleResult {
  const reason = `no baseline cohort to compare against (on_missing_baseline: ${mode})`;
  if (mode === "pass") return { check, status: "skipped", observed: null, reason, severity: check.severity };
  return { check, status: "fail", observed: null, reason, severity: mode === "warn" ? "warn" : check.severity };
}

function skipped(check: Check, reason: string): RuleResult {
  return { check, status: "skipped", observed: null, reason, severity: check.severity };
}

function serverGateWithoutBaseline(policy: GatePolicy, data: RunData): RuleResult[] {
  if (!evaluated(data) || cohort(data, "baseline") !== null || !policy.gate || Object.keys(policy.gate).length === 0) {
    return [];
  }
  const declared: [string, number][] = [];
  if ("max_regressions" in policy.gate) declared.push(["max_regressions", Number(policy.gate["max_regressions"])]);
  const cost = policy.gate["cost"];
  if (typeof cost === "object" && cost !== null && !Array.isArray(cost)) {
    for (const budget of ["max_delta_usd", "max_delta_pct"]) {
      const value = finiteNumber((cost as Json)[budget]);
      if (value !== null) declared.push([budget, value]);
    }
  }
  return declared.map(([budget, threshold]) => {
    const dimension = budget === "max_regressions" ? "gate" : "gate.cost";
    const check: Check = { dimension, budget, threshold, severity: "block", origin: "server gate", metric: null };
    return missingBaseline(check, policy.onMissingBaseline);
  });
}

function describe(check: Check): string {
  if (check.metric !== null) return `metric ${check.metric} avg score`;
  return (
    {
      "cost.max_avg_usd": "cost avg",
      "cost.max_delta_usd": "cost change vs baseline",
      "cost.max_delta_pct": "cost change vs baseline",
      "latency.max_avg_ms": "latency avg",
      "latency.max_delta_pct": "latency change vs baseline",
      "steps.max_avg": "steps avg",
      "steps.max_delta_pct": "step count change vs baseline",
      max_abs_failures: "failed items",
      min_avg_score: "avg item score",
    } as Record<string, string>
  )[checkName(check)] as string;
}

/** A number as the summary shows it, with its unit (`+20.0%`, `0.0042 USD`, `950 ms`). */
export function formatValue(check: Check, value: number): string {
  if (check.budget.endsWith("_pct")) return `${value >= 0 && !Object.is(value, -0) ? "+" : ""}${fixed(value, 1)}%`;
  if (check.budget === "max_abs_failures") return fixed(value, 0);
  const unit = UNITS[checkName(check)] ?? "";
  const sign = check.budget === "max_delta_usd" && value > 0 ? "+" : "";
  return `${sign}${plain(value)}${unit}`;
}

function plain(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  if (Math.abs(value) < 0.01) return formatG(value, 4);
  return fixed(value, 4).replace(/0+$/, "").replace(/\.$/, "");
}

function close(a: number, b: number): boolean {
  return isClose(a, b, REL_TOLERANCE, ABS_TOLERANCE);
}

/** A finite number, else null (booleans are not numbers here). */
export function finiteNumber(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** Python's `str()` of a JSON value, for messages. */
export function pyStr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "string") return value;
  if (typeof value === "number") return String(value);
  return pyDumps(value);
}

/** Sort strings by code point, as Python's `sorted` does. */
export function pyCompare(a: string, b: string): number {
  const left = [...a].map((c) => c.codePointAt(0) as number);
  const right = [...b].map((c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] !== right[i]) return (left[i] as number) - (right[i] as number);
  }
  return left.length - right.length;
}
