"""Push mode: Neens calls the agent endpoint once per frozen prompt and records each answer.

The job re-derives what is left from table state — it calls only items still `pending` — so a
server that stops mid-run resumes where it was (an item whose call was in flight is called
again). Each answer becomes a session (trace id `<run id>:<item id>`, so a repeated call merges
into the same session rather than making a second one) and is linked to its item. One endpoint
failure costs one item, recorded with its reason; when every item failed the run is `failed`.

An answer is checked before it is written (a NUL or a lone surrogate cannot be stored), and a
batch the database still refuses is written again item by item, so one bad reply errors its own
item, once, instead of sinking the job and with it every healthy item of the batch.

Scoring keeps pace with the calls. When every judge of the run is deterministic (built-in checks
and composites of them), each answer is judged in the transaction that stores it, so an item goes
from `pending` to `scored` (or `error`) in one commit. Otherwise an item is stored `captured` and
judged at once, concurrently with the remaining calls, at most `judge_concurrency` items at a
time, its verdicts written as they return. The write that scores a run's last item also finishes
the run (`scoring.finish_run_in`). Only items the job captured but could not judge (a worker
that stopped mid-run) are left to the `preprod.score` job, dispatched once no item is pending.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.conventions import DATASET_ITEM_ID_KEY, EVAL_RUN_ID_KEY, VERSION_LABEL_KEY
from neens.domain.judges import JudgeCase
from neens.domain.spans import SpanRecord
from neens.domain.storable import record_unstorable_reason, unstorable_text_reason
from neens.engine.agent_call import AgentCallFailed, AgentEndpoint, AgentReply, call_agent
from neens.engine.batching import BatchWriter, batch_writer, refusal, write_or_split
from neens.engine.judging import Outbound, deterministic, outbound_of
from neens.engine.scoring import Judged, finish_run_in, judge_item, mark_refused, store_items
from neens.queue.worker import JobContext
from neens.secrets import SecretKeyError
from neens.store.db import Database
from neens.store.judges import JudgeInfo, judges_by_id
from neens.store.models import AgentConnection, PreprodItem, PreprodRun, TraceSession
from neens.store.run_lifecycle import move
from neens.store.run_liveness import fail_run
from neens.store.runs import dispatch_scoring_once, mark_item_error
from neens.store.sessions import write_spans
from neens.store.sweep_rollup import cancel_for_budget
from neens.store.sweeps import sweep_of_run
from neens.store.tenancy import owned_by
from neens.store.types import utcnow

log = logging.getLogger("neens.push")


def push_trace_id(run_id: str, item_id: str) -> str:
    return f"{run_id}:{item_id}"


def reply_spans(run: PreprodRun, item_id: str, prompt: str, reply: AgentReply) -> list[SpanRecord]:
    """The session recorded for one answer: an agent span, and an LLM span when usage came back.

    The LLM span carries the run's frozen model (or the model the reply names), so the session is
    priced like any other; without usage in the reply there is no LLM span and no cost claim.
    """
    trace_id = push_trace_id(run.id, item_id)
    ended = utcnow()
    started = ended - timedelta(milliseconds=reply.latency_ms)
    correlation = {
        EVAL_RUN_ID_KEY: run.id,
        DATASET_ITEM_ID_KEY: item_id,
        VERSION_LABEL_KEY: run.version_label,
    }
    root = SpanRecord(
        trace_id=trace_id,
        span_id="agent",
        parent_span_id=None,
        name="agent.call",
        kind="agent",
        start_time=started,
        end_time=ended,
        status_code="ok",
        status_message=None,
        attributes={**correlation, "neens.agent_connection_id": run.agent_connection_id},
        input=prompt,
        output=reply.answer,
        agent_name=reply.agent_name,
    )
    spans = [root]
    model = reply.model or run.model
    if reply.input_tokens is not None or reply.output_tokens is not None:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model is not None:
            attributes["gen_ai.request.model"] = model
        if reply.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = reply.input_tokens
        if reply.output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = reply.output_tokens
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id="llm",
                parent_span_id="agent",
                name="chat",
                kind="llm",
                start_time=started,
                end_time=ended,
                status_code="ok",
                status_message=None,
                attributes=attributes,
            )
        )
    return spans


async def run_push(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Job `preprod.push`: call every pending item of the run, then finish or dispatch scoring."""
    db = ctx.db
    run_id = str(payload["run_id"])
    async with db.read() as s:
        run = await s.get(PreprodRun, run_id)
        connection = (
            await s.get(AgentConnection, run.agent_connection_id)
            if run is not None and run.agent_connection_id
            else None
        )
        if run is None or run.status != "running":
            return
        judges = await judges_by_id(s, run.project_id, list(run.judge_ids))
        pending = list(
            (
                await s.execute(
                    select(PreprodItem.item_id, PreprodItem.input, PreprodItem.expected_output)
                    .where(PreprodItem.run_id == run_id, PreprodItem.status == "pending")
                    .order_by(PreprodItem.position)
                )
            ).all()
        )
    if connection is None:
        await fail_run(db, run_id, "the run's agent connection no longer exists")
        return
    try:
        headers = db.secrets.open_headers(connection.headers, what=f"connection {connection.id}")
    except SecretKeyError as exc:
        await fail_run(db, run_id, str(exc))
        return
    endpoint = AgentEndpoint(
        url=connection.url,
        request_format=connection.request_format,
        answer_path=connection.answer_path,
        headers=headers,
        # The model sent is the one frozen on the run, never the connection's current one.
        model=run.model,
    )
    client = ctx.agents
    settings = ctx.settings
    slots = _Slots(run.push_concurrency or settings.push_concurrency)
    async with db.read() as s:
        parent = await sweep_of_run(s, run_id)
    budgeted = parent[0] if parent is not None and parent[1] is not None else None
    watch = _CancelWatch(db, run_id, budgeted_sweep=budgeted, slots=slots)

    scoring = _Scoring(judges, list(run.judge_ids), outbound_of(ctx))
    judge_slots = asyncio.Semaphore(settings.judge_concurrency)

    async def one(
        outcomes: BatchWriter[_Outcome], item_id: str, prompt: str, expected: str | None
    ) -> None:
        async with slots:
            if await watch.cancelled():
                return
            try:
                reply: AgentReply | str = await call_agent(
                    client,
                    endpoint,
                    prompt,
                    run_id=run_id,
                    item_id=item_id,
                    version_label=run.version_label,
                    timeout_s=settings.push_timeout_s,
                )
            except AgentCallFailed as failure:
                reply = failure.reason
            except Exception as exc:  # a reply no guardrail foresaw costs its item, not the run
                log.exception("push call for item %s of run %s failed", item_id, run_id)
                reply = f"Neens could not read the endpoint's reply ({type(exc).__name__})"
            await outcomes.put(_Outcome(item_id, prompt, reply, expected))

    async def judge(verdicts: BatchWriter[Judged], item: _Captured) -> None:
        async with judge_slots:
            if await watch.cancelled():
                return
            judged = await judge_item(
                scoring.judges,
                scoring.judge_ids,
                item.item_id,
                item.session_pk,
                item.case,
                scoring.outbound,
            )
        await verdicts.put(judged)

    # What is still to store, so that only the write that can be the run's last looks for the
    # end (a run cancelled part-way, or a write split up, ends in `_finish_calls` below).
    answers_left = len(pending)
    verdicts_left = 0

    async def store_verdicts(batch: list[Judged]) -> None:
        nonlocal verdicts_left
        last = answers_left == 0 and verdicts_left == len(batch)
        await write_or_split(
            batch,
            lambda entries: _write_verdicts(db, run, scoring.names, entries, finish=last),
            lambda judged, exc: mark_refused(db, run_id, judged, exc),
            "verdicts",
        )
        verdicts_left -= len(batch)

    judging: set[asyncio.Task[None]] = set()
    async with batch_writer(store_verdicts) as verdicts:

        async def store(batch: list[_Outcome]) -> None:
            nonlocal answers_left, verdicts_left
            last = answers_left == len(batch)
            captured = await _store_batch(db, run, batch, scoring, finish=last)
            answers_left -= len(batch)
            verdicts_left += len(captured)
            for item in captured:
                judging.add(asyncio.create_task(judge(verdicts, item)))

        try:
            async with batch_writer(store) as outcomes:
                await asyncio.gather(*(one(outcomes, *row) for row in pending))
            await asyncio.gather(*judging)
        finally:
            for task in judging:
                task.cancel()
    await _finish_calls(db, run_id)
    ctx.notify()


