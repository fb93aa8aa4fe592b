"""`neens import … --server`: send an imported run to a Neens server as a read-only pre-prod run.

The run needs a dataset on the server whose items are the run's cases:

- with `--dataset-id`, an existing dataset (its golden version, or `--dataset-version-id`):
  each case is matched to the item whose metadata `case_key` is the case's key, else to the one
  item whose input is the case's input (as text). Every case must match one item and every item
  one case, or nothing is sent.
- without it, a new dataset named `--dataset-name` (default: the run's name) is created with one
  golden version holding the cases in order (input and expected output as text, the case key in
  the item's metadata), so a later import of the same cases can pass its id.

The results then go to `POST /preprod-evals/imports` in one request: each case's repeats with
their output, score, verdict, error, cost and latency as the file recorded them (null when it
did not). NEENS_BASE_URL and NEENS_API_KEY say where and as whom.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from neens_eval.client import Client, expect_object
from neens_eval.errors import ApiError, AuthError, ConfigError, NeensClientError, Unreachable

from neens.imports.trial import ImportedRun, Trial, text_of

MAX_LISTED: Final = 100
"""The most `unknown` entries and warnings sent; the server keeps up to this many."""
MAX_TEXT: Final = 10_000
"""The server keeps a trial's error message up to this many characters (ImportTrialIn.error)."""


def case_text(value: Any) -> str:
    """A case's input or expected value as the text a dataset item holds."""
    return text_of(value) or ""


def _cases(run: ImportedRun) -> dict[str, list[Trial]]:
    """The run's trials by case key, cases in first-seen order, repeats in index order."""
    cases: dict[str, list[Trial]] = {}
    for trial in run.trials:
        cases.setdefault(trial.case_key, []).append(trial)
    for trials in cases.values():
        trials.sort(key=lambda t: t.trial_idx)
    return cases


def _trial_body(t: Trial) -> dict[str, Any]:
    score = t.score if t.score is not None and 0 <= t.score <= 1 else None
    return {
        "trial": t.trial_idx,
        "output": t.output,
        "score": score,
        "passed": t.passed,
        "error": _error_text(t.error),
        "cost_usd": t.cost_usd,
        "latency_ms": t.latency_ms,
    }


def _error_text(error: str | None) -> str | None:
    """The trial's error, whole when the server keeps it whole, else its start with a note
    saying it was cut and how long it is (the local import keeps it whole)."""
    if not error or len(error) <= MAX_TEXT:
        return error or None
    note = f" … [cut here: {len(error):,} characters in all; the local import keeps them all]"
    return error[: MAX_TEXT - len(note)] + note


def _dataset_items(cases: Mapping[str, list[Trial]]) -> list[dict[str, Any]]:
    """A new dataset version's items: the cases in order, each with its key in its metadata."""
    return [
        {
            "input": case_text(trials[0].input),
            "expected_output": None
            if trials[0].expected is None
            else case_text(trials[0].expected),
            "metadata": {"case_key": key},
        }
        for key, trials in cases.items()
    ]


def _new_dataset(client: Client, name: str, cases: Mapping[str, list[Trial]]) -> tuple[str, str]:
    dataset = expect_object(client.post("/datasets", {"name": name[:200]}), "the new dataset")
    items = _dataset_items(cases)
    try:
        version = expect_object(
            client.post(f"/datasets/{dataset['id']}/versions", {"items": items, "golden": True}),
            "the new dataset version",
        )
    except NeensClientError as exc:
        raise _naming_created(exc, str(dataset["id"]), None) from exc
    return str(dataset["id"]), str(version["id"])


