"""Model sweeps in the database: planning, creating, rolling up, cancelling and spending.

A sweep launches its child runs itself: at create, the first run of every arm; then, each time
a child run finishes (its `run.finished` job calls `roll_up_sweep`), the arm's next run. So at
most one run per arm is in flight, each with its arm's share of the calls in flight
(`domain.sweeps.arm_shares`): a slow arm holds only its own share and never starves the others.
The roll-up is recomputed from the child runs every time, under the sweep's row lock, and is
idempotent: a roll-up that runs twice launches nothing twice (a slot's `run_id` is set once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.sweeps import (
    Conditions,
    arm_shares,
)
from neens.errors import NeensError, NotFound, Unprocessable
from neens.store.ids import new_id
from neens.store.judges import resolve_run_judges
from neens.store.models import (
    Dataset,
    DatasetItem,
    DatasetVersion,
    ModelSweep,
    PreprodItem,
    PreprodRun,
    SweepArm,
    SweepRun,
    TraceSession,
)
from neens.store.runs import NewRun, create_run_in, resolve_replayed_version
from neens.store.stress_suites import suite_version
from neens.store.tenancy import CONNECTION, SWEEP, in_project, owned, owned_by
from neens.store.types import storable_text, utcnow


@dataclass(frozen=True, slots=True)
class NewArm:
    label: str
    agent_connection_id: str


@dataclass(frozen=True, slots=True)
class NewSweep:
    name: str
    version_label: str
    dataset_id: str | None
    dataset_version_id: str | None
    pass_k: int
    budget_usd: float | None
    judge_ids: list[str] | None
    """None: the project's Primary Score, resolved and pinned at create."""
    gate: dict[str, Any]
    arms: list[NewArm]
    suite_id: str | None = None
    """A stress-test suite whose frozen version is replayed instead of a named one."""


@dataclass(frozen=True, slots=True)
class PlannedArm:
    label: str
    connection_id: str
    model: str | None
    provider: str | None


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """A sweep request checked against the project: what create would pin."""

    dataset_id: str
    dataset_version_id: str
    item_count: int
    judge_ids: list[str]
    arms: list[PlannedArm]
    conditions: Conditions


async def plan_sweep(s: AsyncSession, project_id: str, new: NewSweep) -> SweepPlan:
    """Resolve and check the request's references; refuses (422/404 naming the field) fewer
    than two arms, a label or a connection used twice, and anything a run would refuse."""
    if len(new.arms) < 2:
        raise Unprocessable("a sweep compares at least two arms: give two or more", field="arms")
    labels: dict[str, int] = {}
    connections: dict[str, int] = {}
    for index, arm in enumerate(new.arms):
        if arm.label in labels:
            raise Unprocessable(
                f"label {arm.label!r} is also arm {labels[arm.label]}'s: each arm needs its own",
                field=f"arms[{index}].label",
            )
        if arm.agent_connection_id in connections:
            raise Unprocessable(
                f"connection {arm.agent_connection_id} is also arm "
                f"{connections[arm.agent_connection_id]}'s: two arms on one endpoint are the "
                "same model twice, not a comparison",
                field=f"arms[{index}].agentConnectionId",
            )
        labels[arm.label] = index
        connections[arm.agent_connection_id] = index
    dataset_id, version_id = await _sweep_version(s, project_id, new)
    item_count = (
        await s.scalar(select(func.count()).where(DatasetItem.version_id == version_id)) or 0
    )
    if item_count == 0:
        raise Unprocessable(
            f"dataset version {version_id} has no items: there is nothing to sweep",
            field="datasetVersionId" if new.dataset_version_id else "datasetId",
        )
    try:
        judge_ids = await resolve_run_judges(s, project_id, new.judge_ids)
    except NeensError as exc:
        exc.field = (exc.field or "").replace("judge_deployment_ids", "judgeDeploymentIds")
        raise
    arms = []
    for index, arm in enumerate(new.arms):
        connection = await owned(
            s,
            CONNECTION,
            project_id,
            arm.agent_connection_id,
            field=f"arms[{index}].agentConnectionId",
        )
        arms.append(PlannedArm(arm.label, connection.id, connection.model, connection.provider))
    conditions = Conditions.of(
        dataset_version_id=version_id,
        judge_ids=judge_ids,
        pass_k=new.pass_k,
        version_label=new.version_label,
        gate=new.gate,
    )
    return SweepPlan(dataset_id, version_id, item_count, judge_ids, arms, conditions)


