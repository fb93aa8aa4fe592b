"""`neens exp list` and `neens exp status`."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from neens.exp.compare import pass_text
from neens.exp.progress import cost_text
from neens.exp.run_command import summary_json
from neens.exp.store import find_experiment, open_store
from neens.exp.table import table
from neens.store.experiments import ExperimentRow, Tally, list_experiments, tally
from neens.store.types import utcnow


async def list_command(args: argparse.Namespace) -> int:
    async with open_store(args.database_url) as db:
        rows = await list_experiments(db, limit=args.limit)
        counts = await tally(db, [row.id for row in rows])
    if args.json:
        body = [summary_json(r, counts[r.id], r.finished_at is not None) for r in rows]
        print(json.dumps({"experiments": body}, ensure_ascii=False))
        return 0
    if not rows:
        print("no experiments yet: `neens exp run spec.json` makes one")
        return 0
    lines = []
    for row in rows:
        c = counts[row.id]
        state = "" if row.finished_at is not None else " (partial)"
        lines.append(
            [
                row.id,
                row.name,
                row.created_at.strftime("%Y-%m-%d %H:%M"),
                f"{c.done}/{row.planned}{state}",
                pass_text(c.passed, c.graded).removeprefix("pass "),
                str(c.infra_errors + c.agent_errors),
            ]
        )
    print(table(["id", "name", "started", "case runs", "pass", "errors"], lines, right={3, 5}))
    return 0


def _duration(seconds: float) -> str:
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _eta_seconds(row: ExperimentRow, c: Tally) -> float | None:
    """Time left at the pace so far: the seconds per saved case-trial (first start to last
    save) times those left. None before two are saved or once finished."""
    if row.finished_at is not None or c.done < 2:
        return None
    assert c.first_started_at is not None and c.last_finished_at is not None
    pace = (c.last_finished_at - c.first_started_at).total_seconds() / c.done
    return pace * (row.planned - c.done)


def _status_json(row: ExperimentRow, c: Tally, now: datetime) -> dict[str, object]:
    body = dict(summary_json(row, c, row.finished_at is not None))
    body["progress"] = c.done / row.planned if row.planned else None
    body["etaSeconds"] = _eta_seconds(row, c)
    body["lastSavedAt"] = c.last_finished_at.isoformat() if c.last_finished_at else None
    body["secondsSinceLastSave"] = (
        (now - c.last_finished_at).total_seconds() if c.last_finished_at else None
    )
    return body


async def status_command(args: argparse.Namespace) -> int:
    async with open_store(args.database_url) as db:
        if args.experiment:
            rows = [await find_experiment(db, args.experiment)]
        else:
            rows = [r for r in await list_experiments(db, limit=200) if r.finished_at is None]
        counts = await tally(db, [row.id for row in rows])
    now = utcnow()
    if args.json:
        body = [_status_json(r, counts[r.id], now) for r in rows]
        print(json.dumps({"experiments": body}, ensure_ascii=False))
        return 0
    if not rows:
        print("no unfinished experiments")
        return 0
    for row in rows:
        c = counts[row.id]
        share = c.done / row.planned * 100 if row.planned else 100.0
        state = "finished" if row.finished_at is not None else "partial"
        print(f"{row.id} {row.name}  {state}  {c.done}/{row.planned} case runs ({share:.0f}%)")
        errors = c.infra_errors + c.agent_errors
        detail = [
            pass_text(c.passed, c.graded),
            f"errors {errors} ({c.infra_errors} infra, {c.agent_errors} agent)",
            f"cost so far {cost_text(c.cost_usd, c.priced, c.done)}",
        ]
        eta = _eta_seconds(row, c)
        if eta is not None:
            detail.append(f"ETA {_duration(eta)} at the pace so far")
        if c.last_finished_at is not None and row.finished_at is None:
            detail.append(f"last saved {_duration((now - c.last_finished_at).total_seconds())} ago")
        print("  " + "  ".join(detail))
    return 0