@dataclass(frozen=True, slots=True)
class _Scoring:
    """The run's judges, as the push job scores its answers."""

    judges: dict[str, JudgeInfo]
    judge_ids: list[str]
    outbound: Outbound

    @property
    def names(self) -> dict[str, str]:
        return {judge_id: info.name for judge_id, info in self.judges.items()}

    @property
    def inline(self) -> bool:
        """Whether every judge scores without a network call, so in the write that stores the
        answer."""
        return all(deterministic(self.judges, judge_id) for judge_id in self.judge_ids)


@dataclass(frozen=True, slots=True)
class _Captured:
    """An item stored `captured`, to be judged by an LLM judge."""

    item_id: str
    session_pk: int
    case: JudgeCase


@dataclass(frozen=True, slots=True)
class _Outcome:
    item_id: str
    prompt: str
    reply: AgentReply | str
    """The answer, or the reason there is none."""
    expected: str | None = None


async def _store_batch(
    db: Database,
    run: PreprodRun,
    batch: list[_Outcome],
    scoring: _Scoring,
    *,
    finish: bool,
) -> list[_Captured]:
    """Store a batch; when the database refuses it, store its outcomes one by one, so only the
    outcome it refuses errors (a lost connection or lock is not the data's fault: it raises).
    Returns the items stored `captured`, which an LLM judge is still to score. With `finish`,
    the write finishes the run when nothing of it is left to do."""
    captured: list[_Captured] = []

    async def refused(entry: tuple[_Outcome, list[SpanRecord]], exc: Exception) -> None:
        outcome = entry[0]
        log.warning("the answer of item %s of run %s was refused", outcome.item_id, run.id)
        error = f"the answer cannot be stored: the database refused it ({refusal(exc)})"
        entry_error: list[tuple[_Outcome, list[SpanRecord]]] = [
            (_Outcome(outcome.item_id, outcome.prompt, error), [])
        ]
        await _write(db, run, entry_error, scoring, finish=False)

    async def write(entries: list[tuple[_Outcome, list[SpanRecord]]]) -> None:
        captured.extend(await _write(db, run, entries, scoring, finish=finish))

    await write_or_split(
        [_checked(run, o) for o in batch],
        write,
        refused,
        "push answers",
        # an item error that was refused would only be written again
        refusable=lambda entry: not isinstance(entry[0].reply, str),
    )
    return captured


