/**
 * How `neens-eval sweep-decide` shows a sweep's comparison: a port of the Python SDK's
 * `decision_render.decision_report`, line for line.
 *
 * The comparison is the server's: its verdict sentence, its leaderboard order and every number
 * are shown as they come. Ranked arms are listed in the server's `leaderboard` order, then the
 * arms it did not rank in its `arms` order. No data is never 0%; unpriced is never $0; a void
 * sweep shows each arm's own numbers only; the exact McNemar test is a second line, never the
 * ranking.
 */

import { fixed, groupedFixed } from "./format.js";
import type { Json } from "./gateRules.js";

const BAR_SOURCES: Record<string, string> = {
  gate: "from the sweep's gate",
  query: "from --bar",
  default: "Neens' default: no --bar, and the sweep's gate pins no min_pass_rate",
};
const EXCLUSIONS: Record<string, string> = {
  not_terminal: "not finished: an arm is judged only once all its runs have finished",
  failed: "it {status}",
  not_pass_k: "not green on all {runs} of its runs (pass^k)",
};

/** The comparison for a person: the verdict, the bar, the leaderboard, the per-agent verdicts,
 * and where to read the JSON. */
export function decisionReport(comparison: Json, url: string): string {
  const comparable = comparison["comparable"] === true;
  const bar = isJson(comparison["bar"]) ? comparison["bar"] : {};
  const barValue = typeof bar["value"] === "number" ? bar["value"] : null;
  const arms = armsOf(comparison);
  const baseline = arms.find((arm) => arm["armId"] === comparison["baselineArmId"]);
  const source = BAR_SOURCES[String(bar["source"])] ?? `source ${str(bar["source"])}`;
  const lines = [
    `Sweep decision ${str(comparison["sweepId"])}: ${str(comparison["status"])}`,
    `  bar ${barText(barValue)} (${source}); baseline arm ` +
      (baseline ? `${str(baseline["label"])} (${str(baseline["armId"])})` : "-") +
      `; ${str(comparison["itemCount"])} frozen items`,
  ];
  const uncaptured = comparison["uncapturedItems"];
  if (typeof uncaptured === "number" && Number.isInteger(uncaptured) && uncaptured) {
    lines.push(`  ${uncaptured} of them no arm captured: they count for no arm`);
  }
  if (!comparable) {
    lines.push(
      "",
      `VOID: ${oneLine(str(comparison["voidReason"] || "no reason given"))}`,
      "  No arm is ranked, compared or recommended. Each arm's own numbers, for the record:",
    );
  }
  lines.push("", `Verdict: ${oneLine(str(verdictOf(comparison)["sentence"]))}`, "");
  lines.push(...block(comparison, barValue, comparable, "  "));
  const agents = (Array.isArray(comparison["agents"]) ? comparison["agents"] : []).filter(isJson);
  if (agents.length) lines.push("", "Per agent (items grouped by the agent name on the captured traces):");
  for (const agent of agents) {
    lines.push("", `  ${agentHeading(agent)}`);
    lines.push(`    Verdict: ${oneLine(str(verdictOf(agent)["sentence"]))}`);
    lines.push(...block(agent, barValue, comparable, "    "));
  }
  lines.push("", `  details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" "${url}"`);
  return `${lines.join("\n")}\n`;
}

