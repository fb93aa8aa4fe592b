"""The outcome of `neens eval run` / `neens eval push`: the verdict, the exit code, and how it is
shown (a summary for a person, or one JSON object with `--json`).

The verdict, in order:
1. `no_verdict` (exit 3) when the server went away while waiting, or `--timeout` ran out with
   every item's command having succeeded (the traces may still come: nothing is known yet).
2. `failed` (exit 1) when items could not be run (their command failed or timed out, and they
   are still pending on the server, so the run can never finish), when the server gate failed,
   or when a `block` rule failed.
3. `passed` (exit 0) otherwise.
`--no-gate` reports without blocking: exits 1 and 3 become 0 (the summary still says which
verdict, or that there was none); it never hides a usage error (2).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TextIO

from neens_eval.errors import EXIT_UNREACHABLE
from neens_eval.gate_rules import RuleResult, format_value

EXIT_PASSED: Final = 0
EXIT_GATE_FAILED: Final = 1

Verdict = Literal["passed", "failed", "no_verdict"]
Outcome = Literal["finished", "stalled", "timeout", "unreachable"]


@dataclass(frozen=True, slots=True)
class NotRun:
    """An item whose command failed locally and that the server never captured."""

    item_id: str
    input: str
    reason: str
    recorded: bool = False
    """Recorded on the server as an error, so the run's verdict counts it."""


@dataclass
class EvalResult:
    run_id: str
    url: str
    mode: str
    version_label: str
    run: Mapping[str, Any]
    outcome: Outcome
    enforce: bool
    """False with --no-gate: the verdict is reported but does not fail the command."""
    gate: Mapping[str, Any] | None = None
    items: Sequence[Mapping[str, Any]] = ()
    comparison: Mapping[str, Any] | None = None
    rules: Sequence[RuleResult] = ()
    not_run: Sequence[NotRun] = ()
    waited_s: float = 0.0
    timeout_s: float = 0.0
    policy_source: str | None = None
    error: str | None = None
    """Why no verdict could be reached (the server went away)."""
    warnings: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    """The agent command (runner mode), to show how to run the missing items again."""
    last_seen: Mapping[str, Any] | None = None
    """The run as last read from the server (`at`, `status`, `itemCount`, `counts`): after the
    server went away, the newest that is known, and labelled with when it was read."""

    @property
    def status(self) -> str:
        return str(self.run.get("status", "unknown"))

    @property
    def verdict(self) -> Verdict:
        if self.outcome == "unreachable":
            return "no_verdict"
        if self.not_run:
            return "failed"
        if self.outcome != "finished":
            return "no_verdict"
        if self.gate is None or not self.gate.get("passed") or self.blocking_rules:
            return "failed"
        return "passed"

    @property
    def blocking_rules(self) -> list[RuleResult]:
        return [rule for rule in self.rules if rule.blocking]

    @property
    def warning_rules(self) -> list[RuleResult]:
        """Rules that failed or are missing but only warn: reported, never blocking."""
        return [
            rule for rule in self.rules if rule.status in ("fail", "missing") and not rule.blocking
        ]

    @property
    def exit_code(self) -> int:
        verdict = self.verdict
        if verdict == "no_verdict":
            return EXIT_UNREACHABLE if self.enforce else EXIT_PASSED
        if verdict == "failed" and self.enforce:
            return EXIT_GATE_FAILED
        return EXIT_PASSED

    @property
    def reasons(self) -> list[str]:
        """Why the verdict is not `passed`, one sentence each."""
        reasons: list[str] = []
        if self.outcome == "unreachable":
            reasons.append(self.error or "the server could not be reached")
            return reasons
        if self.not_run:
            count = len(self.not_run)
            consequence = (
                "they count as errors in the run"
                if all(n.recorded for n in self.not_run)
                else "so the run cannot finish"
            )
            reasons.append(
                f"{count} item{'s were' if count > 1 else ' was'} not run: the agent command "
                f"failed, {consequence}"
            )
        if self.outcome == "stalled" and not self.not_run:
            # The failed items' traces arrived between the last two reads: rare, but honest.
            reasons.append(
                f"the run is still {self.status}: the items whose command failed were captured "
                f"after all; run the command again to wait for the verdict"
            )
        if self.outcome == "timeout":
            pending = _count(self.run, "pending")
            reasons.append(
                f"no verdict after {self.timeout_s:g} s (--timeout): the run is still "
                f"{self.status} with {pending} item{'' if pending == 1 else 's'} pending"
            )
        run_error = self.run.get("error")
        if self.status == "failed" and isinstance(run_error, str) and run_error.strip():
            reasons.append(f"the run failed: {_one_line(run_error)}")
        if self.gate is not None:
            reasons.extend(f"server gate: {reason}" for reason in self.gate.get("reasons") or [])
        reasons.extend(f"rule {rule.check.name}: {rule.reason}" for rule in self.blocking_rules)
        return reasons

    def counts(self) -> dict[str, int | None]:
        """Items by outcome, from `/items` when it was read, else from the run's counts (which
        do not split scored items into passed and failed)."""
        if self.items:
            statuses = [item.get("status") for item in self.items]
            verdicts = [item.get("passed") for item in self.items if item.get("status") == "scored"]
            return {
                "total": len(self.items),
                "passed": verdicts.count(True),
                "failed": verdicts.count(False),
                "scored": statuses.count("scored"),
                "error": statuses.count("error"),
                "pending": statuses.count("pending"),
                "captured": statuses.count("captured"),
            }
        total = self.run.get("itemCount")
        return {
            "total": total if isinstance(total, int) else None,
            "passed": None,
            "failed": None,
            **{key: _count(self.run, key) for key in ("scored", "error", "pending", "captured")},
        }

    def regressions(self) -> list[dict[str, Any]]:
        ids = (self.comparison or {}).get("regressions") or []
        by_id = {str(item.get("item_id")): item for item in self.items}
        out = []
        for item_id in ids:
            item = by_id.get(str(item_id), {})
            out.append({"itemId": item_id, "input": item.get("input"), "score": item.get("score")})
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "url": self.url,
            "mode": self.mode,
            "versionLabel": self.version_label,
            "status": self.status,
            "verdict": self.verdict,
            "exitCode": self.exit_code,
            "enforced": self.enforce,
            "reasons": self.reasons,
            "counts": self.counts(),
            "passRate": (self.gate or {}).get("passRate"),
            "gate": self.gate,
            "rules": [rule.to_json() for rule in self.rules],
            "regressions": self.regressions(),
            "notRun": [
                {"itemId": n.item_id, "input": n.input, "reason": n.reason, "recorded": n.recorded}
                for n in self.not_run
            ],
            "warnings": self.warnings,
            "policy": self.policy_source,
            "error": self.error,
            "lastSeen": dict(self.last_seen) if self.last_seen is not None else None,
        }