def _checked(run: PreprodRun, outcome: _Outcome) -> tuple[_Outcome, list[SpanRecord]]:
    """The outcome with its session's spans, or turned into an error when they cannot be stored."""
    reply = outcome.reply
    if isinstance(reply, str):
        return outcome, []
    spans = reply_spans(run, outcome.item_id, outcome.prompt, reply)
    error = None
    if (reason := unstorable_text_reason(reply.answer)) is not None:
        error = f"the answer cannot be stored: it {reason}, which the database refuses"
    elif (reason := unstorable_text_reason(reply.model)) is not None:
        error = f"the answer cannot be stored: the model the reply names {reason}"
    else:
        reasons = (record_unstorable_reason(span) for span in spans)
        if (reason := next((r for r in reasons if r is not None), None)) is not None:
            error = f"the answer cannot be stored: its recorded {reason}"
    if error is not None:
        return _Outcome(outcome.item_id, outcome.prompt, error, outcome.expected), []
    return outcome, spans


async def _write(
    db: Database,
    run: PreprodRun,
    checked: list[tuple[_Outcome, list[SpanRecord]]],
    scoring: _Scoring,
    *,
    finish: bool,
) -> list[_Captured]:
    """Record the answers as sessions, then in one transaction link them to their items and
    score them (deterministic judges) or leave them `captured` for an LLM judge, error the items
    without an answer, and finish the run when that was its last item."""
    spans = [span for _, outcome_spans in checked for span in outcome_spans]
    answered = {o.item_id: o for o, outcome_spans in checked if outcome_spans}
    if spans:
        await write_spans(db, run.project_id, spans, source="push")
    captured: list[_Captured] = []
    async with db.write() as s:
        # The run's row first, as `finish_run_in` takes it: one lock order for every writer.
        status = await s.scalar(
            select(PreprodRun.status).where(PreprodRun.id == run.id).with_for_update()
        )
        for o, _ in checked:
            if isinstance(o.reply, str):
                await mark_item_error(s, run.id, o.item_id, o.reply)
        if answered:
            captured = await _link(s, run, answered)
        if status == "running" and scoring.inline and captured:
            judged = [
                await judge_item(
                    scoring.judges,
                    scoring.judge_ids,
                    c.item_id,
                    c.session_pk,
                    c.case,
                    scoring.outbound,
                )
                for c in captured
            ]
            await store_items(s, run, scoring.names, judged)
            captured = []
        if status == "running" and finish:
            await finish_if_done(s, run.id)
    return captured if status == "running" else []


