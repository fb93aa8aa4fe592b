/**
 * `--summary-md FILE`: the result of `neens-eval run|push` as markdown a CI step can post on the
 * pull request — the verdict, why, the pass rate and regressions against the baseline, the cost
 * against the baseline (or "unpriced", never $0), and the top regressed items linked to the run's
 * page. The same file, byte for byte, as the Python SDK's `summary_md` (sdk/conformance holds
 * both to it).
 */

import { writeFileSync } from "node:fs";

import { percentEncode } from "./correlation.js";
import { ConfigError } from "./errors.js";
import { fixed, groupedFixed, pyDumps } from "./format.js";
import { type Json, checkName, finiteNumber, pyStr } from "./gateRules.js";
import { type EvalResult, counts, exitCode, reasons, regressions, verdict } from "./summary.js";

const TOP_REGRESSIONS = 5;
const INPUT_CHARS = 80;

/** Write the markdown summary to `path` (a `ConfigError` naming it when it cannot be). */
export function writeSummaryMd(result: EvalResult, path: string): void {
  try {
    writeFileSync(path, summaryMarkdown(result), "utf8");
  } catch (error) {
    throw new ConfigError(`--summary-md ${path}: cannot be written (${describe(error)})`);
  }
}

export function summaryMarkdown(result: EvalResult): string {
  const page = pageUrl(result);
  const v = verdict(result);
  let title = { passed: "PASSED", failed: "FAILED", no_verdict: "no verdict" }[v];
  if (!result.enforce && v !== "passed") title += " (reported only: --no-gate)";
  const status = String(result.run["status"] ?? "unknown");
  const lines = [
    `## Neens pre-prod gate: ${title}`,
    "",
    `Run [\`${result.runId}\`](${page}) (${result.mode} mode), version ` +
      `\`${result.versionLabel.replaceAll("`", "'")}\`: **${status}**, exit code ${exitCode(result)}.`,
    "",
    "| | |",
    "| --- | --- |",
    `| Pass rate | ${passRate(result)} |`,
    `| Items | ${items(result)} |`,
    `| Regressions vs the baseline | ${regressionLine(result)} |`,
    `| Cost per session | ${cost(result.comparison)} |`,
  ];
  const why = reasons(result);
  if (v !== "passed" && why.length) {
    lines.push("", `### ${v === "no_verdict" ? "Why there is no verdict" : "Why it failed"}`, "");
    lines.push(...why.map((reason) => `- ${text(reason)}`));
  }
  const warned = result.rules.filter((rule) => (rule.status === "fail" || rule.status === "missing") && rule.severity !== "block");
  if (warned.length) {
    lines.push("", "### Warnings (rules of severity warn: reported, not blocking)", "");
    lines.push(...warned.map((rule) => `- rule \`${checkName(rule.check)}\`: ${text(rule.reason)}`));
  }
  const regressed = regressions(result);
  if (regressed.length) {
    const shown = regressed.slice(0, TOP_REGRESSIONS);
    const count = regressed.length > shown.length ? `top ${shown.length} of ${regressed.length}` : String(regressed.length);
    lines.push("", `### Regressed items (${count}): the baseline passed, the candidate failed`, "", "| Item | Input | Score |", "| --- | --- | --- |");
    for (const row of shown) {
      const itemId = pyStr(row["itemId"]);
      const score = finiteNumber(row["score"]);
      lines.push(`| [\`${itemId}\`](${page}#item-${percentEncode(itemId)}) | ${cell(row["input"])} | ${score === null ? "-" : fixed(score, 2)} |`);
    }
  }
  if (result.notRun.length) {
    lines.push("", `### Items whose agent command failed (${result.notRun.length})`, "");
    lines.push(...result.notRun.map((n) => `- \`${n.itemId}\`: ${text(n.reason)}`));
  }
  lines.push("", `<sub>[The run](${page}) · [its API answer, JSON](${result.url})</sub>`);
  return `${lines.join("\n")}\n`;
}

