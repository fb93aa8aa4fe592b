"""Running a replay: both arms' calls sent, graded and saved as two experiments of the bench.

Each arm is an experiment of kind "replay" (each naming the other, `pair_id`), whose cases are
the replayed calls (`callNNN-SPANID`, input the call's last user message, expected the recorded
first action) and whose trials are the `--n` repeats. The two arms' sends are interleaved like
`exp aa`'s: call by call and repeat by repeat, A and B next to each other in a seeded random
order, so a provider's drift during the replay hits both arms alike. Each reply is saved as it
arrives, so `exp compare`, `exp list` and `exp status` read a replay like any other run.

Grading: `first-action` passes when the reply's first action (a tool call by name, or text)
is the recorded one; with `--criterion`, an LLM judge (`engine.llm_judge`) scores the reply
against it too, and the case-trial passes when every grader that gave a verdict passed. A call
whose recorded reply was not kept has no first action to match: its case-trials are ungraded by
`first-action`, never failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import httpx

from neens.domain.judges import JudgeCase
from neens.domain.judges.verdict import PASS_THRESHOLD
from neens.domain.pricing import PriceBook, PriceLookupError
from neens.exp.matrix import interleaved
from neens.exp.providers import Endpoint, ProviderError, ProviderName, Reply, Request, send
from neens.exp.replay_arms import Arm
from neens.exp.replay_calls import RecordedCall
from neens.exp.replay_source import Selected
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    GradeRow,
    TrialRow,
    TrialWriter,
    create_experiment,
    finish_experiment,
)
from neens.store.types import utcnow

FIRST_ACTION: Final = "first-action"
FIRST_ACTION_VERSION: Final = "1"
CRITERION: Final = "criterion"
JUDGE_TEMPLATE: Final = (
    "Judge a model's reply to a conversation against this criterion.\n\n"
    "Criterion: {criterion}\n\n"
    "The last user message:\n{input}\n\n"
    "The reply (a tool call is written as `tool NAME(ARGUMENTS)`):\n{output}\n\n"
    "Score 1 when the reply meets the criterion and 0 when it does not."
)


@dataclass(frozen=True, slots=True)
class Judge:
    """The `--criterion` judge: an OpenAI-compatible model scoring each reply."""

    criterion: str
    model: str
    base_url: str
    api_key: str

    @property
    def template(self) -> str:
        return JUDGE_TEMPLATE.replace("{criterion}", self.criterion)

    @property
    def version(self) -> str:
        return _digest({"criterion": self.criterion, "model": self.model})[:16]


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    selected: Selected
    arms: tuple[Arm, Arm]
    n: int
    seed: int
    forced: ProviderName | None
    endpoints: dict[ProviderName, Endpoint]
    judge: Judge | None
    concurrency: int
    retries: int
    timeout_s: float
    kind: str
    """"replay" (exp replay) or "ab" (exp ab, a whole turn)."""

    @property
    def calls(self) -> list[RecordedCall]:
        return self.selected.calls

    @property
    def per_repeat(self) -> bool:
        """One call: each repeat is a case of its own (the sample is the repeats), since one
        case with k trials would give an interval of zero width. Several calls: each call is a
        case, its repeats its trials."""
        return len(self.calls) == 1

    def unit(self, call: RecordedCall, repeat: int) -> tuple[str, int]:
        """The (case id, trial) a repeat of a call is saved as."""
        if self.per_repeat:
            return f"{call.case_id}/r{repeat + 1}", 0
        return call.case_id, repeat


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _graders(judge: Judge | None) -> list[dict[str, str]]:
    graders = [{"name": FIRST_ACTION, "kind": FIRST_ACTION, "version": FIRST_ACTION_VERSION}]
    if judge is not None:
        graders.append({"name": CRITERION, "kind": "llm", "version": judge.version})
    return graders


def experiment_rows(plan: ReplayPlan, ids: tuple[str, str]) -> list[ExperimentRow]:
    """Both arms' experiments, as created before the first call is sent."""
    session = plan.selected.session
    cases = [
        {
            "id": case_id,
            "input": call.prompt_text(),
            **({"expected": call.action.label()} if call.action is not None else {}),
        }
        for call in plan.calls
        for case_id in dict.fromkeys(plan.unit(call, k)[0] for k in range(plan.n))
    ]
    calls_hash = _digest([[call.trace_id, call.span_id] for call in plan.calls])
    created = utcnow()
    rows = []
    for arm, own, other in ((plan.arms[0], ids[0], ids[1]), (plan.arms[1], ids[1], ids[0])):
        spec = {
            "replay": {
                "command": plan.kind,
                "ref": plan.selected.ref,
                "traceId": session.trace_id,
                "projectId": session.project_id,
                "arm": arm.label,
                "vary": arm.shown,
                "changes": arm.changes,
                "provider": plan.forced,
                "n": plan.n,
                "seed": plan.seed,
                "criterion": None if plan.judge is None else plan.judge.criterion,
                "judgeModel": None if plan.judge is None else plan.judge.model,
            }
        }
        rows.append(
            ExperimentRow(
                id=own,
                kind="replay",
                name=arm.name,
                spec=spec,
                dataset_ref=f"{plan.kind} {plan.selected.ref} (session {session.trace_id})",
                dataset_version_id=None,
                dataset_hash=calls_hash,
                task_hash=_digest({"changes": arm.changes, "provider": plan.forced}),
                agent_files={},
                graders=_graders(plan.judge),
                cases=cases,
                selection={},
                failing_of=None,
                trials=1 if plan.per_repeat else plan.n,
                planned=len(plan.calls) * plan.n,
                concurrency=plan.concurrency,
                created_at=created,
                pair_id=other,
            )
        )
    return rows


