"""What a public share link shows: a result, redacted.

A shared sweep decision keeps what a decision document needs: the sweep's name, version label,
status and dates; the bar and its source; the verdict sentence; per arm its label, model, status,
pass^k, rate, n, interval, flaky items, costs, regressions and new passes, rank and the
annotations; the same per agent name; the cost–quality frontier, by arm label. It leaves out
every prompt, answer, expected output, judge reason, session id, endpoint URL, key and internal
id (sweep, arm, run, dataset and connection ids), and a void sweep's reason is replaced by which
arms diverged, since the reason names runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from neens.domain.decision import AgentComparison, ArmComparison, Verdict
from neens.domain.decision_frontier import Frontier
from neens.errors import NotFound
from neens.store import share_links as store
from neens.store.db import Database
from neens.store.tenancy import SWEEP, owned
from neens.views.decisions import sweep_decision

SHAREABLE = ("sweep_decision",)
"""The kinds of result a link can show."""


async def check_shareable(db: Database, project_id: str, resource_type: str, ident: str) -> None:
    """404 naming `resourceId` unless the project has that resource."""
    if resource_type == "sweep_decision":
        async with db.read() as s:
            try:
                await owned(s, SWEEP, project_id, ident)
            except NotFound as exc:
                raise NotFound(exc.message, field="resourceId") from None


async def shared_result(db: Database, token: str) -> dict[str, Any]:
    """The redacted result behind a public token (404 unknown, 410 expired, revoked or
    sharing turned off)."""
    opened = await store.open_link(db, token)
    decision = await sweep_decision(db, opened.project_id, opened.resource_id)
    c, sweep = decision.comparison, decision.sweep
    labels = {arm.arm_id: arm.label for arm in c.arms}
    models = {arm.id: decision.view.models[arm.id] for arm in decision.rollup.arms}
    return {
        "resourceType": opened.resource_type,
        "expiresAt": _iso(opened.expires_at),
        "sweep": {
            "name": sweep.name,
            "versionLabel": sweep.version_label,
            "status": decision.rollup.status,
            "passK": sweep.pass_k,
            "itemCount": sweep.item_count,
            "createdAt": _iso(sweep.created_at),
            "completedAt": _iso(sweep.completed_at),
        },
        "comparable": c.comparable,
        "void": None
        if c.comparable
        else {
            "reason": "the arms did not run under identical conditions, so no comparison is made",
            "divergedArms": list(decision.rollup.diverged_arms),
        },
        "bar": {"value": c.bar.value, "source": c.bar.source},
        "baselineArm": labels[c.baseline_arm_id],
        "verdict": _verdict(c.verdict),
        "leaderboard": [labels[a] for a in c.leaderboard],
        "arms": [_arm(arm, models.get(arm.arm_id)) for arm in c.arms],
        "agents": [_agent(agent, labels, models) for agent in c.agents],
        "frontier": _frontier(c.frontier, labels),
    }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


VOID_SENTENCE = (
    "This sweep is void: its arms did not run under identical conditions, so no arm is ranked "
    "or recommended."
)


def _verdict(v: Verdict) -> dict[str, Any]:
    """The verdict; a void one's sentence is replaced, since the void reason names runs."""
    return {
        "outcome": v.outcome,
        "recommendedArm": v.recommended_label,
        "costPerCaseUsd": v.cost_per_case_usd,
        "savingsUsd": v.savings_usd,
        "savingsPct": v.savings_pct,
        "clearsOn": v.clears_on,
        "sentence": VOID_SENTENCE if v.outcome == "unavailable" else v.sentence,
    }


def _arm(arm: ArmComparison, model: str | None) -> dict[str, Any]:
    return {
        "label": arm.label,
        "model": model,
        "isBaseline": arm.is_baseline,
        "status": arm.status,
        "passed": arm.passed,
        "runs": arm.runs,
        "n": arm.n,
        "passedItems": arm.passed_items,
        "flakyItems": arm.flaky_items,
        "rate": arm.rate,
        "wilsonLow": arm.wilson_low,
        "wilsonHigh": arm.wilson_high,
        "cases": arm.cases,
        "pricedCases": arm.priced_cases,
        "costPerCaseUsd": arm.cost_per_case_usd,
        "costDeltaUsd": arm.cost_delta_usd,
        "costDeltaPct": arm.cost_delta_pct,
        "regressions": arm.regressions,
        "newPasses": arm.new_passes,
        "excluded": arm.excluded,
        "clearsBar": arm.clears_bar,
        "rank": arm.rank,
        "notDistinguishable": arm.not_distinguishable,
    }


def _frontier(frontier: Frontier | None, labels: dict[str, str]) -> dict[str, Any] | None:
    """The cost–quality frontier, arms by label; None for a void sweep."""
    if frontier is None:
        return None
    return {
        "points": [
            {
                "label": p.label,
                "costPerCaseUsd": p.cost_per_case_usd,
                "rate": p.rate,
                "wilsonLow": p.wilson_low,
                "wilsonHigh": p.wilson_high,
                "n": p.n,
                "excluded": p.excluded,
                "onFrontier": p.on_frontier,
                "highlighted": p.highlighted,
            }
            for p in frontier.points
        ],
        "unpricedArms": [labels[a] for a in frontier.unpriced_arm_ids],
        "noDataArms": [labels[a] for a in frontier.no_data_arm_ids],
        "highlightedArm": None
        if frontier.highlighted_arm_id is None
        else labels[frontier.highlighted_arm_id],
    }


def _agent(
    agent: AgentComparison, labels: dict[str, str], models: dict[str, str | None]
) -> dict[str, Any]:
    return {
        "agent": agent.label,
        "items": agent.items,
        "leaderboard": [labels[a] for a in agent.leaderboard],
        "verdict": _verdict(agent.verdict),
        "arms": [_arm(arm, models.get(arm.arm_id)) for arm in agent.arms],
    }
