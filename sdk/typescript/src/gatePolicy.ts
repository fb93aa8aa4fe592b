/**
 * Gate-as-code: reading the policy file of `--gate-policy` / `NEENS_GATE_POLICY` (JSON; YAML when
 * the `yaml` npm package can be imported) and the convenience flags' rules. The same file means
 * the same gate to both SDKs: the checks and messages are the Python SDK's.
 */

import { readFileSync, statSync } from "node:fs";
import { extname } from "node:path";

import { ConfigError } from "./errors.js";
import { pyDumps } from "./format.js";
import {
  type Check,
  type GatePolicy,
  type Json,
  type MissingBaseline,
  type Rule,
  type Severity,
  finiteNumber,
} from "./gateRules.js";

export const POLICY_ENV_VAR = "NEENS_GATE_POLICY";
const POLICY_KEYS = ["gate", "rules", "on_missing_baseline"];
const SERVER_GATE_KEYS = ["max_regressions", "min_pass_rate", "cost"];
const SERVER_COST_KEYS = ["max_avg_usd", "max_delta_usd", "max_delta_pct"];
const SEVERITIES: Severity[] = ["block", "warn"];
const MISSING_BASELINE_MODES: MissingBaseline[] = ["warn", "block", "pass"];
const FAMILIES: Record<string, string[]> = {
  cost: ["max_avg_usd", "max_delta_usd", "max_delta_pct"],
  latency: ["max_avg_ms", "max_delta_pct"],
  steps: ["max_avg", "max_delta_pct"],
};
const DIMENSIONS = [...Object.keys(FAMILIES), "max_abs_failures", "min_avg_score", "metric"];

/** Read and check a policy file; every problem is a `ConfigError` naming the file. */
export async function loadPolicy(path: string): Promise<GatePolicy> {
  let raw: Buffer;
  try {
    if (statSync(path).isDirectory()) {
      throw new ConfigError(`gate policy ${path}: is a directory; give a .json or .yaml file`);
    }
    raw = readFileSync(path);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") {
      throw new ConfigError(`gate policy ${path}: no such file; check --gate-policy or ${POLICY_ENV_VAR}`);
    }
    throw new ConfigError(`gate policy ${path}: cannot be read (${(error as Error).message})`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
  } catch {
    throw new ConfigError(`gate policy ${path}: not valid UTF-8; save it as UTF-8`);
  }
  if (text.startsWith("\ufeff")) text = text.slice(1);
  return parsePolicy(await parseDocument(text, path), path);
}

async function parseDocument(text: string, path: string): Promise<unknown> {
  const suffix = extname(path).toLowerCase();
  if (suffix === ".yaml" || suffix === ".yml") return parseYaml(text, path);
  let jsonProblem: string;
  try {
    return JSON.parse(text);
  } catch (error) {
    jsonProblem = (error as Error).message;
  }
  if (suffix === ".json") throw new ConfigError(`gate policy ${path}: not valid JSON (${jsonProblem})`);
  if ((await yamlModule()) === null) {
    throw new ConfigError(
      `gate policy ${path}: not valid JSON (${jsonProblem}); a YAML policy needs the yaml ` +
        `package (npm install yaml), or write the policy as JSON`,
    );
  }
  try {
    return await parseYaml(text, path);
  } catch {
    throw new ConfigError(
      `gate policy ${path}: neither valid JSON (${jsonProblem}) nor valid YAML; fix the ` +
        `syntax (name the file .yaml to see the YAML error)`,
    );
  }
}

interface YamlModule {
  parse(text: string): unknown;
}

async function parseYaml(text: string, path: string): Promise<unknown> {
  const yaml = await yamlModule();
  if (yaml === null) {
    throw new ConfigError(
      `gate policy ${path} is YAML, but the yaml package is not installed: npm install yaml, ` +
        `or write the policy as JSON`,
    );
  }
  try {
    return yaml.parse(text);
  } catch (error) {
    throw new ConfigError(`gate policy ${path}: not valid YAML (${oneLine((error as Error).message)})`);
  }
}

/** The `yaml` package when it can be imported, else null: it is optional. */
async function yamlModule(): Promise<YamlModule | null> {
  const name = "yaml";
  try {
    const module = (await import(name)) as { parse?: unknown; default?: { parse?: unknown } };
    const parse = module.parse ?? module.default?.parse;
    return typeof parse === "function" ? { parse: parse as (text: string) => unknown } : null;
  } catch {
    return null;
  }
}

