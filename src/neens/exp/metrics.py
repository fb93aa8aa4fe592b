"""`neens exp metrics --arm base='…' --arm cand='…'`: two commands' numbers, compared.

Each run is one shell command in the current folder, with `NEENS_ARM` (the arm's name) and
`NEENS_PAIR` (1, 2, …) in its environment and nothing on its standard input. It must exit 0 and
print one JSON object of finite numbers: the whole of its standard output, or its last
non-blank line (so a benchmark may log before it). Every run must print the same metrics.

All runs happen first, then one report (`neens.domain.metric_pairs` decides): a command that
fails, prints no JSON object or a value that is not a number stops everything with one line on
stderr and exit 2, and nothing is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError
from neens_eval.strict_json import DuplicateKey, no_duplicate_keys

from neens.domain.metric_pairs import MetricComparison, compare_metric, run_order
from neens.exp.process import run_process
from neens.exp.table import table

MAX_OUTPUT: Final = 1_000_000
"""Bytes of standard output read from one run; a command printing more is stopped."""
EXIT_WORSE: Final = 1


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    command: str


WHOLE_BOUND: Final = 2**62
"""Whole-number metrics are kept exact below this, either way: the difference of two still fits
the 64-bit integers the statistics are computed on."""


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=no_duplicate_keys)


def parse_metrics(stdout: str) -> dict[str, float] | str:
    """The metrics one run printed, or why there are none (a message to complete)."""
    text = stdout.strip()
    if not text:
        return "printed nothing on standard output (expected a JSON object of numbers)"
    try:
        found = _loads(text)
    except json.JSONDecodeError:
        last = text.splitlines()[-1].strip()
        try:
            found = _loads(last)
        except json.JSONDecodeError:
            return f"printed no JSON object (its last line is {last[:120]!r})"
        except DuplicateKey as exc:
            return f"printed metric {exc.key} twice (each metric may appear once)"
    except DuplicateKey as exc:
        return f"printed metric {exc.key} twice (each metric may appear once)"
    if not isinstance(found, dict):
        return f"printed JSON that is not an object: {json.dumps(found)[:120]}"
    if not found:
        return "printed an empty JSON object: no metrics"
    metrics: dict[str, float] = {}
    for key, value in found.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"printed metric {key} as {json.dumps(value)[:60]}, not a number"
        if isinstance(value, int) and abs(value) >= WHOLE_BOUND:
            return (
                f"printed metric {key} as {str(value)[:60]}, too large a whole number "
                "(below 2⁶² either way; write a larger one with an exponent, as 1e29)"
            )
        if not math.isfinite(value):
            return f"printed metric {key} as {value}, not a finite number"
        metrics[key] = value
    return metrics


async def _run_once(arm: Arm, pair: int, timeout_s: float) -> dict[str, float]:
    where = f"arm {arm.name} (`{arm.command}`), pair {pair}"
    env = {**os.environ, "NEENS_ARM": arm.name, "NEENS_PAIR": str(pair)}
    try:
        result = await run_process(
            arm.command,
            stdin=b"",
            env=env,
            cwd=Path.cwd(),
            timeout_s=timeout_s,
            max_output=MAX_OUTPUT,
        )
    except OSError as exc:
        raise ConfigError(f"{where}: the shell could not start: {exc.strerror}") from None
    if result.timed_out:
        raise ConfigError(f"{where}: ran longer than {timeout_s:g} s (--timeout)")
    if result.overflowed:
        raise ConfigError(f"{where}: printed more than {MAX_OUTPUT} bytes on standard output")
    if result.exit_code != 0:
        stderr = result.stderr_line()
        raise ConfigError(
            f"{where}: exited with code {result.exit_code}" + (f": {stderr}" if stderr else "")
        )
    found = parse_metrics(result.stdout.decode("utf-8", "replace"))
    if isinstance(found, str):
        raise ConfigError(f"{where}: {found}")
    return found


def _higher(given: list[str]) -> set[str]:
    return {name.strip() for text in given for name in text.split(",") if name.strip()}


async def run_pairs(
    arms: tuple[Arm, Arm], pairs: int, timeout_s: float
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Every run, in interleaved pairs; each arm's metrics in pair order. Every run must print
    the same metrics as the first."""
    values: tuple[list[dict[str, float]], list[dict[str, float]]] = ([], [])
    first: tuple[str, set[str]] | None = None
    for index, order in enumerate(run_order(pairs)):
        for side in order:
            arm = arms[side]
            found = await _run_once(arm, index + 1, timeout_s)
            if first is None:
                first = (arm.name, set(found))
            elif set(found) != first[1]:
                missing = sorted(first[1] - set(found))
                if missing:
                    raise ConfigError(
                        f"metric {missing[0]}: missing from arm {arm.name}'s output on pair "
                        f"{index + 1} (arm {first[0]} printed it on pair 1)"
                    )
                extra = sorted(set(found) - first[1])[0]
                raise ConfigError(
                    f"metric {extra}: printed by arm {arm.name} on pair {index + 1} but not by "
                    f"arm {first[0]} on pair 1; every run must print the same metrics"
                )
            values[side].append(found)
    return values


