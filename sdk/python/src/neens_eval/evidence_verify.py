#!/usr/bin/env python3
"""Check a Neens evidence bundle offline, with nothing but the Python standard library.

    python3 verify.py            # the bundle this file is in
    python3 verify.py DIR        # another bundle

It checks, in order, and names every mismatch it finds:

1. **The files.** Every file `manifest.json` lists has its sha256 and size; no other file is in
   the bundle (except `manifest.json` itself and the optional signature, `manifest.dsse.json`,
   which `neens verify` checks).
2. **Every number of the decision**, recomputed from the per-answer rows in `items.jsonl`:

   - a model sweep (`kind: sweep`): per arm, overall and per agent, the items scored (n), passed
     on every scored repeat, flaky, the strict rate, the 95% Wilson interval, the unbiased pass^k
     C(c,k)/C(n,k), the answers and priced answers, the cost per case and its delta against the
     baseline, regressions and new passes, the exact McNemar table and p-value, the exclusion,
     the bar clearance, the leaderboard, the winner, the "not distinguishable" annotation, the
     recommended arm and its savings, the agent groups and the frontier. A void sweep must show
     no ranking, no winner, no recommendation and no frontier anywhere.
   - an experiment (`kind: experiment`): its counts, pass rate, cost, strict case rate with its
     Wilson interval and pass^k for every k up to its trials; with a comparison, both sides'
     counts, the paired cases, B - A, the McNemar table and exact p-value, P(B > A), the seed
     (derived from the paired outcomes), the exact-McNemar power ceiling, the regressed,
     improved, gained and lost cases, the case kinds, and the bootstrap interval (see below).

Floats are compared with a relative tolerance of 1e-9: the server computes some of them with
statsmodels or NumPy, this file with the closed forms below, and the two differ in the last
bits. Integers, flags and labels are compared exactly.

**The bootstrap interval** of an experiment comparison was drawn by the server with NumPy's
PCG64 generator, whose draws the standard library cannot reproduce. This file re-draws the same
percentile bootstrap (the same resample count, seeded with the same stored seed through
Python's `random`) and accepts the stored ends when they lie within max(0.0125, 1/n + 0.005) of
its own (n paired cases): the spread of two honest 10,000-resample draws is below one lattice
step 1/n of a mean of n cases plus Monte Carlo error. It checks the verdict the interval gives
exactly. What is not re-derived here, and why: the exact minimum detectable effect (a planning
figure that needs a numerical search; the ceiling it rests on is checked), and the A/A flip rate
that floors it (`aa`: it comes from two other experiments, which are not in the bundle).

Exit codes: 0 every check passed; 1 a file or a number does not match (each one named on
standard error); 2 the bundle cannot be read (a file missing or not what it should be).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

FORMAT = "neens-evidence/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.dsse.json"
REL_TOL = 1e-9
ABS_TOL = 1e-12
Z = statistics.NormalDist().inv_cdf(0.975)
"""z for a two-sided 95% interval, 1.959963984540054."""
ALPHA = 0.05
BAYES_BELOW = 100
RESAMPLES = 10_000
"""The bootstrap resamples of `neens exp compare` (its `method` says so)."""
UNATTRIBUTED = "Unattributed"


class Unreadable(Exception):
    """The bundle cannot be read: exit 2."""


class Checks:
    """Every comparison made, and the mismatches among them."""

    def __init__(self) -> None:
        self.count = 0
        self.mismatches: list[str] = []

    def fail(self, what: str) -> None:
        self.mismatches.append(what)

    def equal(self, name: str, recomputed: Any, stored: Any) -> None:
        self.count += 1
        if not _same(recomputed, stored):
            self.fail(f"{name}: recomputed {_show(recomputed)}, the decision says {_show(stored)}")

    def near(self, name: str, recomputed: float, stored: Any, tolerance: float) -> None:
        self.count += 1
        if not isinstance(stored, int | float) or abs(recomputed - stored) > tolerance:
            self.fail(
                f"{name}: the decision says {_show(stored)}, more than {tolerance:.4g} from the "
                f"recomputed {_show(recomputed)}"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, float) else repr(value)


# --- the statistics, in closed form ---------------------------------------------------------------


def wilson(hits: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval (Wilson 1927); None when n = 0. Ends clamped to [0, 1],
    exactly 0 at k = 0 and exactly 1 at k = n."""
    if n == 0:
        return None
    p = hits / n
    z2 = Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if hits == 0 else min(max(centre - half, 0.0), 1.0)
    high = 1.0 if hits == n else min(max(centre + half, 0.0), 1.0)
    return low, high


def binom_cdf_half(k: int, n: int) -> Fraction:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly."""
    return Fraction(sum(math.comb(n, i) for i in range(0, k + 1)), 2**n)


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar: min(1, 2 * Binom.cdf(min(b, c); b + c, 1/2)); 1 when b = c = 0."""
    if b + c == 0:
        return 1.0
    return float(min(Fraction(1), 2 * binom_cdf_half(min(b, c), b + c)))


def prob_b_beats_a(b: int, c: int) -> float:
    """P(theta > 1/2) for theta ~ Beta(1 + c, 1 + b): for integer parameters, the chance that a
    Binomial(b + c + 1, 1/2) is at most c."""
    return float(binom_cdf_half(c, b + c + 1))


