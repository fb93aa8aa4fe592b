"""Running an experiment's case-trials, N at a time, saving each as it finishes.

A case-trial is saved in one transaction with its grades once the task has answered (or
failed) and every grader has run, and never before: a run killed at any moment (Ctrl-C, a crash,
`kill -9`, a reboot) has lost only the case-trials in flight, and `--resume` runs exactly those.

Retries (`--retries N`, default 3) are for infra errors only, after 0.5 s, 1 s, 2 s, … (at most
10 s) between attempts; an agent error is recorded at once. `--trial-timeout SEC` bounds a
case-trial's task, retries and waits included: when it runs out, the case-trial is an agent
error (an infra error when it was waiting to retry one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from neens.exp.datasets import Case
from neens.exp.graders import ReadyGrader, grade
from neens.exp.plan import Plan
from neens.exp.progress import RunProgress
from neens.exp.spec import CommandTask, HttpTask
from neens.exp.tasks import (
    Attempt,
    ErrorKind,
    Feedback,
    TaskContext,
    run_command,
    run_http,
)
from neens.store.db import Database
from neens.store.experiments import GradeRow, TrialRow, TrialWriter
from neens.store.types import utcnow

RETRY_BASE_S: Final = 0.5
RETRY_MAX_S: Final = 10.0
DEFAULT_RETRIES: Final = 3


@dataclass(frozen=True, slots=True)
class RunLimits:
    concurrency: int
    retries: int = DEFAULT_RETRIES
    trial_timeout_s: float | None = None


def backoff_s(attempt: int) -> float:
    """The wait before retry number `attempt` (0-based): 0.5 s doubling, at most 10 s."""
    return float(min(RETRY_BASE_S * 2**attempt, RETRY_MAX_S))


class Caller:
    """Calls the task once for a case; holds the HTTP client of an http task."""

    def __init__(self, plan: Plan, context: TaskContext, headers: dict[str, str]) -> None:
        self.plan = plan
        self.context = context
        self.headers = headers
        self._client: Any = None

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Caller]:
        if not isinstance(self.plan.spec.task, HttpTask):
            yield self
            return
        from neens.engine.agent_client import AgentClient

        async with AgentClient(allow_private=True) as client:
            self._client = client
            yield self

    async def call(self, case: Case, trial: int, feedback: Feedback | None = None) -> Attempt:
        task = self.plan.spec.task
        if isinstance(task, CommandTask):
            return await run_command(task, case, trial, self.context, feedback)
        return await run_http(self._client, task, self.headers, case, self.context, feedback)


async def _attempts(
    caller: Caller,
    case: Case,
    trial: int,
    limits: RunLimits,
    feedback: Feedback | None = None,
) -> tuple[Attempt, int]:
    """The task's final attempt for this case-trial and how many calls it took."""
    state: dict[str, Any] = {"last": None, "calls": 0, "waiting": False}

    async def attempt_all() -> Attempt:
        for retry in range(limits.retries + 1):
            state["calls"] += 1
            result = await caller.call(case, trial, feedback)
            state["last"] = result
            if not result.retryable or retry == limits.retries:
                return result
            state["waiting"] = True
            await asyncio.sleep(backoff_s(retry))
            state["waiting"] = False
        raise AssertionError("unreachable")

    if limits.trial_timeout_s is None:
        result = await attempt_all()
        return result, state["calls"]
    try:
        async with asyncio.timeout(limits.trial_timeout_s):
            result = await attempt_all()
    except TimeoutError:
        last: Attempt | None = state["last"]
        kind: ErrorKind = "infra" if state["waiting"] and last is not None else "agent"
        detail = f"; the last attempt: {last.error}" if last is not None and last.error else ""
        return (
            Attempt(
                None,
                f"the case-trial took longer than --trial-timeout {limits.trial_timeout_s:g} s "
                f"({state['calls']} attempts){detail}",
                kind,
            ),
            state["calls"],
        )
    return result, state["calls"]


