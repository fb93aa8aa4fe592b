"""Imported pre-prod runs: another tool's results on a golden dataset, stored as a finished run.

`neens import … --server` (or any client) sends the run's per-item results in one request; the
run is created, its items filled in and the run finished in one transaction, so nothing is ever
half-written and no worker ever sees it unfinished. The run is read-only afterwards: it accepts
no traces (its mode is `import`, not `runner`), it cannot be cancelled and no item error can be
reported on it.

Each dataset item of the replayed version must have exactly one result, with one entry per
repeat the tool ran. An item's verdict over its repeats is strict: it passed when every repeat
that gave a verdict passed (a repeat that errored without one counts as failed), and is `error`
when every repeat errored. Its score is the mean of the repeats' scores. What the tool did not
record (cost, latency, a score) stays None, and the run's `imported.unknown` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.run_lifecycle import IMPORT_MODE, ItemStatus
from neens.errors import Unprocessable
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.models import DatasetItem, PreprodItem, PreprodRun
from neens.store.run_lifecycle import move, open_run
from neens.store.runs import resolve_replayed_version
from neens.store.types import utcnow


@dataclass(frozen=True, slots=True)
class ImportedTrial:
    """One repeat of one item, as the tool recorded it."""

    trial: int
    output: str | None
    score: float | None
    passed: bool | None
    error: str | None
    cost_usd: float | None
    latency_ms: float | None

    def verdict(self) -> bool | None:
        """The repeat's pass/fail: the tool's verdict, else failed when it errored."""
        if self.passed is not None:
            return self.passed
        return False if self.error is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial,
            "output": self.output,
            "score": self.score,
            "passed": self.passed,
            "error": self.error,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
        }


@dataclass(frozen=True, slots=True)
class ImportedItem:
    item_id: str
    trials: tuple[ImportedTrial, ...]


@dataclass(frozen=True, slots=True)
class NewImportedRun:
    name: str
    dataset_id: str
    dataset_version_id: str | None
    version_label: str
    model: str | None
    gate: dict[str, Any]
    imported: dict[str, Any]
    """Where the run came from and `unknown` (field → reason), stored as given."""
    items: tuple[ImportedItem, ...]


@dataclass(frozen=True, slots=True)
class ItemResult:
    """An item's stored outcome over its repeats."""

    status: ItemStatus
    output: str | None
    score: float | None
    passed: bool | None
    error: str | None


def item_result(trials: tuple[ImportedTrial, ...]) -> ItemResult:
    """Fold an item's repeats into its verdict (see the module docstring)."""
    ordered = sorted(trials, key=lambda t: t.trial)
    output = next((t.output for t in ordered if t.output is not None), None)
    if all(t.error is not None and t.passed is None and t.score is None for t in ordered):
        return ItemResult("error", output, None, None, ordered[0].error)
    scores = [t.score for t in ordered if t.score is not None]
    verdicts = [v for t in ordered if (v := t.verdict()) is not None]
    return ItemResult(
        "scored",
        output,
        sum(scores) / len(scores) if scores else None,
        all(verdicts) if verdicts else None,
        None,
    )


async def create_imported_run(db: Database, project_id: str, new: NewImportedRun) -> str:
    """Store `new` as a finished run over the dataset's version; return its id."""
    async with db.write() as s:
        return await _create_in(s, project_id, new)


async def _create_in(s: AsyncSession, project_id: str, new: NewImportedRun) -> str:
    dataset_id, version_id = await resolve_replayed_version(
        s, project_id, new.dataset_id, new.dataset_version_id
    )
    frozen = {
        row.id: row
        for row in await s.scalars(select(DatasetItem).where(DatasetItem.version_id == version_id))
    }
    _check_items(new.items, frozen, version_id)
    now = utcnow()
    run = PreprodRun(
        id=new_id("ppr_"),
        project_id=project_id,
        name=new.name,
        dataset_id=dataset_id,
        dataset_version_id=version_id,
        version_label=new.version_label,
        runner_mode=IMPORT_MODE,
        agent_connection_id=None,
        model=new.model,
        model_provider=None,
        judge_ids=[],
        baseline=None,
        gate=new.gate,
        item_count=len(frozen),
        created_at=now,
        imported=new.imported,
    )
    open_run(s, run)
    await s.flush()
    rows = []
    for item in new.items:
        source = frozen[item.item_id]
        result = item_result(item.trials)
        rows.append(
            {
                "run_id": run.id,
                "item_id": source.id,
                "position": source.position,
                "input": source.input,
                "expected_output": source.expected_output,
                "status": result.status,
                "error": result.error,
                "score": result.score,
                "passed": result.passed,
                "output": result.output,
                "trials": [t.to_dict() for t in sorted(item.trials, key=lambda t: t.trial)],
                "captured_at": now,
                "scored_at": now if result.status == "scored" else None,
            }
        )
    await s.execute(insert(PreprodItem), rows)
    await move(s, run, "running")
    if any(r["status"] == "scored" for r in rows):
        await move(s, run, "completed")
    else:
        await move(s, run, "failed", error="every item errored in the imported run")
    return run.id


def _check_items(
    items: tuple[ImportedItem, ...], frozen: dict[str, DatasetItem], version_id: str
) -> None:
    """Exactly one result per item of the version, each repeat once."""
    seen: set[str] = set()
    for n, item in enumerate(items):
        if item.item_id not in frozen:
            raise Unprocessable(
                f"dataset version {version_id} has no item {item.item_id!r}",
                field=f"items[{n}].item_id",
            )
        if item.item_id in seen:
            raise Unprocessable(
                f"item {item.item_id} is given twice; send each item once, its repeats as trials",
                field=f"items[{n}].item_id",
            )
        seen.add(item.item_id)
        indexes = [t.trial for t in item.trials]
        if len(set(indexes)) != len(indexes):
            raise Unprocessable(
                f"item {item.item_id} has a repeated trial index; each repeat once",
                field=f"items[{n}].trials",
            )
    missing = [item_id for item_id in frozen if item_id not in seen]
    if missing:
        ordered = sorted(missing, key=lambda i: frozen[i].position)
        raise Unprocessable(
            f"{len(missing)} item{'s' if len(missing) != 1 else ''} of dataset version "
            f"{version_id} ha{'ve' if len(missing) != 1 else 's'} no result, first "
            f"{ordered[0]} (position {frozen[ordered[0]].position}); an imported run covers "
            "every item of the version",
            field="items",
        )
