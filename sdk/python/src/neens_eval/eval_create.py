"""Creating a pre-prod run from the flags, and finding the run a create that got no answer made.

A create request is never sent twice: when its answer is lost, the dataset's runs are listed
once the server answers again, and the one new run that matches is followed.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, Final

from neens_eval.client import Client, expect_object
from neens_eval.errors import ApiError, ConfigError, NeensClientError, Unreachable
from neens_eval.eval_args import server_gate
from neens_eval.gate_policy import GatePolicy
from neens_eval.waiting import Progress

RECENT_RUNS: Final = 50


def create_run(
    client: Client,
    args: argparse.Namespace,
    policy: GatePolicy,
    *,
    runner_mode: str,
    progress: Progress,
) -> dict[str, Any]:
    """Create the run the flags and policy describe; a create whose answer was lost is looked up."""
    dataset_id = _dataset_id(client, args.dataset.strip())
    body: dict[str, Any] = {"dataset_id": dataset_id, "version_label": args.version_label}
    if args.name is not None:
        body["name"] = args.name
    if args.dataset_version is not None:
        body["dataset_version_id"] = args.dataset_version
    if runner_mode == "push":
        body["runner_mode"] = "push"
        body["agent_connection_id"] = args.agent_connection
    if args.judges:
        body["judge_deployment_ids"] = list(args.judges)
    if args.baseline is not None:
        body["baseline"] = args.baseline
    gate = server_gate(policy, args)
    if gate:
        body["gate"] = gate
    known = _recent_run_ids(client, dataset_id)
    try:
        created = client.post("/preprod-evals", body)
    except Unreachable as exc:
        if not exc.maybe_applied:
            raise
        created = _run_created_by(client, body, known, exc, progress)
    except ApiError as exc:
        if exc.status == 422 and exc.field == "dataset_id" and "golden" in exc.message:
            raise ConfigError(
                f"{exc}; push a golden version with `neens datasets push FILE.jsonl --name NAME "
                f"--golden`, or pin one with --dataset-version dsv_…"
            ) from exc
        if exc.status == 404 and exc.field == "dataset_id":
            raise ConfigError(
                f"{exc}; give --dataset the dataset's name (as given to `neens datasets push "
                f"--name`) or its id (ds_…), which that command prints"
            ) from exc
        raise
    run = expect_object(created, "POST /preprod-evals")
    if not isinstance(run.get("id"), str):
        raise ApiError(200, "unexpected_response", "POST /preprod-evals answered without an id")
    return run


def _dataset_id(client: Client, dataset: str) -> str:
    """`--dataset` as an id: a `ds_…` value is one already; anything else is a dataset name."""
    if dataset.startswith("ds_"):
        return dataset
    listing = expect_object(client.get("/datasets", {"name": dataset}), "GET /datasets")
    found = [row for row in listing.get("datasets") or [] if isinstance(row, dict)]
    if found and isinstance(found[0].get("id"), str):
        return str(found[0]["id"])
    raise ConfigError(
        f"--dataset: no dataset named {dataset!r} in this project; give the name you pushed it "
        f"with (`neens datasets push FILE.jsonl --name NAME --golden`) or its id (ds_…)"
    )


def _recent_run_ids(client: Client, dataset_id: str) -> list[str]:
    """The dataset's newest runs before a create, so that a create whose answer was lost can
    be told apart from the runs that were there already."""
    listing = expect_object(
        client.get("/preprod-evals", {"dataset_id": dataset_id, "limit": RECENT_RUNS}),
        "GET /preprod-evals",
    )
    return [str(row.get("id")) for row in listing.get("runs") or [] if isinstance(row, dict)]


def _run_created_by(
    client: Client,
    body: Mapping[str, Any],
    known: Sequence[str],
    error: Unreachable,
    progress: Progress,
) -> dict[str, Any]:
    """The run a create request that got no answer made, found once the server answers again.

    The request is never sent twice. Exactly one new run of the dataset with the same version
    label, name, mode and connection is the one it created; none means nothing was created; more
    than one cannot be told apart, so the user picks one with --run-id.
    """
    progress.log(
        "neens: the request creating the run got no answer; looking on the server for the run "
        "it may have created (it is not sent twice)"
    )
    dataset_id = str(body["dataset_id"])
    try:
        listing = expect_object(
            client.get("/preprod-evals", {"dataset_id": dataset_id, "limit": RECENT_RUNS}),
            "GET /preprod-evals",
        )
    except NeensClientError as exc:
        raise Unreachable(
            f"{error}; looking for the run it may have created failed too ({exc}): once Neens "
            f"answers, list the dataset's runs (GET /preprod-evals?dataset_id={dataset_id}) and "
            f"follow the run of {body['version_label']}, if there is one, with "
            f"`neens eval push --run-id ID`"
        ) from None
    before = set(known)
    new: list[dict[str, Any]] = []
    for row in listing.get("runs") or []:  # newest first: stop at the first run seen before
        if not isinstance(row, dict) or row.get("id") in before:
            break
        new.append(row)
    wanted = {
        "versionLabel": body["version_label"],
        "name": body.get("name", body["version_label"]),
        "runnerMode": body.get("runner_mode", "runner"),
        "agentConnectionId": body.get("agent_connection_id"),
    }
    matches = [row for row in new if all(row.get(k) == v for k, v in wanted.items())]
    if len(matches) == 1:
        progress.log(f"neens: the server did create run {matches[0]['id']}; following it")
        return matches[0]
    if not matches:
        raise Unreachable(
            f"{error}: the server answers again and has no new run of {body['version_label']} "
            f"on dataset {dataset_id}, so nothing was created; run the command again"
        )
    ids = ", ".join(str(row["id"]) for row in matches)
    raise Unreachable(
        f"{error}: the server now has {len(matches)} new runs of {body['version_label']} that "
        f"could be it ({ids}); follow the right one with `neens eval push --run-id ID`"
    )