async def _sweep_version(s: AsyncSession, project_id: str, new: NewSweep) -> tuple[str, str]:
    """(dataset, version) from `suiteId`, or from `datasetId` and/or `datasetVersionId`."""
    if new.suite_id is not None:
        return await _suite_version(s, project_id, new, new.suite_id)
    dataset_id = new.dataset_id
    if dataset_id is None:
        if new.dataset_version_id is None:
            raise Unprocessable("give datasetId, datasetVersionId or suiteId", field="datasetId")
        dataset_id = await s.scalar(
            select(DatasetVersion.dataset_id)
            .join(Dataset, Dataset.id == DatasetVersion.dataset_id)
            .where(DatasetVersion.id == new.dataset_version_id, owned_by(Dataset, project_id))
        )
        if dataset_id is None:
            raise NotFound(
                f"no dataset version {new.dataset_version_id!r} in this project",
                field="datasetVersionId",
            )
    try:
        return await resolve_replayed_version(s, project_id, dataset_id, new.dataset_version_id)
    except NeensError as exc:
        exc.field = {"dataset_id": "datasetId", "dataset_version_id": "datasetVersionId"}.get(
            exc.field or "", exc.field
        )
        raise


async def _suite_version(
    s: AsyncSession, project_id: str, new: NewSweep, suite_id: str
) -> tuple[str, str]:
    """The suite's frozen (dataset, version); a `datasetId` or `datasetVersionId` given beside
    it must name the same, or the request is ambiguous (422 naming `suiteId`)."""
    dataset_id, version_id = await suite_version(s, project_id, suite_id, field="suiteId")
    for given, pinned, name in (
        (new.dataset_id, dataset_id, "datasetId"),
        (new.dataset_version_id, version_id, "datasetVersionId"),
    ):
        if given is not None and given != pinned:
            raise Unprocessable(
                f"suite {suite_id} replays version {version_id} of dataset {dataset_id}, but "
                f"{name} names {given!r}: give suiteId alone",
                field="suiteId",
            )
    return dataset_id, version_id


async def prompts_of(s: AsyncSession, version_id: str) -> list[tuple[str, str | None]]:
    """The frozen (input, expected output) pairs of a dataset version, in order."""
    rows = await s.execute(
        select(DatasetItem.input, DatasetItem.expected_output)
        .where(DatasetItem.version_id == version_id)
        .order_by(DatasetItem.position)
    )
    return [(str(i), e) for i, e in rows.all()]


async def token_history(
    s: AsyncSession, project_id: str, connection_id: str
) -> tuple[int, float, float] | None:
    """(calls, mean input tokens, mean output tokens) of the answers earlier push runs got
    through this connection that reported their usage; None when there are none."""
    row = (
        await s.execute(
            select(
                func.count(),
                func.avg(TraceSession.input_tokens),
                func.avg(TraceSession.output_tokens),
            )
            .select_from(PreprodItem)
            .join(PreprodRun, PreprodRun.id == PreprodItem.run_id)
            .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(
                owned_by(PreprodRun, project_id),
                PreprodRun.agent_connection_id == connection_id,
                TraceSession.input_tokens.is_not(None),
                TraceSession.output_tokens.is_not(None),
            )
        )
    ).one()
    calls, mean_in, mean_out = row
    if not calls:
        return None
    return int(calls), float(mean_in), float(mean_out)


async def create_sweep(
    s: AsyncSession, project_id: str, new: NewSweep, plan: SweepPlan, *, concurrency: int
) -> str:
    """Store the sweep, its arms and their k slots, and launch every arm's first run, in the
    caller's transaction. `concurrency` is the calls the whole sweep may have in flight."""
    sweep_id = new_id("msw-")
    s.add(
        ModelSweep(
            id=sweep_id,
            project_id=project_id,
            name=new.name,
            version_label=new.version_label,
            dataset_id=plan.dataset_id,
            dataset_version_id=plan.dataset_version_id,
            item_count=plan.item_count,
            pass_k=new.pass_k,
            budget_usd=new.budget_usd,
            judge_ids=plan.judge_ids,
            gate=new.gate,
            fingerprint=plan.conditions.fingerprint(),
            status="running",
            created_at=utcnow(),
        )
    )
    shares = arm_shares(concurrency, len(plan.arms))
    for position, (arm, share) in enumerate(zip(plan.arms, shares, strict=True)):
        arm_id = new_id("msa-")
        s.add(
            SweepArm(
                id=arm_id,
                sweep_id=sweep_id,
                position=position,
                label=arm.label,
                agent_connection_id=arm.connection_id,
                model=arm.model,
                model_provider=arm.provider,
                concurrency=share,
                status="pending",
            )
        )
        s.add_all(
            SweepRun(sweep_id=sweep_id, arm_id=arm_id, attempt=attempt)
            for attempt in range(new.pass_k)
        )
    await s.flush()
    sweep = await s.get_one(ModelSweep, sweep_id)
    for arm_row in await arms_of(s, sweep_id):
        await launch(s, sweep, arm_row, 0)
    return sweep_id