def first_action_grade(call: RecordedCall, reply: Reply) -> GradeRow:
    base = {"grader": FIRST_ACTION, "kind": FIRST_ACTION, "version": FIRST_ACTION_VERSION}
    if call.action is None:
        return GradeRow(
            **base,
            score=None,
            passed=None,
            unscored="no_recorded_reply",
            reason="the span kept no reply, so there is no first action to match",
        )
    got = "neither a tool call nor text" if reply.action is None else reply.action.label()
    passed = reply.action is not None and reply.action.matches(call.action)
    return GradeRow(
        **base,
        score=1.0 if passed else 0.0,
        passed=passed,
        unscored=None,
        reason=f"recorded {call.action.label()}, replied {got}",
    )


async def judge_grade(judge: Judge, call: RecordedCall, reply: Reply) -> GradeRow:
    from neens.engine.llm_judge import LlmEndpoint, judge_with_llm

    endpoint = LlmEndpoint(base_url=judge.base_url, model=judge.model, api_key=judge.api_key)
    verdict = await judge_with_llm(
        endpoint,
        judge.template,
        JudgeCase(input=call.prompt_text(), output=reply.text, expected_output=None),
    )
    score = verdict.score
    return GradeRow(
        grader=CRITERION,
        kind="llm",
        version=judge.version,
        score=score,
        passed=None if score is None else score >= PASS_THRESHOLD - 1e-9,
        unscored=verdict.unscored_reason or (None if score is not None else "label_without_score"),
        reason=verdict.reason,
        prompt=verdict.prompt,
        raw_reply=verdict.raw_reply,
    )


def reply_cost(prices: PriceBook, reply: Reply, request: Request, provider: str) -> float | None:
    """What the reply cost at its reported usage; None (unpriced, never free) when the usage
    is missing or the model has no price."""
    if reply.input_tokens is None or reply.output_tokens is None:
        return None
    try:
        usd, _ = prices.cost(
            reply.model or request.model, provider, reply.input_tokens, reply.output_tokens
        )
    except PriceLookupError:
        try:  # the served model's dated name may be unknown where the requested one is not
            usd, _ = prices.cost(request.model, provider, reply.input_tokens, reply.output_tokens)
        except PriceLookupError:
            return None
    return usd


async def _one(
    client: httpx.AsyncClient,
    plan: ReplayPlan,
    arm: Arm,
    call: RecordedCall,
    trial: int,
) -> TrialRow:
    model = arm.model(call)
    provider = arm.provider(call, plan.forced)
    assert model is not None and provider is not None  # checked before anything was created
    request = Request.of(call, model, arm.changes)
    started = utcnow()
    clock = time.perf_counter()
    case_id, saved_trial = plan.unit(call, trial)
    base: dict[str, Any] = {"case_id": case_id, "trial": saved_trial, "started_at": started}
    try:
        reply = await send(client, plan.endpoints[provider], request, retries=plan.retries)
    except ProviderError as exc:
        return TrialRow(
            **base,
            status="error",
            error_kind=exc.kind,
            error=str(exc),
            output=None,
            passed=None,
            attempts=1,
            latency_ms=(time.perf_counter() - clock) * 1000,
            cost_usd=None,
            finished_at=utcnow(),
        )
    latency = (time.perf_counter() - clock) * 1000
    grades = [first_action_grade(call, reply)]
    if plan.judge is not None:
        grades.append(await judge_grade(plan.judge, call, reply))
    verdicts = [g.passed for g in grades if g.passed is not None]
    return TrialRow(
        **base,
        status="done",
        error_kind=None,
        error=None,
        output=reply.text,
        passed=all(verdicts) if verdicts else None,
        attempts=1,
        latency_ms=latency,
        cost_usd=reply_cost(plan.selected.prices, reply, request, provider),
        finished_at=utcnow(),
        grades=tuple(grades),
    )


async def run_replay(
    db: Database,
    plan: ReplayPlan,
    rows: list[ExperimentRow],
    progress: Callable[[TrialRow], None] = lambda trial: None,
) -> None:
    """Create both experiments, send every call, save each reply as it arrives, and mark the
    arms finished once every repeat is saved."""
    for row in rows:
        await create_experiment(db, row)
    writer = TrialWriter(db)
    gate = asyncio.Semaphore(plan.concurrency)
    timeout = httpx.Timeout(plan.timeout_s)

    async with httpx.AsyncClient(timeout=timeout) as client:

        async def work(index: int, call: RecordedCall, trial: int) -> None:
            async with gate:
                row = await _one(client, plan, plan.arms[index], call, trial)
            await writer.save(rows[index].id, row)
            progress(row)

        order = interleaved([plan.n, plan.n], plan.calls, plan.seed)
        await asyncio.gather(*(work(i, call, t) for i, call, t in order))
    for row in rows:
        await finish_experiment(db, row.id)