def pass_hat_k(passed: int, attempts: int, k: int) -> float | None:
    """The unbiased pass^k of one case, C(c, k) / C(n, k); None when n < k."""
    if attempts < k:
        return None
    return math.comb(passed, k) / math.comb(attempts, k)


def mean(values: list[float]) -> float | None:
    if not values:
        return None
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # the sum is past the largest double; the mean never is
        shift = len(values).bit_length()  # scaling by a power of two loses no digit
        return math.ldexp(math.fsum(math.ldexp(x, -shift) for x in values) / len(values), shift)


def exact_sum(values: list[float]) -> float | None:
    """fsum, or None when the sum is too large to represent (the bundle's `costOverflow`)."""
    try:
        total = math.fsum(values)
    except (OverflowError, ValueError):  # ValueError: both infinities, whose sum is no number
        return None
    return total if math.isfinite(total) or math.isnan(total) else None


def mcnemar_ceiling(n: int, q: float) -> float:
    """The exact McNemar power when every one of the discordant cases favours one side: the
    chance of at least 6 discordant cases of n (2 * 0.5**d <= 0.05 from d = 6 on)."""
    first = next(d for d in range(1, 64) if 2 * 0.5**d <= ALPHA)
    return min(
        max(
            math.fsum(math.comb(n, d) * q**d * (1 - q) ** (n - d) for d in range(first, n + 1)),
            0.0,
        ),
        1.0,
    )


def percentile_bootstrap(values: list[float], seed: int, resamples: int) -> tuple[float, float]:
    """The 95% percentile bootstrap of mean(values), drawn with Python's `random`."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))

    def quantile(q: float) -> float:  # linear interpolation, as numpy.quantile's default
        position = q * (len(means) - 1)
        low = math.floor(position)
        high = min(low + 1, len(means) - 1)
        return means[low] + (means[high] - means[low]) * (position - low)

    return quantile(0.025), quantile(0.975)


# --- reading the bundle ---------------------------------------------------------------------------


class _TwiceGiven(ValueError):
    pass


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object hook refusing a key given twice, which two readers could take two ways
    (Python keeps the last value; other parsers the first)."""
    body = dict(pairs)
    if len(body) != len(pairs):
        names = [key for key, _ in pairs]
        twice = next(key for key in names if names.count(key) > 1)
        raise _TwiceGiven(f"the key {twice!r} is given twice in one object")
    return body


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_one_value_per_key)
    except FileNotFoundError:
        raise Unreadable(f"{path.name} is missing") from None
    except _TwiceGiven as error:
        raise Unreadable(f"{path.name}: {error}") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise Unreadable(f"{path.name} is not JSON: {error}") from None