/** Check a decoded policy document; `source` (the file) prefixes every error message. */
export function parsePolicy(document: unknown, source: string): GatePolicy {
  const where = `gate policy ${source}`;
  if (!isJson(document)) fail(where, `expected an object with ${keys(POLICY_KEYS)}, got ${kind(document)}`);
  const doc = document as Json;
  for (const key of Object.keys(doc)) {
    if (!POLICY_KEYS.includes(key)) fail(where, `unknown key ${pyDumps(key)}; a policy has ${keys(POLICY_KEYS)}`);
  }
  let gate: Json | null = null;
  if (doc["gate"] !== undefined && doc["gate"] !== null) gate = checkServerGate(doc["gate"], `${where}: gate`);
  let rulesRaw = doc["rules"] ?? [];
  if (rulesRaw === null) rulesRaw = [];
  if (!Array.isArray(rulesRaw)) fail(where, `"rules" must be a list of rule objects, got ${kind(rulesRaw)}`);
  const rules = (rulesRaw as unknown[]).map((raw, index) =>
    parseRule(raw, `rules[${index}]`, `${where}: rules[${index}]`),
  );
  const mode = doc["on_missing_baseline"] ?? "warn";
  if (!MISSING_BASELINE_MODES.includes(mode as MissingBaseline)) {
    fail(where, `"on_missing_baseline" must be "warn", "block" or "pass", got ${pyDumps(mode)}`);
  }
  return { gate, rules, onMissingBaseline: mode as MissingBaseline, source, notes: [] };
}

/** Check the keys and types of a `gate` block before it is sent (the server checks it too). */
export function checkServerGate(gate: unknown, where: string): Json {
  if (!isJson(gate)) fail(where, `must be an object, got ${kind(gate)}`);
  for (const [key, value] of Object.entries(gate as Json)) {
    if (!SERVER_GATE_KEYS.includes(key)) fail(where, `unknown key ${pyDumps(key)}; the gate has ${keys(SERVER_GATE_KEYS)}`);
    if (key === "max_regressions" && !isCount(value)) {
      fail(where, `max_regressions must be an integer >= 0, got ${pyDumps(value)}`);
    }
    if (key === "min_pass_rate" && !isFraction(value)) {
      fail(where, `min_pass_rate must be a number between 0 and 1, got ${pyDumps(value)}`);
    }
    if (key === "cost") {
      if (!isJson(value) || Object.keys(value).length === 0) {
        fail(where, `cost must be an object with some of ${keys(SERVER_COST_KEYS)}`);
      }
      for (const [sub, number] of Object.entries(value as Json)) {
        if (!SERVER_COST_KEYS.includes(sub)) {
          fail(where, `cost has an unknown key ${pyDumps(sub)}; it accepts ${keys(SERVER_COST_KEYS)}`);
        }
        if (finiteNumber(number) === null) fail(where, `cost.${sub} must be a number, got ${pyDumps(number)}`);
      }
    }
  }
  return { ...(gate as Json) };
}