def _version_items(client: Client, dataset_id: str, version_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = expect_object(
            client.get(
                f"/datasets/{dataset_id}/versions/{version_id}/items",
                {"limit": 5000, "cursor": cursor},
            ),
            "the dataset's items",
        )
        items.extend(page["items"])
        cursor = page.get("nextCursor")
        if not cursor:
            return items


def match_cases(
    cases: Mapping[str, list[Trial]], items: list[dict[str, Any]], version_id: str
) -> dict[str, str]:
    """Case key → dataset item id: by the item's `case_key` metadata, else by equal input."""
    by_key: dict[str, str] = {}
    by_input: dict[str, list[str]] = {}
    for item in items:
        key = (item.get("metadata") or {}).get("case_key")
        if isinstance(key, str):
            by_key.setdefault(key, item["id"])
        by_input.setdefault(item["input"], []).append(item["id"])
    matched: dict[str, str] = {}
    used: dict[str, str] = {}
    for key, trials in cases.items():
        item_id = by_key.get(key)
        if item_id is None:
            found = by_input.get(case_text(trials[0].input), [])
            if len(found) != 1:
                why = "no item has" if not found else f"{len(found)} items have"
                raise ConfigError(
                    f"--dataset-id: case {key!r} matches no item of version {version_id} "
                    f"({why} its case_key or its input); import into a new dataset instead"
                )
            item_id = found[0]
        if item_id in used:
            raise ConfigError(
                f"--dataset-id: cases {used[item_id]!r} and {key!r} both match item {item_id}"
            )
        used[item_id] = key
        matched[key] = item_id
    left = [item["id"] for item in items if item["id"] not in used]
    if left:
        raise ConfigError(
            f"--dataset-id: {len(left)} item{'s' if len(left) != 1 else ''} of version "
            f"{version_id} match no case of this run, first {left[0]}; an imported run covers "
            "every item of the version"
        )
    return matched


def _existing(
    client: Client, dataset_id: str, version_id: str | None
) -> tuple[str, str, list[dict[str, Any]]]:
    if version_id is None:
        dataset = expect_object(client.get(f"/datasets/{dataset_id}"), "the dataset")
        version_id = dataset.get("goldenVersionId")
        if not version_id:
            raise ConfigError(
                f"--dataset-id: dataset {dataset_id} has no golden version; mark one golden or "
                "pass --dataset-version-id"
            )
    return dataset_id, str(version_id), _version_items(client, dataset_id, str(version_id))


def send_import(
    client: Client,
    run: ImportedRun,
    path: Path,
    name: str,
    *,
    dataset_id: str | None,
    dataset_version_id: str | None,
    dataset_name: str | None,
) -> dict[str, Any]:
    """Send `run` (saved locally as `name`) to the server; return what the server stored.

    The bodies are checked against the server's own schemas first, so a run the server would
    refuse leaves nothing behind (no dataset made for it). When a send fails after creating a
    dataset all the same (the server down meanwhile, say), the error names that dataset and how
    to reuse it."""
    cases = _cases(run)
    body = _run_body(run, path, name, cases)
    new_name = None if dataset_id is not None else dataset_name or name
    check_locally(body, cases, new_name)
    if dataset_id is not None:
        dataset_id, version_id, items = _existing(client, dataset_id, dataset_version_id)
        matched = match_cases(cases, items, version_id)
        return _send(client, body, [matched[key] for key in cases], dataset_id, version_id, False)
    dataset_id, version_id = _new_dataset(client, dataset_name or name, cases)
    try:
        items = _version_items(client, dataset_id, version_id)
        item_ids = [str(item["id"]) for item in items]  # the cases, in order
        return _send(client, body, item_ids, dataset_id, version_id, True)
    except NeensClientError as exc:
        raise _naming_created(exc, dataset_id, version_id) from exc


_PLACEHOLDER_ID: Final = "dsi_0"
"""An item or dataset id for the local check: ids are the server's to give."""


def check_locally(
    body: dict[str, Any], cases: Mapping[str, list[Trial]], new_dataset: str | None
) -> None:
    """ConfigError (exit 2) naming the case and field when the server's schemas refuse the run's
    body, or the new dataset's name and items; nothing has been sent yet."""
    from pydantic import ValidationError

    from neens.api.schemas.base import error_message
    from neens.api.schemas.datasets import DatasetCreate, VersionCreate
    from neens.api.schemas.preprod_import import PreprodImportCreate

    try:
        if new_dataset is not None:
            DatasetCreate.model_validate({"name": new_dataset[:200]})
            VersionCreate.model_validate({"items": _dataset_items(cases), "golden": True})
        PreprodImportCreate.model_validate(
            {
                **body,
                "dataset_id": _PLACEHOLDER_ID,
                "dataset_version_id": _PLACEHOLDER_ID,
                "items": [{**item, "item_id": _PLACEHOLDER_ID} for item in body["items"]],
            }
        )
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise ConfigError(
            f"the server would refuse this run, so nothing was sent: {_where(error['loc'], cases)}"
            f"{error_message(error)}"
        ) from None


def _where(loc: tuple[int | str, ...], cases: Mapping[str, list[Trial]]) -> str:
    """`case 'k', trial 2: output: ` for a location in the run's or the dataset's body."""
    parts = list(loc)
    keys = list(cases)
    if len(parts) >= 2 and parts[0] == "items" and isinstance(parts[1], int):
        key = keys[parts[1]]
        case = f"case {key!r}"
        rest = parts[2:]
        if len(rest) >= 2 and rest[0] == "trials" and isinstance(rest[1], int):
            case += f", trial {cases[key][rest[1]].trial_idx}"
            rest = rest[2:]
        return f"{case}: {'.'.join(map(str, rest))}: " if rest else f"{case}: "
    return f"{'.'.join(map(str, parts))}: " if parts else ""


def _naming_created(
    exc: NeensClientError, dataset_id: str, version_id: str | None
) -> NeensClientError:
    """`exc`, of the same kind (so the same exit code), saying which dataset this import
    created on the server before failing and how to send the run to it again."""
    if version_id is None:
        hint = (
            f"; this import created dataset {dataset_id}, which has no version yet (GET "
            f"/datasets/{dataset_id}/versions to check): delete it or push the cases to it "
            "before sending the run with --dataset-id"
        )
    else:
        hint = (
            f"; this import created dataset {dataset_id} (golden version {version_id}, the "
            f"run's cases) before failing: send the run again with --dataset-id {dataset_id} "
            "rather than create another"
        )
    if isinstance(exc, AuthError):
        return AuthError(exc.status, exc.code, exc.message + hint, exc.field)
    if isinstance(exc, ApiError):
        return ApiError(exc.status, exc.code, exc.message + hint, exc.field)
    if isinstance(exc, Unreachable):
        return Unreachable(f"{exc}{hint}", maybe_applied=exc.maybe_applied)
    return ConfigError(f"{exc}{hint}")


def _send(
    client: Client,
    body: dict[str, Any],
    item_ids: list[str],
    dataset_id: str,
    version_id: str,
    created: bool,
) -> dict[str, Any]:
    """Send `_run_body`'s `body` with the dataset's ids and each case's item, `item_ids` in the
    body's case order."""
    body = {
        **body,
        "dataset_id": dataset_id,
        "dataset_version_id": version_id,
        "items": [
            {**item, "item_id": item_id}
            for item, item_id in zip(body["items"], item_ids, strict=True)
        ],
    }
    stored = expect_object(client.post("/preprod-evals/imports", body), "the imported run")
    return {
        "runId": stored["id"],
        "status": stored["status"],
        "datasetId": dataset_id,
        "datasetVersionId": version_id,
        "datasetCreated": created,
        "url": f"{client.base_url}/ui/preprod-evals/{stored['id']}",
    }


def _run_body(
    run: ImportedRun, path: Path, name: str, cases: Mapping[str, list[Trial]]
) -> dict[str, Any]:
    """The body of `POST /preprod-evals/imports` but the dataset's and its items' ids."""
    return {
        "name": name[:500],
        "version_label": name[:500],
        # A blank model is one the tool did not record (the server refuses a blank name).
        "model": run.model if run.model and run.model.strip() else None,
        "source": {
            "tool": run.tool,
            "tool_version": run.tool_version,
            "run_id": run.run_id,
            "task": run.task,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "created_at": run.created_at,
            "unknown": dict(list(run.unknown.items())[:MAX_LISTED]),
            "warnings": run.warnings[:MAX_LISTED],
        },
        "items": [{"trials": [_trial_body(t) for t in trials]} for trials in cases.values()],
    }