function block(group: Json, bar: number | null, comparable: boolean, indent: string): string[] {
  const ordered = comparable ? inServerOrder(group) : armsOf(group);
  const header = comparable
    ? ["rank", "arm", "rate", "n", "95% interval", "pass^k", "flaky", "clears bar", "cost per case", "vs baseline"]
    : ["arm", "status", "rate", "n", "95% interval", "pass^k", "flaky", "cost per case"];
  const title = comparable ? "Leaderboard (the server's ranking, best first; arms it did not rank last):" : "Arms (not ranked):";
  const table = [header];
  const notes: string[] = [];
  for (const arm of ordered) {
    const label = str(arm["label"]) + (arm["isBaseline"] ? " (baseline)" : "");
    const own = [rate(arm["rate"], bar), str(arm["n"]), interval(arm, bar), passHatK(arm), str(arm["flakyItems"])];
    if (comparable) {
      const rank = arm["rank"];
      table.push([typeof rank === "number" && Number.isInteger(rank) ? String(rank) : "-", label, ...own, clears(arm), cost(arm), versus(arm)]);
      notes.push(...armNotes(arm));
    } else {
      table.push([label, str(arm["status"]), ...own, cost(arm)]);
    }
  }
  const widths = header.map((_, i) => Math.max(...table.map((row) => (row[i] as string).length)));
  const lines = [`${indent}${title}`];
  for (const row of table) lines.push(`${indent}  ${row.map((cell, i) => cell.padEnd(widths[i] as number)).join("  ")}`.trimEnd());
  lines.push(
    `${indent}  rate: items that passed every scored repeat (strict); pass^k: unbiased ` +
      "C(c,k)/C(n,k) over the items with k scored repeats (of how many)",
  );
  lines.push(...notes.map((note) => `${indent}  - ${note}`));
  return lines;
}

function inServerOrder(group: Json): Json[] {
  const arms = armsOf(group);
  const byId = new Map(arms.map((arm) => [arm["armId"], arm]));
  const leaderboard = (Array.isArray(group["leaderboard"]) ? group["leaderboard"] : []).filter((id) => byId.has(id));
  const ranked = leaderboard.map((id) => byId.get(id) as Json);
  return [...ranked, ...arms.filter((arm) => !leaderboard.includes(arm["armId"]))];
}

function armNotes(arm: Json): string[] {
  const label = str(arm["label"]);
  const notes: string[] = [];
  const excluded = arm["excluded"];
  if (excluded !== null && excluded !== undefined) {
    const why = (EXCLUSIONS[str(excluded)] ?? str(excluded)).replace("{status}", str(arm["status"])).replace("{runs}", str(arm["runs"]));
    notes.push(`${label}: not ranked (${str(excluded)}): ${why}`);
  }
  if (arm["notDistinguishable"]) notes.push(`${label}: ${str(arm["notDistinguishable"])}`);
  const mcnemar = arm["mcnemar"];
  if (isJson(mcnemar) && mcnemar["sentence"]) notes.push(`${label}, second (paired) test: ${oneLine(str(mcnemar["sentence"]))}`);
  return notes;
}

function agentHeading(agent: Json): string {
  const items = agent["items"];
  let heading = `${str(agent["label"])}, ${str(items)} item${items === 1 ? "" : "s"}`;
  if (agent["agentName"] === null || agent["agentName"] === undefined) {
    const parts: string[] = [];
    if (agent["unnamedItems"]) parts.push(`${str(agent["unnamedItems"])} whose answers named no agent`);
    if (agent["conflictingItems"]) parts.push(`${str(agent["conflictingItems"])} whose answers named different agents`);
    if (parts.length) heading += ` (${parts.join(", ")})`;
  }
  return heading;
}

/** A rate in percent, or "no data" (never 0%) when the server has none. */
function rate(value: unknown, bar: number | null): string {
  return typeof value === "number" ? pct(value, bar) : "no data";
}

function interval(arm: Json, bar: number | null): string {
  const low = arm["wilsonLow"];
  const high = arm["wilsonHigh"];
  if (typeof low !== "number" || typeof high !== "number") return "-";
  return `${pct(low, bar)}–${pct(high, bar)}`;
}

/** The unbiased pass^k with its denominator; "no data" when no item has k scored repeats. */
function passHatK(arm: Json): string {
  if (!("passHatK" in arm)) return "-";
  const value = arm["passHatK"];
  return typeof value === "number" ? `${pct(value, null)} (${str(arm["passHatKItems"])})` : "no data";
}