def write_json(result: EvalResult, stream: TextIO) -> None:
    stream.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
    stream.flush()


def write_summary(result: EvalResult, stream: TextIO) -> None:
    """The summary a person reads: the run, the server gate, regressions, rules, the verdict."""
    lines: list[str] = []
    counts = result.counts()
    lines.append(
        f"Pre-prod run {result.run_id} ({result.mode} mode), version {result.version_label}: "
        f"{result.status}"
    )
    if result.items:
        parts = [f"{counts['total']} items", f"{counts['passed']} passed"]
        parts.append(f"{counts['failed']} failed")
        for key in ("error", "pending", "captured"):
            if counts[key]:
                parts.append(f"{counts[key]} {'errored' if key == 'error' else key}")
        lines.append("  " + ", ".join(parts))
    lines += _run_error(result)
    lines.append(f"  {api_hint(result.url)}")

    if result.gate is not None:
        rate = result.gate.get("passRate")
        shown_rate = f", pass rate {rate:.0%}" if isinstance(rate, int | float) else ""
        verdict = "passed" if result.gate.get("passed") else "failed"
        lines += [
            "",
            f"Server gate: {verdict}{shown_rate}, policy {json.dumps(result.gate.get('gate'))}",
        ]
        lines += [f"  - {reason}" for reason in result.gate.get("reasons") or []]
        for row in result.gate.get("costRules") or []:
            lines.append(
                f"  - cost rule {row.get('rule')}: {str(row.get('status')).upper()} (observed "
                f"{_number(row.get('observed'))}, threshold {_number(row.get('threshold'))})"
            )

    regressions = result.regressions()
    if regressions:
        lines += [
            "",
            f"Regressions ({len(regressions)}): the baseline passed, the candidate failed",
        ]
        for row in regressions:
            score = row["score"]
            shown = f" score {score:.2f}" if isinstance(score, int | float) else ""
            lines.append(f"  - {row['itemId']} {_quote(row['input'])}{shown}")

    if result.rules:
        source = f" ({result.policy_source})" if result.policy_source else ""
        lines += ["", f"Rules{source}:"]
        table = [
            (
                rule.status.upper(),
                rule.severity,
                rule.check.name,
                "-" if rule.observed is None else format_value(rule.check, rule.observed),
                format_value(rule.check, rule.check.threshold),
                rule.reason,
            )
            for rule in result.rules
        ]
        header = ("status", "severity", "rule", "observed", "threshold", "")
        widths = [max(len(row[i]) for row in [header, *table]) for i in range(5)]
        for row in [header, *table]:
            cells = [cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)]
            lines.append(("  " + "  ".join(cells) + "  " + row[5]).rstrip())

    if result.not_run:
        where = (
            "recorded as errors on the server"
            if all(n.recorded for n in result.not_run)
            else "still pending on the server"
        )
        lines += ["", f"Not run ({len(result.not_run)}): {where}"]
        lines += [f"  - {n.item_id} {_quote(n.input)}: {n.reason}" for n in result.not_run]

    if result.warnings:
        lines += ["", "Warnings:"]
        lines += [f"  - {warning}" for warning in result.warnings]

    lines.append("")
    verdict = result.verdict
    warned = result.warning_rules
    if verdict == "passed" and warned:
        count = len(warned)
        lines.append(
            f"Gate passed, with {count} warning{'s' if count > 1 else ''} (a rule of severity "
            f"warn that fails or is missing is reported and does not block):"
        )
        lines += [f"  - rule {rule.check.name}: {rule.reason}" for rule in warned]
    elif verdict == "passed":
        lines.append("Gate passed.")
    elif verdict == "failed":
        lines.append("Gate FAILED:")
        lines += [f"  - {reason}" for reason in result.reasons]
        if not result.enforce:
            lines.append("--no-gate: reported only, exiting 0.")
    else:
        lines.append("No verdict:")
        lines += [f"  - {reason}" for reason in result.reasons]
        if result.outcome == "unreachable" and result.last_seen is not None:
            lines.append(f"  - {describe_last_seen(result.last_seen)}")
        if not result.enforce:
            lines.append("--no-gate: reported only, exiting 0.")
    lines += _next_steps(result)
    stream.write("\n".join(lines) + "\n")
    stream.flush()