async def _link(s: AsyncSession, run: PreprodRun, answered: dict[str, _Outcome]) -> list[_Captured]:
    """Link each answered item to its session and mark it `captured`; returns the items this
    linked, each with the case its judges score (the session's output, as stored)."""
    trace_ids = {push_trace_id(run.id, item_id): item_id for item_id in answered}
    rows = (
        await s.execute(
            select(TraceSession.pk, TraceSession.trace_id, TraceSession.output).where(
                owned_by(TraceSession, run.project_id),
                TraceSession.trace_id.in_(list(trace_ids)),
            )
        )
    ).all()
    sessions = {trace_ids[trace_id]: (pk, output) for pk, trace_id, output in rows}
    if not sessions:
        return []
    items = cast(Table, PreprodItem.__table__)
    await s.execute(
        update(items)
        .where(
            items.c.run_id == run.id,
            items.c.item_id == bindparam("b_item"),
            items.c.status == "pending",
        )
        .values(status="captured", session_pk=bindparam("b_session"), captured_at=utcnow()),
        [{"b_item": item_id, "b_session": pk} for item_id, (pk, _) in sessions.items()],
    )
    linked = await s.scalars(
        select(PreprodItem.item_id).where(
            PreprodItem.run_id == run.id,
            PreprodItem.item_id.in_(list(sessions)),
            PreprodItem.status == "captured",
        )
    )
    result = []
    for item_id in linked:
        pk, output = sessions[item_id]
        o = answered[item_id]
        result.append(_Captured(item_id, pk, JudgeCase(o.prompt, output, o.expected)))
    return result


async def _write_verdicts(
    db: Database, run: PreprodRun, names: dict[str, str], batch: list[Judged], *, finish: bool
) -> None:
    """Store LLM-judged items' verdicts, finishing the run in the same transaction when they
    were its last."""
    async with db.write() as s:
        status = await s.scalar(
            select(PreprodRun.status).where(PreprodRun.id == run.id).with_for_update()
        )
        await store_items(s, run, names, batch)
        if status == "running" and finish:
            await finish_if_done(s, run.id)