/** The run's page (`/ui/preprod-evals/{id}`) beside its API address. */
export function pageUrl(result: EvalResult): string {
  const at = result.url.lastIndexOf("/preprod-evals/");
  const base = at < 0 ? "" : result.url.slice(0, at);
  return `${base}/ui/preprod-evals/${percentEncode(result.runId)}`;
}

function passRate(result: EvalResult): string {
  const gate = result.gate;
  if (gate === null) return "not read (no verdict)";
  const rate = finiteNumber(gate["passRate"]);
  const shown = rate === null ? "unknown" : `${trimZeros(fixed(rate * 100, 1))}%`;
  return `${shown} (server gate ${gate["passed"] ? "passed" : "failed"}, policy \`${pyDumps(gate["gate"] ?? null)}\`)`;
}

function items(result: EvalResult): string {
  const tally = counts(result);
  const parts = [`${pyStr(tally["total"])} items`];
  if (tally["passed"] !== null) parts.push(`${tally["passed"]} passed, ${pyStr(tally["failed"])} failed`);
  for (const key of ["error", "pending", "captured"]) {
    if (tally[key]) parts.push(`${tally[key]} ${key === "error" ? "errored" : key}`);
  }
  return parts.join(", ");
}

function regressionLine(result: EvalResult): string {
  const comparison = result.comparison;
  if (comparison === null) return "not read (no verdict)";
  if (!isJson(comparison["baseline"])) return "no baseline to compare against";
  const count = regressions(result).length;
  const fresh = Array.isArray(comparison["newPasses"]) ? comparison["newPasses"].length : 0;
  return `${count} regression${count === 1 ? "" : "s"}, ${fresh} new pass${fresh === 1 ? "" : "es"}`;
}

function cost(comparison: Json | null): string {
  if (comparison === null) return "not read (no verdict)";
  const candidate = isJson(comparison["candidate"]) ? comparison["candidate"] : {};
  const average = finiteNumber(candidate["avgCostUsd"]);
  if (average === null) {
    return `unpriced (no priced session: ${pyStr(candidate["pricedSessions"] ?? 0)} of ${pyStr(candidate["sessions"] ?? 0)} priced)`;
  }
  const shown = usd(average);
  const baseline = comparison["baseline"];
  if (!isJson(baseline)) return `${shown} (no baseline to compare against)`;
  const base = finiteNumber(baseline["avgCostUsd"]);
  if (base === null) return `${shown}; the baseline is unpriced`;
  const delta = average - base;
  let change = `${delta >= 0 ? "+" : "-"}${usd(Math.abs(delta))}`;
  if (base !== 0) {
    const pct = (delta / base) * 100;
    change += ` (${pct >= 0 && !Object.is(pct, -0) ? "+" : ""}${fixed(pct, 1)}%)`;
  }
  return `${shown}, ${change} vs the baseline's ${usd(base)}`;
}

/** Dollars with cents; four decimals under a dollar, "<$0.0001" below that (never $0). */
function usd(value: number): string {
  if (value === 0 || Math.abs(value) >= 1) return `$${groupedFixed(value, 2)}`;
  if (Math.abs(value) < 0.0001) return "<$0.0001";
  return `$${fixed(value, 4)}`;
}

function trimZeros(textValue: string): string {
  return textValue.includes(".") ? textValue.replace(/0+$/, "").replace(/\.$/, "") : textValue;
}

/** One line of prose: no line break can end a list item early. */
function text(value: string): string {
  return value.split(/\s+/).filter(Boolean).join(" ");
}

/** A table cell: one line, at most 80 characters, pipes escaped. */
function cell(value: unknown): string {
  if (typeof value !== "string") return "";
  let line = text(value);
  if ([...line].length > INPUT_CHARS) line = `${[...line].slice(0, INPUT_CHARS - 3).join("")}...`;
  return line.replaceAll("\\", "\\\\").replaceAll("|", "\\|");
}

function describe(error: unknown): string {
  const code = (error as { code?: string }).code;
  const known: Record<string, string> = { ENOENT: "No such file or directory", EACCES: "Permission denied", EISDIR: "Is a directory" };
  return (code && known[code]) || (error instanceof Error ? error.message : String(error));
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