ITEM_ERRORS_SHOWN = 5
"""How many item errors the summary of a failed run shows; the rest are counted."""


def _run_error(result: EvalResult) -> list[str]:
    """Why the run failed, as the server says, and the first item errors: a run whose every
    item failed (a dead agent endpoint) would otherwise show only its status."""
    if result.status != "failed":
        return []
    lines = []
    error = result.run.get("error")
    if isinstance(error, str) and error.strip():
        lines.append(f"  run error: {_one_line(error)}")
    failed = [item for item in result.items if item.get("status") == "error"]
    if failed:
        lines.append(f"  item errors ({len(failed)}):")
        for item in failed[:ITEM_ERRORS_SHOWN]:
            reason = item.get("error")
            shown = _one_line(reason) if isinstance(reason, str) and reason.strip() else "-"
            lines.append(f"    - {item.get('item_id')} {_quote(item.get('input'))}: {shown}")
        if len(failed) > ITEM_ERRORS_SHOWN:
            more = len(failed) - ITEM_ERRORS_SHOWN
            lines.append(f"    … and {more} more (see the run's items)")
    return lines


def _one_line(text: str, limit: int = 300) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _next_steps(result: EvalResult) -> list[str]:
    again = (
        f"neens eval run --run-id {result.run_id} -- "
        f"{shlex.join(result.command) if result.command else '<your agent command>'}"
    )
    if result.not_run and all(n.recorded for n in result.not_run):
        return ["Fix the agent, then start a new run: the failed items are errors in this one."]
    if result.not_run:
        return [f"Fix the agent, then run only the missing items: {again}"]
    if result.outcome not in ("timeout", "unreachable"):
        return []
    if result.mode != "runner" or result.outcome == "unreachable":
        return [f"The run goes on at the server; follow it again with: {follow_command(result)}"]
    captured = _count(result.run, "captured") + _count(result.run, "scored")
    if captured == 0:
        return [
            "No trace reached the run: check that the agent exports OpenTelemetry traces to "
            "Neens (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and flushes them before it exits.",
            f"Then wait again with: {again}",
        ]
    return [f"The run goes on at the server; wait again, with a longer --timeout: {again}"]


def follow_command(result: EvalResult) -> str:
    """The command that picks the run up again and gates on it."""
    if result.mode == "runner" and result.command:
        return f"neens eval run --run-id {result.run_id} -- {shlex.join(result.command)}"
    return f"neens eval push --run-id {result.run_id}"


def api_hint(url: str) -> str:
    """The run's address, said for what it is: JSON from the API, which needs the key."""
    return f'details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" {url}'


def describe_last_seen(seen: Mapping[str, Any]) -> str:
    """`last seen at …: running, 1/3 captured, 0/3 scored` (counts as of that moment)."""
    counts = seen.get("counts") if isinstance(seen.get("counts"), dict) else {}
    assert isinstance(counts, dict)
    return (
        f"last seen at {seen.get('at')}: {seen.get('status')}, {describe_counts(seen)} "
        f"({counts.get('pending', '?')} pending)"
    )


def describe_counts(run: Mapping[str, Any]) -> str:
    """`2/3 captured, 1/3 scored, 1 error`: the server's counts, errors apart. A scored item was
    captured first; an item in error may never have been (its agent call failed), so it counts
    as neither."""
    total = run.get("itemCount", "?")
    scored, errors = _count(run, "scored"), _count(run, "error")
    text = f"{_count(run, 'captured') + scored}/{total} captured, {scored}/{total} scored"
    return text + (f", {errors} error{'s' if errors != 1 else ''}" if errors else "")


def _count(run: Mapping[str, Any], key: str) -> int:
    counts = run.get("counts")
    value = counts.get(key) if isinstance(counts, dict) else None
    return value if isinstance(value, int) else 0


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value:.6g}"


def _quote(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    one_line = " ".join(text.split())
    return json.dumps(
        one_line if len(one_line) <= 60 else one_line[:57] + "...", ensure_ascii=False
    )
