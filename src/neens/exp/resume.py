"""What `--resume` continues, for the commands that save experiments (`exp run`, `exp aa` and
the A/B `exp run --arm`): the stored experiment it names, or the newest unfinished one, and the
case-trials of it to keep."""

from __future__ import annotations

from typing import Final

from neens_eval.errors import ConfigError

from neens.exp.store import find_experiment
from neens.store.db import Database
from neens.store.experiments import ExperimentRow, latest_unfinished, trials_of

WHAT: Final = {"run": "run", "aa": "A/A pair", "ab": "A/B run"}
"""What each kind of experiment is called in `--resume`'s messages."""


async def find_to_resume(db: Database, given: str, name: str, kind: str) -> ExperimentRow:
    """The experiment `--resume GIVEN` names (its id, or the start of one), or with a bare
    `--resume` the newest unfinished experiment of this name and kind; ConfigError (exit 2)
    when there is none. Whether it may be resumed is the caller's to check."""
    if given:
        return await find_experiment(db, given, flag="--resume")
    found = await latest_unfinished(db, name, kind=kind)
    if found is None:
        raise ConfigError(
            f"--resume: no unfinished {WHAT.get(kind, kind)} named {name!r} in this store; "
            "name one with --resume EXP (`neens exp list` marks partial runs)"
        )
    return found


async def kept_trials(
    db: Database, experiment_id: str, *, retry_errors: bool
) -> set[tuple[str, int]]:
    """The (case, trial)s of a stored experiment that a resume keeps: every saved one, but
    for its errors with --retry-errors."""
    return {
        (trial.case_id, trial.trial)
        for trial in await trials_of(db, experiment_id, grades=False)
        if not (retry_errors and trial.status == "error")
    }
