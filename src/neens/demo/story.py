"""The comparison the seeded sweep must produce, predicted from the catalog alone.

`predicted()` builds each arm's evidence as the server will hold it — every (item, run) answer
graded by the Primary Score's rule, priced at the model's price, named by its item's agent, and
pass^k from each run's pass rate against the pinned gate — and hands it to the product's own
decision function, `neens.domain.decision.compare_sweep`. `differences()` then reads a live
comparison (the JSON of `GET /model-sweeps/{id}/comparison`) against it, so a demo whose server
told another story than its docs fails loudly instead of showing it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from neens.demo import catalog
from neens.domain.decision import ArmEvidence, Bar, Repeat, SweepComparison, compare_sweep


def evidence(model: catalog.Model, position: int) -> ArmEvidence:
    """One arm's k runs over every item, as the sweep records them."""
    repeats: dict[str, list[Repeat]] = {item.key: [] for item in catalog.ITEMS}
    green = 0
    for run in range(catalog.PASS_K):
        run_id = f"{model.label}/run-{run}"
        passed = 0
        for item in catalog.ITEMS:
            ok = catalog.passes(item, catalog.answer(model, item, run))
            passed += ok
            cost = catalog.cost_usd(model, item, run)
            repeats[item.key].append(
                Repeat(run_id, f"{run_id}/{item.key}", True, ok, None, cost, item.agent)
            )
        green += passed / len(catalog.ITEMS) >= catalog.GATE["min_pass_rate"]
    return ArmEvidence(
        id=model.label,
        label=model.label,
        position=position,
        status="completed",
        passed=green == catalog.PASS_K,
        runs=catalog.PASS_K,
        repeats=repeats,
    )


def predicted() -> SweepComparison:
    """The comparison of the seeded sweep, with arm ids equal to the arm labels."""
    return compare_sweep(
        [evidence(model, position) for position, model in enumerate(catalog.MODELS)],
        [item.key for item in catalog.ITEMS],
        comparable=True,
        void_reason=None,
        bar=Bar(catalog.GATE["min_pass_rate"], "gate"),
        baseline_arm_id=None,
    )


_ARM_FIELDS = (
    ("n", "n"),
    ("passed_items", "passedItems"),
    ("flaky_items", "flakyItems"),
    ("passed", "passed"),
    ("clears_bar", "clearsBar"),
    ("excluded", "excluded"),
    ("rank", "rank"),
    ("regressions", "regressions"),
    ("cases", "cases"),
    ("priced_cases", "pricedCases"),
)


def differences(live: dict[str, Any], expected: SweepComparison | None = None) -> list[str]:
    """Where the live comparison departs from the prediction, one line each; [] when it tells
    the same story (labels, counts, verdicts and costs per case to a millionth of a percent)."""
    expected = expected or predicted()
    found: list[str] = []
    found += _group("overall", live, expected.arms, expected.winner_arm_id, expected.verdict)
    agents = {agent["label"]: agent for agent in live.get("agents", [])}
    for agent in expected.agents:
        if agent.label not in agents:
            found.append(f"{agent.label}: missing from the comparison's agents")
            continue
        got = agents[agent.label]
        if got["items"] != agent.items:
            found.append(f"{agent.label}: {got['items']} items, expected {agent.items}")
        found += _group(agent.label, got, agent.arms, agent.winner_arm_id, agent.verdict)
    extra = set(agents) - {agent.label for agent in expected.agents}
    found += [f"{label}: an agent the catalog does not have" for label in sorted(extra)]
    return found


def _group(
    scope: str, live: dict[str, Any], arms: Sequence[Any], winner: str | None, verdict: Any
) -> list[str]:
    found: list[str] = []
    labels = {arm["armId"]: arm["label"] for arm in live["arms"]}
    by_label = {arm["label"]: arm for arm in live["arms"]}
    for arm in arms:
        got = by_label.get(arm.label)
        if got is None:
            found.append(f"{scope}: no arm {arm.label}")
            continue
        for ours, theirs in _ARM_FIELDS:
            if getattr(arm, ours) != got[theirs]:
                found.append(
                    f"{scope}, {arm.label}: {theirs} is {got[theirs]!r}, "
                    f"expected {getattr(arm, ours)!r}"
                )
        cost, live_cost = arm.cost_per_case_usd, got["costPerCaseUsd"]
        if (cost is None) != (live_cost is None) or (
            cost is not None and not math.isclose(cost, live_cost, rel_tol=1e-8)
        ):
            found.append(f"{scope}, {arm.label}: costPerCaseUsd is {live_cost}, expected {cost}")
    live_winner = labels.get(live["winnerArmId"]) if live["winnerArmId"] else None
    if live_winner != winner:
        found.append(f"{scope}: the winner is {live_winner}, expected {winner}")
    got_verdict = live["verdict"]
    for ours, theirs in (
        ("outcome", "outcome"),
        ("recommended_label", "recommendedLabel"),
        ("clears_on", "clearsOn"),
    ):
        if getattr(verdict, ours) != got_verdict[theirs]:
            found.append(
                f"{scope}: verdict {theirs} is {got_verdict[theirs]!r}, "
                f"expected {getattr(verdict, ours)!r}"
            )
    return found
