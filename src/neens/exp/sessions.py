"""`neens exp session`: a line of work in one project folder.

`exp session new --name TOPIC` starts a session in the current folder and makes it the folder's
current one. Every `exp run` made there afterwards (and every regrade of `exp run --watch`)
joins it when it starts, with the content hashes of the files it is made from
(`neens.exp.sources`), and prints its delta against the session's previous run on the same
dataset: the files that changed, the pass rates, B − A with its 95% paired bootstrap interval and
exact McNemar p (the same comparison as `exp compare`, `neens.domain.exp_compare.compare`), each
grader's mean score B − A with its interval, and the cases fixed and broken. `exp session note`
records a hypothesis or a reading; `exp session summary` prints the timeline.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.domain.exp_compare import Comparison, compare
from neens.domain.paired import paired_bootstrap
from neens.domain.stats import Interval
from neens.exp.compare import load_side, pass_text, pp_text, rate_text
from neens.exp.sources import changed_files
from neens.exp.store import open_store
from neens.exp.table import shown
from neens.store.db import Database
from neens.store.experiment_sessions import (
    EntryRow,
    SessionRow,
    add_entry,
    current_session,
    entries_of,
    entry_of_experiment,
    latest_on_dataset,
    start_session,
)
from neens.store.experiments import ExperimentRow, get_experiment, tally, trials_of
from neens.store.types import utcnow

MAX_NAME = 200
NAMES_SHOWN = 20


def folder_key(cwd: Path) -> str:
    """How a folder is known to its sessions: its absolute path, symbolic links resolved."""
    return str(cwd.resolve())


def new_session_id() -> str:
    return f"exs_{ULID()}"


@dataclass(frozen=True, slots=True)
class GraderDelta:
    """One grader's mean score per case, B − A, over the cases it scored in both runs."""

    grader: str
    cases: int
    diff: float | None
    interval: Interval | None
    only: str | None = None
    """"previous" or "this" when the grader scored one of the two runs only."""


@dataclass(frozen=True, slots=True)
class Delta:
    """A session run against the session's previous run on the same dataset."""

    previous_id: str | None
    changed: list[str]
    comparison: Comparison | None
    graders: list[GraderDelta]
    fixed: list[str]
    broke: list[str]


async def join(
    db: Database, session: SessionRow, row: ExperimentRow, files: dict[str, str], kind: str
) -> EntryRow:
    """Add the run (or regrade) `row` to the session, compared with the session's newest run on
    the same dataset; a resumed run that joined when it started keeps its entry."""
    existing = await entry_of_experiment(db, session.id, row.id)
    if existing is not None:
        return existing
    previous = await latest_on_dataset(db, session.id, row.dataset_ref)
    return await add_entry(
        db,
        session.id,
        kind,
        experiment_id=row.id,
        previous_id=None if previous is None else previous.experiment_id,
        files=files,
    )


async def _score_means(db: Database, experiment_id: str) -> dict[str, dict[str, float]]:
    """Each grader's mean score per case, over the case-trials it scored."""
    scores: dict[str, dict[str, list[float]]] = {}
    for trial in await trials_of(db, experiment_id):
        for grade in trial.grades:
            if grade.score is not None:
                scores.setdefault(grade.grader, {}).setdefault(trial.case_id, []).append(
                    grade.score
                )
    return {
        grader: {case: sum(v) / len(v) for case, v in cases.items()}
        for grader, cases in scores.items()
    }


async def delta_of(db: Database, entry: EntryRow) -> Delta | None:
    """The entry's delta against its previous run; None for a note."""
    if entry.experiment_id is None:
        return None
    if entry.previous_id is None:
        return Delta(None, [], None, [], [], [])
    this = await get_experiment(db, entry.experiment_id)
    previous = await get_experiment(db, entry.previous_id)
    if this is None or previous is None:
        return Delta(entry.previous_id, [], None, [], [], [])
    before = await entry_of_experiment(db, entry.session_id, previous.id)
    changed = changed_files((before.files or {}) if before is not None else {}, entry.files or {})
    result = compare(await load_side(db, previous), await load_side(db, this))
    means_a = await _score_means(db, previous.id)
    means_b = await _score_means(db, this.id)
    graders = []
    for name in [g["name"] for g in this.graders] + [
        g["name"] for g in previous.graders if g["name"] not in {h["name"] for h in this.graders}
    ]:
        a, b = means_a.get(name), means_b.get(name)
        if a is None or b is None:
            only = None if a is None and b is None else ("previous" if b is None else "this")
            graders.append(GraderDelta(name, 0, None, None, only))
            continue
        both = sorted(a.keys() & b.keys())
        diffs = [b[case] - a[case] for case in both]
        graders.append(
            GraderDelta(
                name,
                len(both),
                sum(diffs) / len(diffs) if diffs else None,
                paired_bootstrap(diffs, seed=result.seed),
            )
        )
    fixed = sorted(c.case_id for c in result.cases if not c.a_pass and c.b_pass)
    broke = sorted(c.case_id for c in result.cases if c.a_pass and not c.b_pass)
    return Delta(previous.id, changed, result, graders, fixed, broke)