async def arms_of(s: AsyncSession, sweep_id: str) -> list[SweepArm]:
    return list(
        await s.scalars(
            select(SweepArm).where(SweepArm.sweep_id == sweep_id).order_by(SweepArm.position)
        )
    )


async def launch(s: AsyncSession, sweep: ModelSweep, arm: SweepArm, attempt: int) -> None:
    """Create the arm's run `attempt` (once: a slot already launched is left alone), or fail
    the arm with the reason when the run cannot be created (its connection was deleted)."""
    slot = await s.scalar(
        select(SweepRun).where(SweepRun.arm_id == arm.id, SweepRun.attempt == attempt)
    )
    if slot is None or slot.run_id is not None:
        return
    new = NewRun(
        name=f"{sweep.name} · {arm.label} · run {attempt + 1} of {sweep.pass_k}",
        dataset_id=sweep.dataset_id,
        dataset_version_id=sweep.dataset_version_id,
        version_label=sweep.version_label,
        runner_mode="push",
        agent_connection_id=arm.agent_connection_id,
        judge_ids=list(sweep.judge_ids),
        baseline=None,
        gate=dict(sweep.gate),
    )
    try:
        async with s.begin_nested():
            run_id = await create_run_in(s, sweep.project_id, new, push_concurrency=arm.concurrency)
    except NeensError as exc:
        arm.status = "failed"
        arm.error = storable_text(f"run {attempt + 1} could not be created: {exc.message}")
        return
    slot.run_id = run_id
    arm.status = "running"


async def sweep_spend(s: AsyncSession, sweep_id: str) -> tuple[float, int]:
    """(USD spent by the sweep's child runs on priced calls, calls whose cost is unknown)."""
    run_ids = select(SweepRun.run_id).where(
        SweepRun.sweep_id == sweep_id, SweepRun.run_id.is_not(None)
    )
    spent, unpriced = (
        await s.execute(
            select(
                func.coalesce(func.sum(TraceSession.cost_usd), 0.0),
                func.count().filter(TraceSession.cost_usd.is_(None)),
            )
            .select_from(PreprodItem)
            .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id.in_(run_ids))
        )
    ).one()
    return float(spent or 0.0), int(unpriced or 0)


async def sweep_of_run(s: AsyncSession, run_id: str) -> tuple[str, float | None] | None:
    """(sweep id, budget) of the sweep a run belongs to, or None for a run of its own."""
    row = (
        await s.execute(
            select(ModelSweep.id, ModelSweep.budget_usd)
            .join(SweepRun, SweepRun.sweep_id == ModelSweep.id)
            .where(SweepRun.run_id == run_id)
        )
    ).first()
    return None if row is None else (row[0], row[1])


async def get_sweep_row(s: AsyncSession, project_id: str, sweep_id: str) -> ModelSweep:
    return await owned(s, SWEEP, project_id, sweep_id)


SweepKey = tuple[Any, str]


async def list_sweep_rows(
    s: AsyncSession, project_id: str, *, limit: int, after: SweepKey | None
) -> tuple[list[ModelSweep], SweepKey | None]:
    """Newest first, from after `after`; the page and where it ends (None on the last)."""
    query = in_project(ModelSweep, project_id).order_by(
        ModelSweep.created_at.desc(), ModelSweep.id.desc()
    )
    if after is not None:
        created, ident = after
        query = query.where(
            (ModelSweep.created_at < created)
            | ((ModelSweep.created_at == created) & (ModelSweep.id < ident))
        )
    rows = list(await s.scalars(query.limit(limit + 1)))
    page = rows[:limit]
    end = (page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return page, end