function clears(arm: Json): string {
  if (arm["rate"] === null || arm["rate"] === undefined) return "no data";
  const known: Record<string, string> = { lower_bound: "yes (lower bound)", point: "point only", no: "no" };
  return known[str(arm["clearsBar"])] ?? str(arm["clearsBar"]);
}

/** The cost per case; "unpriced" when unknown (never $0), with the priced share when partial. */
function cost(arm: Json): string {
  const value = arm["costPerCaseUsd"];
  const cases = arm["cases"];
  const priced = arm["pricedCases"];
  if (cases === 0) return "no cases";
  if (typeof value !== "number") return "unpriced";
  if (typeof priced === "number" && typeof cases === "number" && priced < cases) return `${usd(value)} (${priced} of ${cases} priced)`;
  return usd(value);
}

/** Cost delta, regressions and new passes against the baseline arm, as the server has them. */
function versus(arm: Json): string {
  if (arm["isBaseline"]) return "baseline";
  const pctDelta = arm["costDeltaPct"];
  const usdDelta = arm["costDeltaUsd"];
  let costText: string;
  if (typeof pctDelta === "number") costText = `cost ${signed(pctDelta, "%")}`;
  else if (typeof usdDelta === "number") costText = `cost ${usdDelta >= 0 ? "+" : "-"}${usd(Math.abs(usdDelta))}`;
  else costText = "cost unknown";
  const parts = [costText];
  const regressions = arm["regressions"];
  const fresh = arm["newPasses"];
  if (typeof regressions === "number" && Number.isInteger(regressions)) parts.push(`${regressions} regression${regressions === 1 ? "" : "s"}`);
  if (typeof fresh === "number" && Number.isInteger(fresh)) parts.push(`${fresh} new pass${fresh === 1 ? "" : "es"}`);
  return parts.join(", ");
}

/** Cents from a dollar up; two significant digits below ($0.00027). */
export function usd(value: number): string {
  if (value === 0 || Math.abs(value) >= 1) {
    const text = groupedFixed(Math.abs(value), 2);
    return `$${value < 0 ? "-" : ""}${text}`; // Python's f"${value:,.2f}": "$-1.00"
  }
  const decimals = Math.max(2, 1 - Math.floor(Math.log10(Math.abs(value))));
  return `$${value < 0 ? "-" : ""}${fixed(Math.abs(value), decimals)}`;
}

function signed(value: number, unit: string): string {
  const text = trimZeros(fixed(Math.abs(value), 1));
  if (text === "0") return `±0${unit}`;
  return `${value < 0 ? "-" : "+"}${text}${unit}`;
}

function barText(value: number | null): string {
  return value === null ? "unknown" : `${trim(value * 100, 2)}%`;
}

/** A share in percent with one decimal at most, more where fewer would misread against the
 * bar, as 0% when it is not zero, or as 100% when it is not one. */
export function pct(value: number, bar: number | null = null): string {
  for (let digits = 1; digits < 7; digits++) {
    const shown = trim(value * 100, digits);
    if (bar !== null && value !== bar && shown === trim(bar * 100, digits)) continue;
    if ((value !== 0 && shown === "0") || (value !== 1 && shown === "100")) continue;
    return `${shown}%`;
  }
  return `${value * 100}%`;
}

function trim(value: number, digits: number): string {
  const text = trimZeros(fixed(value, digits));
  return text === "-0" ? "0" : text;
}

function trimZeros(text: string): string {
  return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
}

function armsOf(group: Json): Json[] {
  return (Array.isArray(group["arms"]) ? group["arms"] : []).filter(isJson);
}

function verdictOf(group: Json): Json {
  return isJson(group["verdict"]) ? group["verdict"] : {};
}

/** Python's `str()` of a JSON value (None, True, False), for lines shared with the Python CLI. */
function str(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  return String(value);
}

function oneLine(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ");
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