async def grade_answer(
    graders: list[ReadyGrader], case: Case, output: str | None, cwd: Path
) -> tuple[tuple[GradeRow, ...], bool | None]:
    """Every grader's verdict on one answer, and whether the case-trial passed: every grader
    that gave a verdict passed it (None when none gave one: ungraded)."""
    grades = await asyncio.gather(*(grade(g, case, output, cwd) for g in graders))
    verdicts = [g.passed for g in grades if g.passed is not None]
    rows = tuple(GradeRow.of(g) for g in grades)
    return rows, (all(verdicts) if verdicts else None)


async def run_one(
    writer: TrialWriter, plan: Plan, caller: Caller, case: Case, trial: int, limits: RunLimits
) -> TrialRow:
    """Run, grade and save one case-trial."""
    started = utcnow()
    attempt, calls = await _attempts(caller, case, trial, limits)
    grades: tuple[GradeRow, ...] = ()
    passed = None
    if attempt.error is None:
        grades, passed = await grade_answer(plan.graders, case, attempt.output, plan.cwd)
    seq_passed_at: int | None = None
    seq_log: list[dict[str, Any]] | None = None
    if plan.seq > 1 and passed is not None:
        seq_passed_at, seq_log = await _sequence(
            plan, caller, case, trial, limits, attempt, grades, passed
        )
    row = TrialRow(
        case_id=case.id,
        trial=trial,
        status="error" if attempt.error is not None else "done",
        error_kind=attempt.error_kind,
        error=attempt.error,
        output=attempt.output,
        passed=passed,
        attempts=calls,
        latency_ms=attempt.latency_ms,
        cost_usd=attempt.cost_usd,
        started_at=started,
        finished_at=utcnow(),
        grades=grades,
        seq_passed_at=seq_passed_at,
        seq_log=seq_log,
    )
    await writer.save(caller.context.experiment_id, row)
    return row


async def _sequence(
    plan: Plan,
    caller: Caller,
    case: Case,
    trial: int,
    limits: RunLimits,
    first: Attempt,
    grades: tuple[GradeRow, ...],
    passed: bool,
) -> tuple[int | None, list[dict[str, Any]]]:
    """--seq: while the case-trial fails, try again with the failing graders' reasons as
    feedback, up to `plan.seq` attempts in all. The attempt that first passed (None if none
    did), and a log of every attempt after the first."""
    log: list[dict[str, Any]] = []
    if passed:
        return 1, log
    output = first.output or ""
    for number in range(2, plan.seq + 1):
        reasons = "\n".join(f"{g.grader}: {g.reason}" for g in grades if g.passed is False)
        feedback = Feedback(attempt=number, previous_output=output, reasons=reasons)
        attempt, calls = await _attempts(caller, case, trial, limits, feedback)
        entry: dict[str, Any] = {"attempt": number, "feedback": reasons, "calls": calls}
        if attempt.error is not None:
            entry.update(error=attempt.error, errorKind=attempt.error_kind)
            log.append(entry)
            return None, log
        grades, verdict = await grade_answer(plan.graders, case, attempt.output, plan.cwd)
        entry.update(output=attempt.output, passed=verdict)
        log.append(entry)
        if verdict:
            return number, log
        if verdict is None:
            return None, log
        output = attempt.output or ""
    return None, log


async def run_trials(
    db: Database,
    plan: Plan,
    callers: list[Caller],
    todo: Iterable[tuple[int, Case, int]],
    limits: RunLimits,
    progress: RunProgress,
) -> None:
    """Run every (caller index, case, trial) of `todo`, `limits.concurrency` at a time, in
    order. One caller per experiment being run: one for `exp run`, two for `exp aa`.

    No more workers start than there are case-trials to run: a `--concurrency` far above the
    work would otherwise create that many idle tasks before the first call."""
    items = list(todo)
    queue = iter(items)
    writer = TrialWriter(db)

    async def worker() -> None:
        for index, case, trial in queue:
            row = await run_one(writer, plan, callers[index], case, trial, limits)
            progress.advance(error=row.status == "error", cost_usd=row.cost_usd)

    async with contextlib.AsyncExitStack() as stack:
        for caller in callers:
            await stack.enter_async_context(caller.open())
        async with asyncio.TaskGroup() as group:
            for _ in range(min(limits.concurrency, len(items))):
                group.create_task(worker())