def _num(value: float, *, signed: bool = False) -> str:
    text = f"{value:+.6g}" if signed else f"{value:.6g}"
    return text


def render(arms: tuple[Arm, Arm], pairs: int, results: list[MetricComparison]) -> str:
    a, b = arms[0].name, arms[1].name
    rows = []
    for r in results:
        interval = (
            "none"
            if r.interval is None
            else f"[{_num(r.interval.low, signed=True)}, {_num(r.interval.high, signed=True)}]"
        )
        rows.append(
            [
                r.name,
                _num(r.median_a),
                _num(r.median_b),
                _num(r.median_difference, signed=True),
                interval,
                f"{r.sign.positive}/{r.sign.negative}/{r.sign.ties}",
                f"{r.sign.p:.3f}",
                f"{r.verdict} ({'higher' if r.higher_is_better else 'lower'} is better)",
            ]
        )
    lines = [
        f"metrics {a} vs {b}: {pairs} pairs, interleaved ({a} first in odd pairs, {b} first "
        "in even ones)",
        "",
        table(
            ["metric", a, b, f"{b} − {a}", "95% CI", "+/−/=", "sign p", "verdict"],
            rows,
            right={1, 2, 3, 6},
        ),
        "",
        f"{a} and {b}: medians of each arm's runs. {b} − {a}: the median of the paired "
        "differences, with its distribution-free 95% interval; +/−/=: pairs where it went up, "
        "down, or tied. A change counts only when the interval excludes 0 and the sign test "
        "(ties dropped) agrees at p < 0.05.",
    ]
    return "\n".join(lines)


def to_json(
    arms: tuple[Arm, Arm], pairs: int, results: list[MetricComparison], code: int
) -> dict[str, Any]:
    a, b = arms[0].name, arms[1].name
    return {
        "arms": [{"name": arm.name, "command": arm.command} for arm in arms],
        "pairs": pairs,
        "firstInPair": [arms[order[0]].name for order in run_order(pairs)],
        "metrics": [
            {
                "name": r.name,
                "higherIsBetter": r.higher_is_better,
                "values": {a: list(r.a), b: list(r.b)},
                "medians": {a: r.median_a, b: r.median_b},
                "medianDifference": r.median_difference,
                "interval": None
                if r.interval is None
                else {
                    "low": r.interval.low,
                    "high": r.interval.high,
                    "confidence": 0.95,
                    "method": "order statistics inverting the sign test (scipy quantile_test)",
                },
                "signTest": {
                    "positive": r.sign.positive,
                    "negative": r.sign.negative,
                    "ties": r.sign.ties,
                    "p": r.sign.p,
                    "method": "exact binomial, ties dropped",
                },
                "verdict": r.verdict,
            }
            for r in results
        ],
        "worse": [r.name for r in results if r.verdict == "worse"],
        "exitCode": code,
    }


async def metrics_command(args: argparse.Namespace) -> int:
    if len(args.arm) != 2:
        raise ConfigError(
            f"--arm: give exactly two arms, the baseline first (got {len(args.arm)}): "
            "--arm base='node bench.mjs a' --arm cand='node bench.mjs b'"
        )
    arms = (Arm(*args.arm[0]), Arm(*args.arm[1]))
    if arms[0].name == arms[1].name:
        raise ConfigError(f"--arm: both arms are named {arms[0].name}; name them apart")
    higher = _higher(args.higher)
    values_a, values_b = await run_pairs(arms, args.pairs, args.timeout)
    names = list(values_a[0])
    unknown = sorted(higher - set(names))
    if unknown:
        raise ConfigError(
            f"--higher {unknown[0]}: no run printed a metric of that name "
            f"(the metrics are {', '.join(names)})"
        )
    results = [
        compare_metric(
            name,
            [run[name] for run in values_a],
            [run[name] for run in values_b],
            higher_is_better=name in higher,
        )
        for name in names
    ]
    worse = [r.name for r in results if r.verdict == "worse"]
    code = EXIT_WORSE if args.fail_on_worse and worse else 0
    if args.json:
        print(json.dumps(to_json(arms, args.pairs, results, code), ensure_ascii=False))
        return code
    print(render(arms, args.pairs, results))
    if args.fail_on_worse and worse:
        print(f"worse: {', '.join(worse)} (--fail-on-worse)")
    return code