class _Slots:
    """Calls in flight at once, up to a limit that may change while the run goes on: a sweep
    hands the share of an arm that is done to the arms still running (`sweep_rollup`). A
    lower limit lets the calls in flight finish and starts no new one until below it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._in_use = 0
        self._free = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._free:
            await self._free.wait_for(lambda: self._in_use < self.limit)
            self._in_use += 1

    async def __aexit__(self, *_: object) -> None:
        async with self._free:
            self._in_use -= 1
            self._free.notify()

    async def resize(self, limit: int) -> None:
        async with self._free:
            self.limit = limit
            self._free.notify_all()


class _CancelWatch:
    """Whether the run was cancelled, read from the database at most every `interval_s`, so a
    thousand calls do not cost a thousand reads; the same read picks up a new `push_concurrency`
    (a sweep rebalancing its arms) for `slots`."""

    def __init__(
        self,
        db: Database,
        run_id: str,
        interval_s: float = 0.25,
        *,
        budgeted_sweep: str | None = None,
        slots: _Slots | None = None,
    ) -> None:
        self.db = db
        self.run_id = run_id
        self.interval_s = interval_s
        self.budgeted_sweep = budgeted_sweep
        """The sweep whose budget this run spends, if it has one: crossing it cancels the sweep
        (and so this run) before the next call."""
        self.slots = slots
        self._checked = -float("inf")
        self._cancelled = False
        self._lock = asyncio.Lock()

    async def cancelled(self) -> bool:
        async with self._lock:
            now = asyncio.get_running_loop().time()
            if not self._cancelled and now - self._checked >= self.interval_s:
                self._checked = now
                if self.budgeted_sweep is not None and await cancel_for_budget(
                    self.db, self.budgeted_sweep
                ):
                    self._cancelled = True
                    return True
                async with self.db.read() as s:
                    row = (
                        await s.execute(
                            select(PreprodRun.status, PreprodRun.push_concurrency).where(
                                PreprodRun.id == self.run_id
                            )
                        )
                    ).first()
                self._cancelled = row is None or row.status != "running"
                limit = None if row is None else row.push_concurrency
                if self.slots is not None and limit is not None and limit != self.slots.limit:
                    await self.slots.resize(limit)
            return self._cancelled


async def _finish_calls(db: Database, run_id: str) -> None:
    """After the calls: finish the run when every item is scored or errored (the last write
    normally did), fail it when nothing was captured, or dispatch the scoring job for items
    captured and not judged (a worker stopped mid-run)."""
    async with db.write() as s:
        await finish_if_done(s, run_id, dispatch=True)


async def finish_if_done(s: AsyncSession, run_id: str, *, dispatch: bool = False) -> None:
    """Once no item of a running push run is pending: fail it when no item was answered, else
    finish it (`scoring.finish_run_in`) when no item waits for a judge either; with `dispatch`,
    hand the items still waiting to the `preprod.score` job."""
    run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
    if run is None or run.status != "running":
        return
    counts = dict(
        (
            await s.execute(
                select(PreprodItem.status, func.count())
                .where(PreprodItem.run_id == run_id)
                .group_by(PreprodItem.status)
            )
        ).all()
    )
    if counts.get("pending"):
        return  # calls still to make: cancelled part-way, or another worker still calling
    answered = await s.scalar(
        select(func.count()).where(
            PreprodItem.run_id == run_id, PreprodItem.session_pk.is_not(None)
        )
    )
    if not answered:
        error = "every item failed: the agent endpoint produced no answer (see items)"
        await move(s, run, "failed", error=error)
        return
    if counts.get("captured"):
        if dispatch:
            await dispatch_scoring_once(s, run_id)
        return
    await finish_run_in(s, run_id)