def _load_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Unreadable(f"{path.name} is missing") from None
    except UnicodeDecodeError as error:
        raise Unreadable(f"{path.name} is not UTF-8: {error}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_one_value_per_key)
        except _TwiceGiven as error:
            raise Unreadable(f"{path.name} line {number}: {error}") from None
        except ValueError as error:
            raise Unreadable(f"{path.name} line {number} is not JSON: {error}") from None
        if not isinstance(row, dict):
            raise Unreadable(f"{path.name} line {number} is not an object")
        rows.append(row)
    return rows


def check_files(root: Path, manifest: dict[str, Any], checks: Checks) -> None:
    listed = manifest.get("files")
    if not isinstance(listed, list):
        raise Unreadable("manifest.json lists no files")
    names = set()
    for entry in listed:
        name = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            raise Unreadable(f"manifest.json lists a bad file entry: {entry!r}")
        names.add(name)
        path = root / name
        checks.count += 1
        if not path.is_file():
            checks.fail(f"{name}: listed in manifest.json, missing from the bundle")
            continue
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.get("sha256"):
            checks.fail(f"{name}: sha256 {digest}, manifest.json says {entry.get('sha256')}")
        elif len(data) != entry.get("bytes"):
            checks.fail(f"{name}: {len(data)} bytes, manifest.json says {entry.get('bytes')}")
    for path in sorted(root.iterdir()):
        if path.name in (MANIFEST, SIGNATURE) or path.name in names:
            continue
        if path.name == "__pycache__":
            continue
        checks.fail(f"{path.name}: in the bundle but not listed in manifest.json")


# --- a model sweep --------------------------------------------------------------------------------


_UNSCORED, _PASS, _PASS_ALL_K, _FAIL, _FLAKY = range(5)


class _ArmItems:
    """One arm's answers added up per item."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.cases: dict[str, int] = {}
        self.scored: dict[str, int] = {}
        self.passed: dict[str, int] = {}
        self.scored_runs: dict[str, set[str]] = {}
        self.costs: dict[str, list[float]] = {}
        self.names: dict[str, set[str]] = {}

    def add(self, row: dict[str, Any]) -> None:
        item = str(row["itemId"])
        self.cases[item] = self.cases.get(item, 0) + 1
        if row.get("scored"):
            if row.get("passed") is None:
                raise Unreadable(f"items.jsonl: a scored answer to {item} has no verdict")
            self.scored[item] = self.scored.get(item, 0) + 1
            self.passed[item] = self.passed.get(item, 0) + (1 if row["passed"] else 0)
            self.scored_runs.setdefault(item, set()).add(str(row["runId"]))
        cost = row.get("costUsd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and not math.isnan(cost):
            self.costs.setdefault(item, []).append(float(cost))
        name = row.get("agentName")
        if name:
            self.names.setdefault(item, set()).add(str(name))

    def verdict(self, item: str) -> int:
        scored = self.scored.get(item, 0)
        if scored == 0:
            return _UNSCORED
        hits = self.passed[item]
        if hits == scored:
            return _PASS_ALL_K if len(self.scored_runs[item]) >= self.runs else _PASS
        return _FLAKY if hits > 0 else _FAIL


def _passes(verdict: int) -> bool:
    return verdict in (_PASS, _PASS_ALL_K)


def _excluded(arm: dict[str, Any]) -> str | None:
    if arm["status"] not in ("completed", "failed", "cancelled"):
        return "not_terminal"
    if arm["status"] != "completed":
        return "failed"
    if arm.get("passed") is not True:
        return "not_pass_k"
    return None


def _group_numbers(
    arms: list[dict[str, Any]],
    evidence: dict[str, _ArmItems],
    items: list[str],
    base: int,
    comparable: bool,
    bar: float,
) -> dict[str, Any]:
    """The numbers of one group of items (all of them, or one agent's), as the decision has
    them: arm by arm in position order, then the leaderboard and the verdict's arm."""
    base_ev = evidence[arms[base]["armId"]]
    base_verdicts = {item: base_ev.verdict(item) for item in items}
    rows = []
    for j, arm in enumerate(arms):
        ev = evidence[arm["armId"]]
        verdicts = {item: ev.verdict(item) for item in items}
        scored = [i for i in items if verdicts[i] != _UNSCORED]
        passed = [i for i in scored if _passes(verdicts[i])]
        costs = [c for i in items for c in ev.costs.get(i, [])]
        hats = [
            value
            for i in items
            if (value := pass_hat_k(ev.passed.get(i, 0), ev.scored.get(i, 0), ev.runs)) is not None
        ]
        row: dict[str, Any] = {
            "armId": arm["armId"],
            "n": len(scored),
            "passedItems": len(passed),
            "flakyItems": sum(verdicts[i] == _FLAKY for i in items),
            "rate": len(passed) / len(scored) if scored else None,
            "cases": sum(ev.cases.get(i, 0) for i in items),
            "pricedCases": len(costs),
            "costPerCaseUsd": mean(costs),
            "passHatK": mean(hats),
            "passHatKItems": len(hats),
        }
        interval = wilson(len(passed), len(scored))
        row["wilsonLow"], row["wilsonHigh"] = interval if interval else (None, None)
        row["excluded"] = _excluded(arm)
        rate = row["rate"]
        if rate is None or interval is None or rate < bar:
            row["clearsBar"] = "no"
        else:
            row["clearsBar"] = "lower_bound" if interval[0] >= bar else "point"
        if comparable and j != base:
            regressions = sum(
                base_verdicts[i] == _PASS_ALL_K
                and verdicts[i] != _UNSCORED
                and not _passes(verdicts[i])
                for i in items
            )
            new_passes = sum(
                verdicts[i] == _PASS_ALL_K
                and base_verdicts[i] != _UNSCORED
                and not _passes(base_verdicts[i])
                for i in items
            )
            both = [i for i in items if verdicts[i] != _UNSCORED and base_verdicts[i] != _UNSCORED]
            b = sum(_passes(base_verdicts[i]) and not _passes(verdicts[i]) for i in both)
            c = sum(not _passes(base_verdicts[i]) and _passes(verdicts[i]) for i in both)
            n11 = sum(_passes(base_verdicts[i]) and _passes(verdicts[i]) for i in both)
            row["regressions"], row["newPasses"] = regressions, new_passes
            row["mcnemar"] = (
                None
                if not both
                else {
                    "b": b,
                    "c": c,
                    "n11": n11,
                    "n00": len(both) - b - c - n11,
                    "discordant": b + c,
                    "sharedItems": len(both),
                    "pValue": mcnemar_p(b, c),
                }
            )
        elif comparable:
            row["regressions"], row["newPasses"], row["mcnemar"] = 0, 0, None
        else:
            row["regressions"], row["newPasses"], row["mcnemar"] = None, None, None
        rows.append(row)

    base_cost = rows[base]["costPerCaseUsd"]
    for row in rows:
        delta = pct = None
        if comparable and row["costPerCaseUsd"] is not None and base_cost is not None:
            delta = row["costPerCaseUsd"] - base_cost
            pct = delta / base_cost * 100 if base_cost else None
        row["costDeltaUsd"], row["costDeltaPct"] = delta, pct

    ranked: list[int] = []
    if comparable:
        ranked = sorted(
            (j for j in range(len(arms)) if rows[j]["excluded"] is None),
            key=lambda j: (
                rows[j]["rate"] is None,
                -(rows[j]["rate"] or 0.0),
                rows[j]["costPerCaseUsd"] is None,
                rows[j]["costPerCaseUsd"] or 0.0,
                arms[j]["position"],
            ),
        )
    winner = ranked[0] if ranked and rows[ranked[0]]["rate"] is not None else None
    for j, row in enumerate(rows):
        row["rank"] = ranked.index(j) + 1 if j in ranked else None
        close = (
            winner is not None
            and j != winner
            and j in ranked
            and row["wilsonLow"] is not None
            and rows[winner]["wilsonLow"] is not None
            and row["wilsonLow"] <= rows[winner]["wilsonHigh"]
            and rows[winner]["wilsonLow"] <= row["wilsonHigh"]
        )
        row["notDistinguishable"] = None
        if close:
            assert winner is not None
            n, wn = row["n"], rows[winner]["n"]
            at = f"n={n}" if n == wn else f"n={n} against n={wn}"
            row["notDistinguishable"] = f"not distinguishable from {arms[winner]['label']} at {at}"

    recommended = None
    if comparable and not any(row["excluded"] == "not_terminal" for row in rows):
        candidates = [
            j for j, row in enumerate(rows) if row["excluded"] is None and row["clearsBar"] != "no"
        ]
        if candidates:
            recommended = min(
                candidates,
                key=lambda j: (
                    rows[j]["costPerCaseUsd"] is None,
                    rows[j]["costPerCaseUsd"] or 0.0,
                    arms[j]["position"],
                ),
            )
    return {
        "rows": rows,
        "leaderboard": [arms[j]["armId"] for j in ranked],
        "winner": arms[winner]["armId"] if winner is not None else None,
        "recommended": recommended,
    }


_ARM_FIELDS = (
    "n", "passedItems", "flakyItems", "rate", "wilsonLow", "wilsonHigh", "passHatK",
    "passHatKItems", "cases", "pricedCases", "costPerCaseUsd", "costDeltaUsd", "costDeltaPct",
    "regressions", "newPasses", "excluded", "clearsBar", "rank", "notDistinguishable",
)  # fmt: skip
_MCNEMAR_FIELDS = ("b", "c", "n11", "n00", "discordant", "sharedItems", "pValue")


def _check_group(
    where: str,
    block: dict[str, Any],
    numbers: dict[str, Any],
    arms: list[dict[str, Any]],
    comparable: bool,
    checks: Checks,
) -> None:
    stored_arms = {arm.get("armId"): arm for arm in block.get("arms") or []}
    rows = numbers["rows"]
    checks.equal(
        f"{where}.arms", [row["armId"] for row in rows], [a.get("armId") for a in block["arms"]]
    )
    for row in rows:
        stored = stored_arms.get(row["armId"])
        if stored is None:
            continue
        label = f"{where}.arms[{stored.get('label')}]"
        for name in _ARM_FIELDS:
            if name not in stored and name in ("passHatK", "passHatKItems"):
                continue  # a server from before pass^k was reported
            checks.equal(f"{label}.{name}", row[name], stored.get(name))
        if row["mcnemar"] is None or stored.get("mcnemar") is None:
            checks.equal(f"{label}.mcnemar", row["mcnemar"], stored.get("mcnemar"))
        else:
            for name in _MCNEMAR_FIELDS:
                checks.equal(
                    f"{label}.mcnemar.{name}", row["mcnemar"][name], stored["mcnemar"].get(name)
                )
    checks.equal(f"{where}.leaderboard", numbers["leaderboard"], block.get("leaderboard"))
    checks.equal(f"{where}.winnerArmId", numbers["winner"], block.get("winnerArmId"))
    verdict = block.get("verdict") or {}
    j = numbers["recommended"]
    if not comparable:
        checks.equal(f"{where}.verdict.outcome", "unavailable", verdict.get("outcome"))
        checks.equal(f"{where}.verdict.recommendedArmId", None, verdict.get("recommendedArmId"))
        return
    checks.equal(
        f"{where}.verdict.recommendedArmId",
        None if j is None else arms[j]["armId"],
        verdict.get("recommendedArmId"),
    )
    if j is not None:
        row = rows[j]
        savings = None if row["costDeltaUsd"] is None else -row["costDeltaUsd"]
        savings_pct = None if row["costDeltaPct"] is None else -row["costDeltaPct"]
        checks.equal(
            f"{where}.verdict.costPerCaseUsd", row["costPerCaseUsd"], verdict.get("costPerCaseUsd")
        )
        checks.equal(f"{where}.verdict.savingsUsd", savings, verdict.get("savingsUsd"))
        checks.equal(f"{where}.verdict.savingsPct", savings_pct, verdict.get("savingsPct"))
        checks.equal(
            f"{where}.verdict.clearsOn",
            "lower_bound" if row["clearsBar"] == "lower_bound" else "point",
            verdict.get("clearsOn"),
        )


def _frontier(
    rows: list[dict[str, Any]], arms: list[dict[str, Any]], highlighted: str | None
) -> dict[str, Any]:
    placed = [
        (row, arm)
        for row, arm in zip(rows, arms, strict=True)
        if row["rate"] is not None and row["costPerCaseUsd"] is not None
    ]
    eligible = [row for row, _ in placed if row["excluded"] is None]

    def dominated(row: dict[str, Any]) -> bool:
        for other in eligible:
            if other is row:
                continue
            if (
                other["costPerCaseUsd"] <= row["costPerCaseUsd"]
                and other["rate"] >= row["rate"]
                and (other["costPerCaseUsd"] < row["costPerCaseUsd"] or other["rate"] > row["rate"])
            ):
                return True
        return False

    points = sorted(
        (
            {
                "armId": row["armId"],
                "costPerCaseUsd": row["costPerCaseUsd"],
                "rate": row["rate"],
                "onFrontier": row["excluded"] is None and not dominated(row),
                "highlighted": row["armId"] == highlighted,
                "_order": (row["costPerCaseUsd"], -row["rate"], arm["position"]),
            }
            for row, arm in placed
        ),
        key=lambda p: p["_order"],
    )
    for point in points:
        del point["_order"]
    return {
        "points": points,
        "unpricedArmIds": [
            row["armId"]
            for row in rows
            if row["rate"] is not None and row["costPerCaseUsd"] is None
        ],
        "noDataArmIds": [row["armId"] for row in rows if row["rate"] is None],
        "highlightedArmId": highlighted,
    }


def verify_sweep(root: Path, decision: dict[str, Any], checks: Checks) -> None:
    sweep = _load_json(root / "sweep.json")
    rows = _load_jsonl(root / "items.jsonl")
    cases = _load_jsonl(root / "cases.jsonl")
    item_ids = [str(case["itemId"]) for case in cases]
    arms = sorted(decision.get("arms") or [], key=lambda arm: arm["position"])
    if not arms:
        raise Unreadable("decision.json has no arms")
    comparable = sweep.get("status") != "void"
    checks.equal(
        "comparable (the sweep is void)" if not comparable else "comparable",
        comparable,
        decision.get("comparable"),
    )
    checks.equal("status", sweep.get("status"), decision.get("status"))
    checks.equal("itemCount", len(item_ids), decision.get("itemCount"))
    runs_of = {arm["armId"]: arm for arm in sweep.get("arms") or []}
    evidence: dict[str, _ArmItems] = {}
    for arm in arms:
        known = runs_of.get(arm["armId"])
        if known is None:
            raise Unreadable(f"sweep.json does not list arm {arm['armId']}")
        checks.equal(f"arms[{arm['label']}].runs", known["runs"], arm.get("runs"))
        evidence[arm["armId"]] = _ArmItems(int(known["runs"]))
    for number, row in enumerate(rows, start=1):
        found = evidence.get(str(row.get("armId")))
        if found is None:
            raise Unreadable(
                f"items.jsonl line {number}: arm {row.get('armId')!r} is not in the decision"
            )
        if str(row.get("itemId")) not in item_ids:
            checks.fail(
                f"items.jsonl line {number}: item {row.get('itemId')!r} is not a frozen case"
            )
            continue
        if row.get("runId") not in runs_of[row["armId"]].get("runIds", []):
            checks.fail(
                f"items.jsonl line {number}: run {row.get('runId')!r} is not one of its arm's runs"
            )
        found.add(row)

    base = next(
        (j for j, arm in enumerate(arms) if arm["armId"] == decision.get("baselineArmId")), None
    )
    if base is None:
        checks.fail(f"baselineArmId {decision.get('baselineArmId')!r} is not an arm")
        return
    bar = float((decision.get("bar") or {})["value"])

    # Agents: the one name an item's answers report across all arms, else Unattributed.
    captured = [i for i in item_ids if any(ev.cases.get(i) for ev in evidence.values())]
    names_of = {
        i: set().union(*(ev.names.get(i, set()) for ev in evidence.values())) for i in captured
    }
    groups: dict[str, list[str]] = {}
    unnamed = conflicting = 0
    unattributed: list[str] = []
    for i in captured:
        names = names_of[i]
        if len(names) == 1:
            groups.setdefault(next(iter(names)), []).append(i)
        else:
            unattributed.append(i)
            unnamed += not names
            conflicting += len(names) > 1
    checks.equal("uncapturedItems", len(item_ids) - len(captured), decision.get("uncapturedItems"))

    overall = _group_numbers(arms, evidence, item_ids, base, comparable, bar)
    _check_group("decision", decision, overall, arms, comparable, checks)
    ordered = sorted(groups, key=lambda name: (name.casefold(), name))
    expected_agents: list[tuple[str | None, str, list[str]]] = [
        (name, name, groups[name]) for name in ordered
    ]
    if unattributed:
        expected_agents.append((None, UNATTRIBUTED, unattributed))
    stored_agents = decision.get("agents") or []
    checks.equal(
        "agents",
        [label for _, label, _ in expected_agents],
        [a.get("label") for a in stored_agents],
    )
    for (name, label, members), stored in zip(expected_agents, stored_agents, strict=False):
        where = f"agents[{label}]"
        checks.equal(f"{where}.agentName", name, stored.get("agentName"))
        checks.equal(f"{where}.items", len(members), stored.get("items"))
        checks.equal(
            f"{where}.unnamedItems", unnamed if name is None else 0, stored.get("unnamedItems")
        )
        checks.equal(
            f"{where}.conflictingItems",
            conflicting if name is None else 0,
            stored.get("conflictingItems"),
        )
        numbers = _group_numbers(arms, evidence, members, base, comparable, bar)
        _check_group(where, stored, numbers, arms, comparable, checks)

    if not comparable:
        checks.equal("frontier (a void sweep draws none)", None, decision.get("frontier"))
        for where, block in [
            ("decision", decision),
            *((f"agents[{a.get('label')}]", a) for a in stored_agents),
        ]:
            checks.equal(
                f"{where}.leaderboard (a void sweep ranks nothing)", [], block.get("leaderboard")
            )
            checks.equal(
                f"{where}.winnerArmId (a void sweep names none)", None, block.get("winnerArmId")
            )
            for arm in block.get("arms") or []:
                checks.equal(f"{where}.arms[{arm.get('label')}].rank (void)", None, arm.get("rank"))
        return
    recommended = overall["recommended"]
    highlighted = None if recommended is None else arms[recommended]["armId"]
    expected = _frontier(overall["rows"], arms, highlighted)
    stored = decision.get("frontier") or {}
    checks.equal(
        "frontier.points.armId",
        [p["armId"] for p in expected["points"]],
        [p.get("armId") for p in stored.get("points") or []],
    )
    for point, got in zip(expected["points"], stored.get("points") or [], strict=False):
        for name in ("costPerCaseUsd", "rate", "onFrontier", "highlighted"):
            checks.equal(f"frontier.points[{point['armId']}].{name}", point[name], got.get(name))
    for name in ("unpricedArmIds", "noDataArmIds", "highlightedArmId"):
        checks.equal(f"frontier.{name}", expected[name], stored.get(name))


# --- an experiment --------------------------------------------------------------------------------


def _side(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One experiment's case-trials added up: the counts, and per case (passes, graded)."""
    per_case: dict[str, list[int]] = {}
    graded = passed = infra = agent = ungraded = 0
    costs = []
    for row in rows:
        kind = row.get("errorKind")
        verdict = row.get("passed")
        if kind == "infra":
            infra += 1
        elif kind == "agent":
            agent += 1
        elif verdict is None:
            ungraded += 1
        cost = row.get("costUsd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            costs.append(float(cost))
        counts = per_case.setdefault(str(row["caseId"]), [0, 0])
        if verdict is None:
            continue
        graded += 1
        passed += bool(verdict)
        counts[0] += bool(verdict)
        counts[1] += 1
    return {
        "done": len(rows),
        "graded": graded,
        "passed": passed,
        "infra": infra,
        "agent": agent,
        "ungraded": ungraded,
        "costs": costs,
        "per_case": per_case,
    }


def _check_summary(
    where: str, summary: dict[str, Any], side: dict[str, Any], checks: Checks
) -> None:
    trials = int(summary.get("trials") or 0)
    checks.equal(f"{where}.done", side["done"], summary.get("done"))
    checks.equal(f"{where}.graded", side["graded"], summary.get("graded"))
    checks.equal(f"{where}.passed", side["passed"], summary.get("passed"))
    checks.equal(
        f"{where}.passRate",
        side["passed"] / side["graded"] if side["graded"] else None,
        summary.get("passRate"),
    )
    checks.equal(
        f"{where}.errors", {"infra": side["infra"], "agent": side["agent"]}, summary.get("errors")
    )
    checks.equal(f"{where}.ungraded", side["ungraded"], summary.get("ungraded"))
    checks.equal(f"{where}.pricedTrials", len(side["costs"]), summary.get("pricedTrials"))
    total = exact_sum(side["costs"]) if side["costs"] else None
    checks.equal(f"{where}.costUsd", total, summary.get("costUsd"))
    checks.equal(
        f"{where}.costOverflow", bool(side["costs"]) and total is None, summary.get("costOverflow")
    )
    checks.equal(f"{where}.costPerTrialUsd", mean(side["costs"]), summary.get("costPerTrialUsd"))
    graded_cases = [(p, g) for p, g in side["per_case"].values() if g]
    strict = sum(p == g for p, g in graded_cases)
    checks.equal(f"{where}.gradedCases", len(graded_cases), summary.get("gradedCases"))
    checks.equal(f"{where}.casesPassedEveryTrial", strict, summary.get("casesPassedEveryTrial"))
    checks.equal(
        f"{where}.strictRate",
        strict / len(graded_cases) if graded_cases else None,
        summary.get("strictRate"),
    )
    interval = wilson(strict, len(graded_cases))
    stored = summary.get("strictWilson")
    checks.equal(
        f"{where}.strictWilson",
        None if interval is None else {"low": interval[0], "high": interval[1]},
        stored,
    )
    expected = []
    for k in range(1, trials + 1):
        values = [v for p, g in graded_cases if (v := pass_hat_k(p, g, k)) is not None]
        expected.append(
            {
                "k": k,
                "estimate": mean(values),
                "cases": len(values),
                "leftOut": sum(1 for _, g in graded_cases if g < k),
            }
        )
    checks.equal(f"{where}.passHatK", expected, summary.get("passHatK"))


def _default_seed(cases: list[list[Any]]) -> int:
    text = json.dumps(cases, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _check_kinds(
    stored: Any, cases: list[list[Any]], kinds_of: dict[str, str], checks: Checks
) -> None:
    """The paired cases by kind (the cases' `kind`): mean pass rates, and the bad cases B
    still fails and the guard and control cases that passed in A and fail in B."""
    by_kind: dict[str, list[list[Any]]] = {}
    for row in cases:
        if row[0] in kinds_of:
            by_kind.setdefault(kinds_of[row[0]], []).append(row)
    if not by_kind:
        checks.equal("comparison.kinds", None, stored)
        return
    expected = {
        "rows": [
            {
                "kind": kind,
                "cases": len(group),
                "aRate": sum(ap / ag for _, ap, ag, _, _ in group) / len(group),
                "bRate": sum(bp / bg for _, _, _, bp, bg in group) / len(group),
            }
            for kind, group in sorted(by_kind.items())
        ],
        "badNotFixed": [r[0] for r in by_kind.get("bad", []) if r[3] != r[4]],
        "brokenGuards": [r[0] for r in by_kind.get("guard", []) if r[1] == r[2] and r[3] != r[4]],
        "brokenControls": [
            r[0] for r in by_kind.get("control", []) if r[1] == r[2] and r[3] != r[4]
        ],
    }
    checks.equal("comparison.kinds", expected, stored)


def _kinds(root: Path) -> dict[str, str]:
    """Each case's kind, from cases.jsonl (a kind that is an object or a list is none)."""
    found = {}
    for case in _load_jsonl(root / "cases.jsonl"):
        kind = case.get("kind")
        if kind is not None and not isinstance(kind, dict | list):
            found[str(case.get("id"))] = str(kind)
    return found


def _check_comparison(
    comparison: dict[str, Any],
    a: dict[str, Any],
    b: dict[str, Any],
    checks: Checks,
    kinds_of: dict[str, str] | None = None,
) -> None:
    where = "comparison"
    for label, side in (("a", a), ("b", b)):
        stored = comparison.get(label) or {}
        checks.equal(f"{where}.{label}.graded", side["graded"], stored.get("graded"))
        checks.equal(f"{where}.{label}.passed", side["passed"], stored.get("passed"))
        checks.equal(
            f"{where}.{label}.passRate",
            side["passed"] / side["graded"] if side["graded"] else None,
            stored.get("passRate"),
        )
        checks.equal(
            f"{where}.{label}.errors",
            {"infra": side["infra"], "agent": side["agent"]},
            stored.get("errors"),
        )
        checks.equal(f"{where}.{label}.ungraded", side["ungraded"], stored.get("ungraded"))
        checks.equal(f"{where}.{label}.done", side["done"], stored.get("done"))
    graded_a = {c for c, (_, g) in a["per_case"].items() if g}
    graded_b = {c for c, (_, g) in b["per_case"].items() if g}
    paired = sorted(graded_a & graded_b)
    cases = [[c, *a["per_case"][c], *b["per_case"][c]] for c in paired]
    n = len(cases)
    checks.equal(f"{where}.pairedCases", n, comparison.get("pairedCases"))
    diffs = [bp / bg - ap / ag for _, ap, ag, bp, bg in cases]
    deltas = diffs
    checks.equal(f"{where}.diff", math.fsum(diffs) / n if n else None, comparison.get("diff"))
    a_pass = [ap == ag for _, ap, ag, _, _ in cases]
    b_pass = [bp == bg for _, _, _, bp, bg in cases]
    n11 = sum(x and y for x, y in zip(a_pass, b_pass, strict=True))
    n10 = sum(x and not y for x, y in zip(a_pass, b_pass, strict=True))
    n01 = sum(not x and y for x, y in zip(a_pass, b_pass, strict=True))
    mc = comparison.get("mcnemar") or {}
    checks.equal(f"{where}.mcnemar.n11", n11, mc.get("n11"))
    checks.equal(f"{where}.mcnemar.n10", n10, mc.get("n10"))
    checks.equal(f"{where}.mcnemar.n01", n01, mc.get("n01"))
    checks.equal(f"{where}.mcnemar.n00", n - n11 - n10 - n01, mc.get("n00"))
    checks.equal(f"{where}.mcnemar.p", mcnemar_p(n10, n01) if n else None, mc.get("p"))
    checks.equal(
        f"{where}.probBBeatsA",
        prob_b_beats_a(n10, n01) if 0 < n < BAYES_BELOW else None,
        comparison.get("probBBeatsA"),
    )
    leftout = comparison.get("leftOut") or {}
    checks.equal(
        f"{where}.leftOut.gradedInAOnly", len(graded_a - graded_b), leftout.get("gradedInAOnly")
    )
    checks.equal(
        f"{where}.leftOut.gradedInBOnly", len(graded_b - graded_a), leftout.get("gradedInBOnly")
    )
    checks.equal(
        f"{where}.leftOut.ungradedInA",
        len(set(a["per_case"]) - graded_a),
        leftout.get("ungradedInA"),
    )
    checks.equal(
        f"{where}.leftOut.ungradedInB",
        len(set(b["per_case"]) - graded_b),
        leftout.get("ungradedInB"),
    )

    def case_json(row: list[Any]) -> dict[str, Any]:
        c, ap, ag, bp, bg = row
        return {
            "case": c,
            "a": {"passes": ap, "graded": ag, "rate": ap / ag},
            "b": {"passes": bp, "graded": bg, "rate": bp / bg},
            "delta": bp / bg - ap / ag,
        }

    def by_delta(rows: list[tuple[float, list[Any]]]) -> list[dict[str, Any]]:
        ordered = sorted(rows, key=lambda r: (r[0] if r[0] < 0 else -r[0], r[1][0]))
        return [case_json(row) for _, row in ordered]

    checks.equal(
        f"{where}.regressions",
        by_delta([(d, row) for d, row in zip(deltas, cases, strict=True) if d < 0]),
        comparison.get("regressions"),
    )
    checks.equal(
        f"{where}.improvements",
        by_delta([(d, row) for d, row in zip(deltas, cases, strict=True) if d > 0]),
        comparison.get("improvements"),
    )
    trials = max(
        int((comparison.get("a") or {}).get("trials") or 1),
        int((comparison.get("b") or {}).get("trials") or 1),
    )
    multi = trials >= 2
    gained = sorted(c for c, ap, _, bp, _ in cases if ap == 0 and bp > 0)
    lost = sorted(c for c, ap, _, bp, _ in cases if ap > 0 and bp == 0)
    checks.equal(f"{where}.gained", gained if multi else None, comparison.get("gained"))
    checks.equal(f"{where}.lost", lost if multi else None, comparison.get("lost"))

    if kinds_of is not None:
        _check_kinds(comparison.get("kinds"), cases, kinds_of, checks)

    power = comparison.get("power")
    q = (n10 + n01) / n if n else 0.0
    if n and q > 0:
        stored = power or {}
        checks.equal(f"{where}.power.n", n, stored.get("n"))
        checks.equal(f"{where}.power.discordance", q, stored.get("discordance"))
        checks.equal(f"{where}.power.ceiling", mcnemar_ceiling(n, q), stored.get("ceiling"))
    else:
        checks.equal(f"{where}.power", None, power)

    seed = comparison.get("seed")
    if comparison.get("cluster") is not None:
        checks.fail(f"{where}: a cluster bootstrap cannot be checked from this bundle")
        return
    checks.equal(f"{where}.seed (from the paired outcomes)", _default_seed(cases), seed)
    interval = comparison.get("interval")
    if n == 0:
        checks.equal(f"{where}.interval", None, interval)
        return
    if len(set(deltas)) == 1:
        expected = float(deltas[0])
        checks.equal(
            f"{where}.interval", {"low": expected, "high": expected, "confidence": 0.95}, interval
        )
        low, high = expected, expected
    else:
        if not isinstance(seed, int) or not isinstance(interval, dict):
            checks.fail(f"{where}: no seed or interval to check the bootstrap against")
            return
        resamples = RESAMPLES
        low, high = percentile_bootstrap(diffs, seed, resamples)
        tolerance = max(0.0125, 1 / n + 0.005)
        checks.near(f"{where}.interval.low (bootstrap)", low, interval.get("low"), tolerance)
        checks.near(f"{where}.interval.high (bootstrap)", high, interval.get("high"), tolerance)
        low, high = float(interval["low"]), float(interval["high"])
    if all(d == 0 for d in deltas):
        verdict = "inconclusive"
    elif low > 0:
        verdict = "better"
    elif high < 0:
        verdict = "worse"
    else:
        verdict = "inconclusive"
    checks.equal(f"{where}.intervalVerdict", verdict, comparison.get("intervalVerdict"))


def verify_experiment(root: Path, decision: dict[str, Any], checks: Checks) -> None:
    rows = _load_jsonl(root / "items.jsonl")
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_experiment.setdefault(str(row.get("experimentId")), []).append(row)
    summaries = decision.get("experiments") or []
    if not summaries:
        raise Unreadable("decision.json summarises no experiment")
    sides = {}
    for summary in summaries:
        ident = str(summary.get("id"))
        side = _side(by_experiment.get(ident, []))
        sides[ident] = side
        _check_summary(f"experiments[{ident}]", summary, side, checks)
    extra = set(by_experiment) - set(sides)
    if extra:
        checks.fail(f"items.jsonl holds case-trials of {sorted(extra)}, not in decision.json")
    comparison = decision.get("comparison")
    if comparison is not None:
        a_id = str((comparison.get("a") or {}).get("id"))
        b_id = str((comparison.get("b") or {}).get("id"))
        if a_id not in sides or b_id not in sides:
            raise Unreadable("decision.json compares an experiment it does not summarise")
        _check_comparison(comparison, sides[a_id], sides[b_id], checks, _kinds(root))


# --- main -----------------------------------------------------------------------------------------


def verify(root: Path) -> Checks:
    """Every check on the bundle in `root`; Unreadable when it cannot be read. A file that
    fails its hash and then cannot be read is a mismatch (it was changed), not unreadable."""
    manifest = _load_json(root / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Unreadable(f"manifest.json is not a {FORMAT} manifest")
    checks = Checks()
    check_files(root, manifest, checks)
    try:
        decision = _load_json(root / "decision.json")
        if not isinstance(decision, dict):
            raise Unreadable("decision.json is not an object")
        try:
            if manifest.get("kind") == "sweep":
                verify_sweep(root, decision, checks)
            elif manifest.get("kind") == "experiment":
                verify_experiment(root, decision, checks)
            else:
                raise Unreadable(f"manifest.json names an unknown kind {manifest.get('kind')!r}")
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise Unreadable(f"the bundle's files are not shaped as {FORMAT}: {error!r}") from None
    except Unreadable as error:
        if not checks.mismatches:
            raise
        checks.fail(f"the changed files cannot be read: {error}")
    return checks


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        sys.stderr.write("usage: python3 verify.py [BUNDLE_DIR]\n")
        return 2 if len(args) > 1 else 0
    root = Path(args[0]) if args else Path(__file__).resolve().parent
    try:
        checks = verify(root)
    except Unreadable as error:
        sys.stderr.write(f"verify.py: cannot read the bundle: {error}\n")
        return 2
    for mismatch in checks.mismatches:
        sys.stderr.write(f"mismatch: {mismatch}\n")
    if checks.mismatches:
        sys.stderr.write(
            f"verify.py: FAILED: {len(checks.mismatches)} of {checks.count} checks do not match\n"
        )
        return 1
    sys.stdout.write(f"verify.py: OK: {checks.count} checks, every file and number matches\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
