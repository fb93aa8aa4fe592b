"""`--summary-md FILE`: the result of `neens eval run|push` as markdown a CI step can post on the
pull request — the verdict, why, the pass rate and regressions against the baseline, the cost
against the baseline (or "unpriced", never $0), and the top regressed items linked to the run's
page. The TypeScript SDK writes the same file byte for byte (sdk/conformance holds both to it).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError
from neens_eval.gate_rules import finite_number
from neens_eval.summary import EvalResult

TOP_REGRESSIONS: Final = 5
INPUT_CHARS: Final = 80


def write_summary_md(result: EvalResult, path: Path) -> None:
    """Write the markdown summary to `path` (a `ConfigError` naming it when it cannot be)."""
    try:
        path.write_text(summary_markdown(result), encoding="utf-8")
    except OSError as exc:
        problem = exc.strerror or str(exc)
        raise ConfigError(f"--summary-md {path}: cannot be written ({problem})") from None


def summary_markdown(result: EvalResult) -> str:
    page = page_url(result)
    verdict = result.verdict
    title = {"passed": "PASSED", "failed": "FAILED", "no_verdict": "no verdict"}[verdict]
    if not result.enforce and verdict != "passed":
        title += " (reported only: --no-gate)"
    lines = [
        f"## Neens pre-prod gate: {title}",
        "",
        f"Run [`{result.run_id}`]({page}) ({result.mode} mode), version "
        f"`{_code(result.version_label)}`: **{result.status}**, exit code {result.exit_code}.",
        "",
        "| | |",
        "| --- | --- |",
        f"| Pass rate | {_pass_rate(result)} |",
        f"| Items | {_items(result)} |",
        f"| Regressions vs the baseline | {_regressions(result)} |",
        f"| Cost per session | {_cost(result.comparison)} |",
    ]
    reasons = result.reasons
    if verdict != "passed" and reasons:
        heading = "Why there is no verdict" if verdict == "no_verdict" else "Why it failed"
        lines += ["", f"### {heading}", ""]
        lines += [f"- {_text(reason)}" for reason in reasons]
    warned = result.warning_rules
    if warned:
        lines += ["", "### Warnings (rules of severity warn: reported, not blocking)", ""]
        lines += [f"- rule `{rule.check.name}`: {_text(rule.reason)}" for rule in warned]
    regressions = result.regressions()
    if regressions:
        shown = regressions[:TOP_REGRESSIONS]
        count = (
            f"top {len(shown)} of {len(regressions)}"
            if len(regressions) > len(shown)
            else str(len(regressions))
        )
        lines += [
            "",
            f"### Regressed items ({count}): the baseline passed, the candidate failed",
            "",
            "| Item | Input | Score |",
            "| --- | --- | --- |",
        ]
        for row in shown:
            item_id = str(row["itemId"])
            link = f"{page}#item-{urllib.parse.quote(item_id, safe='')}"
            score = finite_number(row.get("score"))
            shown_score = "-" if score is None else f"{score:.2f}"
            lines.append(f"| [`{item_id}`]({link}) | {_cell(row.get('input'))} | {shown_score} |")
    if result.not_run:
        lines += ["", f"### Items whose agent command failed ({len(result.not_run)})", ""]
        lines += [f"- `{n.item_id}`: {_text(n.reason)}" for n in result.not_run]
    lines += ["", f"<sub>[The run]({page}) · [its API answer, JSON]({result.url})</sub>"]
    return "\n".join(lines) + "\n"


def page_url(result: EvalResult) -> str:
    """The run's page (`/ui/preprod-evals/{id}`) beside its API address."""
    base, _, _ = result.url.rpartition("/preprod-evals/")
    return f"{base}/ui/preprod-evals/{urllib.parse.quote(result.run_id, safe='')}"


def _pass_rate(result: EvalResult) -> str:
    gate = result.gate
    if gate is None:
        return "not read (no verdict)"
    rate = finite_number(gate.get("passRate"))
    shown = "unknown" if rate is None else _percent(rate)
    verdict = "passed" if gate.get("passed") else "failed"
    policy = json.dumps(gate.get("gate"))
    return f"{shown} (server gate {verdict}, policy `{policy}`)"


def _items(result: EvalResult) -> str:
    counts = result.counts()
    parts = [f"{counts['total']} items"]
    if counts["passed"] is not None:
        parts.append(f"{counts['passed']} passed, {counts['failed']} failed")
    for key in ("error", "pending", "captured"):
        if counts[key]:
            parts.append(f"{counts[key]} {'errored' if key == 'error' else key}")
    return ", ".join(parts)


def _regressions(result: EvalResult) -> str:
    comparison = result.comparison
    if comparison is None:
        return "not read (no verdict)"
    if not isinstance(comparison.get("baseline"), dict):
        return "no baseline to compare against"
    count = len(result.regressions())
    new = comparison.get("newPasses")
    new_passes = len(new) if isinstance(new, list) else 0
    return (
        f"{count} regression{'' if count == 1 else 's'}, "
        f"{new_passes} new pass{'' if new_passes == 1 else 'es'}"
    )


def _cost(comparison: Mapping[str, Any] | None) -> str:
    if comparison is None:
        return "not read (no verdict)"
    candidate = comparison.get("candidate")
    candidate = candidate if isinstance(candidate, dict) else {}
    average = finite_number(candidate.get("avgCostUsd"))
    if average is None:
        return (
            f"unpriced (no priced session: {candidate.get('pricedSessions', 0)} of "
            f"{candidate.get('sessions', 0)} priced)"
        )
    shown = _usd(average)
    baseline = comparison.get("baseline")
    if not isinstance(baseline, dict):
        return f"{shown} (no baseline to compare against)"
    base = finite_number(baseline.get("avgCostUsd"))
    if base is None:
        return f"{shown}; the baseline is unpriced"
    delta = average - base
    change = f"{'+' if delta >= 0 else '-'}{_usd(abs(delta))}"
    if base != 0:
        change += f" ({delta / base * 100:+.1f}%)"
    return f"{shown}, {change} vs the baseline's {_usd(base)}"


def _usd(value: float) -> str:
    """Dollars with cents; four decimals under a dollar, "<$0.0001" below that (never $0)."""
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    if abs(value) < 0.0001:
        return "<$0.0001"
    return f"${value:.4f}"


def _percent(value: float) -> str:
    text = f"{value * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _code(text: str) -> str:
    return text.replace("`", "'")


def _text(text: str) -> str:
    """One line of prose: no line break can end a list item early."""
    return " ".join(str(text).split())


def _cell(value: Any) -> str:
    """A table cell: one line, at most `INPUT_CHARS` characters, pipes escaped."""
    if not isinstance(value, str):
        return ""
    line = " ".join(value.split())
    if len(line) > INPUT_CHARS:
        line = line[: INPUT_CHARS - 3] + "..."
    return line.replace("\\", "\\\\").replace("|", "\\|")