def _interval_text(diff: float | None, interval: Interval | None) -> str:
    if diff is None or interval is None:
        return "no paired cases"
    return f"{pp_text(diff)} [{pp_text(interval.low)}, {pp_text(interval.high)}]"


def _names(ids: list[str]) -> str:
    if not ids:
        return "—"
    listed = ", ".join(shown(i) for i in ids[:NAMES_SHOWN])
    more = len(ids) - NAMES_SHOWN
    return f"{len(ids)}: {listed}" + (f", … ({more} more)" if more > 0 else "")


def delta_lines(session: SessionRow, row: ExperimentRow, delta: Delta) -> list[str]:
    """The delta as `exp run` prints it after its own lines."""
    if delta.previous_id is None:
        return [
            f"session {session.name}: the first run on {row.dataset_ref} in this session; the "
            "next one is compared with it"
        ]
    lines = [f"session {session.name}: vs {delta.previous_id}"]
    if delta.comparison is None:
        lines.append("  the previous run is no longer in this store")
        return lines
    c = delta.comparison
    lines.append(f"  changed {', '.join(delta.changed) if delta.changed else '—'}")
    lines.append(f"  pass {rate_text(c.a.pass_rate)} → {rate_text(c.b.pass_rate)}")
    n = len(c.cases)
    if c.diff is None or c.interval is None or c.mcnemar_p is None:
        lines.append("  Δ no paired cases (no case was graded in both runs)")
    else:
        lines.append(
            f"  Δ {_interval_text(c.diff, c.interval)} mcnemar p={c.mcnemar_p:.3f} "
            f"({n} paired case{'s' if n != 1 else ''}, 95% CI)"
        )
    for g in delta.graders:
        if g.only is not None:
            side = "the previous run" if g.only == "previous" else "this run"
            lines.append(f"  grader {g.grader} scored {side} only")
        elif g.diff is None:
            lines.append(f"  grader {g.grader} no case scored in both runs")
        else:
            lines.append(f"  grader {g.grader} score Δ {_interval_text(g.diff, g.interval)}")
    lines.append(f"  fixed {_names(delta.fixed)}")
    lines.append(f"  broke {_names(delta.broke)}")
    return lines


def _interval_json(interval: Interval | None) -> dict[str, float] | None:
    return None if interval is None else {"low": interval.low, "high": interval.high}


def delta_json(session: SessionRow, delta: Delta) -> dict[str, Any]:
    """Every number unrounded."""
    body: dict[str, Any] = {
        "id": session.id,
        "name": session.name,
        "previousId": delta.previous_id,
        "changed": delta.changed,
    }
    c = delta.comparison
    if c is None:
        body["delta"] = None
        return body
    body["delta"] = {
        "passRates": {"previous": c.a.pass_rate, "this": c.b.pass_rate},
        "pairedCases": len(c.cases),
        "diff": c.diff,
        "interval": _interval_json(c.interval),
        "confidence": 0.95,
        "seed": c.seed,
        "mcnemarP": c.mcnemar_p,
        "verdict": c.verdict,
        "graders": [
            {
                "name": g.grader,
                "cases": g.cases,
                "scoreDiff": g.diff,
                "interval": _interval_json(g.interval),
                "scoredOnly": g.only,
            }
            for g in delta.graders
        ],
        "fixed": delta.fixed,
        "broke": delta.broke,
    }
    return body


async def session_report(
    db: Database, session: SessionRow, row: ExperimentRow, entry: EntryRow
) -> tuple[list[str], dict[str, Any]]:
    """What a run in a session prints after its own lines, and its `session` JSON."""
    delta = await delta_of(db, entry)
    assert delta is not None
    return delta_lines(session, row, delta), delta_json(session, delta)