/** Check one rule: exactly one dimension key, its budgets, an optional severity. */
export function parseRule(raw: unknown, origin: string, where: string): Rule {
  if (!isJson(raw)) fail(where, `a rule must be an object such as {"min_avg_score": 0.8}, got ${kind(raw)}`);
  const rule = raw as Json;
  const allowed = [...DIMENSIONS, "min_avg", "severity"];
  for (const key of Object.keys(rule)) {
    if (!allowed.includes(key)) {
      fail(
        where,
        `unknown key ${pyDumps(key)}; a rule has exactly one of ${keys(DIMENSIONS)} ` +
          `(with "min_avg" for metric), and an optional "severity"`,
      );
    }
  }
  const dimensions = Object.keys(rule).filter((key) => DIMENSIONS.includes(key));
  if (dimensions.length !== 1) {
    const found = dimensions.length ? `found ${keys(dimensions)}` : "found none";
    fail(where, `a rule has exactly one dimension key of ${keys(DIMENSIONS)} (${found}); split it into one rule per dimension`);
  }
  const dimension = dimensions[0] as string;
  const severity = rule["severity"] ?? "block";
  if (!SEVERITIES.includes(severity as Severity)) {
    fail(where, `"severity" must be "block" or "warn", got ${pyDumps(severity)}`);
  }
  const sev = severity as Severity;
  if ("min_avg" in rule && dimension !== "metric") {
    fail(where, '"min_avg" belongs to a metric rule: {"metric": "<name>", "min_avg": 0.8}');
  }
  const value = rule[dimension];
  const checks: Check[] = [];
  const make = (budget: string, threshold: number, metric: string | null = null): Check => ({
    dimension,
    budget,
    threshold,
    severity: sev,
    origin,
    metric,
  });
  if (dimension in FAMILIES) {
    const budgets = FAMILIES[dimension] as string[];
    if (!isJson(value) || Object.keys(value).length === 0) {
      fail(where, `"${dimension}" must be an object with some of ${keys(budgets)}`);
    }
    for (const [budget, threshold] of Object.entries(value as Json)) {
      if (!budgets.includes(budget)) {
        fail(where, `${dimension} has an unknown budget ${pyDumps(budget)}; it accepts ${keys(budgets)}`);
      }
      const number = finiteNumber(threshold);
      if (number === null) fail(where, `${dimension}.${budget} must be a number, got ${pyDumps(threshold)}`);
      const floor = budget === "max_delta_pct" ? -100 : budget.includes("avg") ? 0 : null;
      if (floor !== null && (number as number) < floor) {
        fail(where, `${dimension}.${budget} must be >= ${floor}, got ${String(threshold)}`);
      }
      checks.push(make(budget, number as number));
    }
  } else if (dimension === "max_abs_failures") {
    if (!isCount(value)) fail(where, `max_abs_failures must be an integer >= 0, got ${pyDumps(value)}`);
    checks.push(make(dimension, value as number));
  } else if (dimension === "min_avg_score") {
    if (!isFraction(value)) fail(where, `min_avg_score must be a number between 0 and 1, got ${pyDumps(value)}`);
    checks.push(make(dimension, value as number));
  } else {
    if (typeof value !== "string" || !value.trim()) {
      fail(where, `"metric" must be the name of a judge metric, got ${pyDumps(value)}`);
    }
    if (!("min_avg" in rule)) fail(where, `metric ${pyDumps(value)} needs a "min_avg" floor between 0 and 1`);
    if (!isFraction(rule["min_avg"])) {
      fail(where, `min_avg must be a number between 0 and 1, got ${pyDumps(rule["min_avg"])}`);
    }
    checks.push(make("min_avg", rule["min_avg"] as number, value as string));
  }
  return { dimension, checks, origin };
}

/** Add the convenience flags' block rules; each replaces every file rule of its dimension. */
export function withFlagRules(policy: GatePolicy, flagRules: Rule[]): GatePolicy {
  let rules = [...policy.rules];
  const notes = [...policy.notes];
  for (const flag of flagRules) {
    for (const rule of rules.filter((r) => r.dimension === flag.dimension)) {
      notes.push(`${flag.origin} replaces ${rule.origin} (${rule.dimension}) of the gate policy`);
    }
    rules = rules.filter((r) => r.dimension !== flag.dimension);
    rules.push(flag);
  }
  return { ...policy, rules, notes };
}

/** The block rule a convenience flag such as `--max-cost-delta-pct 20` stands for. */
export function flagRule(flag: string, dimension: string, budget: string, threshold: number): Rule {
  return { dimension, checks: [{ dimension, budget, threshold, severity: "block", origin: flag, metric: null }], origin: flag };
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): boolean {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

function isFraction(value: unknown): boolean {
  const number = finiteNumber(value);
  return number !== null && number >= 0 && number <= 1;
}

function keys(names: string[]): string {
  const quoted = names.map((name) => pyDumps(name));
  if (quoted.length <= 1) return quoted.join("");
  return `${quoted.slice(0, -1).join(", ")} and ${quoted[quoted.length - 1]}`;
}

function kind(value: unknown): string {
  if (value === null || value === undefined) return "null (an empty file?)";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") return "a number";
  if (typeof value === "string") return "a string";
  if (Array.isArray(value)) return "a list";
  return "an object";
}

function oneLine(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ");
}

function fail(where: string, problem: string): never {
  throw new ConfigError(`${where}: ${problem}`);
}