async def new_command(args: argparse.Namespace) -> int:
    name = args.name.strip()
    if not name:
        raise ConfigError("--name: must not be empty")
    if len(name) > MAX_NAME or "\n" in name:
        raise ConfigError(f"--name: one line of at most {MAX_NAME} characters")
    folder = folder_key(Path.cwd())
    row = SessionRow(new_session_id(), name, folder, utcnow())
    async with open_store(args.database_url) as db:
        replaced = await current_session(db, folder)
        await start_session(db, row)
    if args.json:
        print(
            json.dumps(
                {
                    "id": row.id,
                    "name": row.name,
                    "folder": row.folder,
                    "createdAt": row.created_at.isoformat(),
                    "replaced": None if replaced is None else replaced.id,
                },
                ensure_ascii=False,
            )
        )
        return 0
    print(f"session {row.name} {row.id} started in {row.folder}")
    if replaced is not None:
        print(f"it replaces {replaced.name} {replaced.id} as this folder's current session")
    print("each `neens exp run` here now prints its delta against the previous run")
    return 0


async def _current(db: Database, command: str) -> SessionRow:
    folder = folder_key(Path.cwd())
    session = await current_session(db, folder)
    if session is None:
        raise ConfigError(
            f"{command}: no session in {folder}; start one with "
            "`neens exp session new --name TOPIC`"
        )
    return session


async def note_command(args: argparse.Namespace) -> int:
    text = args.text.strip()
    if not text:
        raise ConfigError("note: the text is empty")
    async with open_store(args.database_url) as db:
        session = await _current(db, "exp session note")
        entry = await add_entry(db, session.id, "note", text=text)
    if args.json:
        print(
            json.dumps(
                {"session": session.id, "text": text, "at": entry.created_at.isoformat()},
                ensure_ascii=False,
            )
        )
        return 0
    print(f"noted in session {session.name} at {_clock(entry)}")
    return 0


def _clock(entry: EntryRow) -> str:
    return entry.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


async def summary_command(args: argparse.Namespace) -> int:
    async with open_store(args.database_url) as db:
        session = await _current(db, "exp session summary")
        entries = await entries_of(db, session.id)
        rows: dict[str, ExperimentRow] = {}
        for entry in entries:
            if entry.experiment_id is not None:
                found = await get_experiment(db, entry.experiment_id)
                if found is not None:
                    rows[found.id] = found
        counts = await tally(db, list(rows))
        deltas = [await delta_of(db, entry) for entry in entries]
    runs = sum(e.kind != "note" for e in entries)
    notes = len(entries) - runs
    if args.json:
        timeline = []
        for entry, delta in zip(entries, deltas, strict=True):
            item: dict[str, Any] = {"kind": entry.kind, "at": entry.created_at.isoformat()}
            if entry.kind == "note":
                item["text"] = entry.text
            else:
                row = rows.get(entry.experiment_id or "")
                c = counts.get(entry.experiment_id or "")
                item.update(
                    id=entry.experiment_id,
                    name=None if row is None else row.name,
                    dataset=None if row is None else row.dataset_ref,
                    status=None
                    if row is None
                    else ("finished" if row.finished_at is not None else "partial"),
                    passed=None if c is None else c.passed,
                    graded=None if c is None else c.graded,
                    passRate=None if c is None or not c.graded else c.passed / c.graded,
                    files=entry.files,
                )
                assert delta is not None
                item["session"] = delta_json(session, delta)
            timeline.append(item)
        body = {
            "id": session.id,
            "name": session.name,
            "folder": session.folder,
            "createdAt": session.created_at.isoformat(),
            "runs": runs,
            "notes": notes,
            "timeline": timeline,
        }
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
        return 0
    started = session.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    print(
        f"session {session.name} {session.id}  started {started}  "
        f"{runs} run{'s' if runs != 1 else ''}, {notes} note{'s' if notes != 1 else ''}"
    )
    for entry, delta in zip(entries, deltas, strict=True):
        print(_timeline_line(entry, delta, rows, counts))
    return 0


def _timeline_line(
    entry: EntryRow, delta: Delta | None, rows: dict[str, ExperimentRow], counts: dict[str, Any]
) -> str:
    at = _clock(entry)
    if entry.kind == "note":
        return f"{at}  note     {entry.text}"
    row = rows.get(entry.experiment_id or "")
    if row is None:
        return f"{at}  {entry.kind:<7}  {entry.experiment_id} (no longer in this store)"
    c = counts[row.id]
    line = f"{at}  {entry.kind:<7}  {row.id} {row.name}  {pass_text(c.passed, c.graded)}"
    if row.finished_at is None:
        line += " (partial)"
    assert delta is not None
    if delta.previous_id is None:
        return line + f"  first on {row.dataset_ref}"
    if delta.comparison is None:
        return line + f"  vs {delta.previous_id} (no longer in this store)"
    comparison = delta.comparison
    line += f"  Δ {_interval_text(comparison.diff, comparison.interval)} vs {delta.previous_id}"
    if delta.changed:
        line += f"  changed {', '.join(delta.changed)}"
    return line
