"""`neens import inspect|promptfoo|mlflow|openai-evals PATH`: another tool's run as an experiment.

Registered through the `neens.cli` entry point `imports`. Each command reads one file, saves it
as a finished experiment of the bench (the store `neens exp` uses) and prints its id, so
`neens exp compare` pairs it with any other run of the same cases. `--json` prints one JSON
object instead. Bad input exits 2 with one line on stderr naming the problem, before anything
is saved.

Exit codes: 0 imported; 2 bad input (a file that is not what its format says, a bad flag).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError

from neens.imports.trial import ImportedRun


def _read(args: argparse.Namespace) -> ImportedRun:
    from neens.imports.trial import check_run

    return check_run(_read_file(args), str(args.path))


_NAMED_FLAGS = ("name", "dataset_id", "dataset_version_id", "dataset_name", "arm", "run_id")
MAX_DATASET_NAME = 200
"""The longest name of a server dataset."""


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse a blank id or name, and flags that do nothing with the others given, before
    anything is read or saved."""
    for flag in _NAMED_FLAGS:
        value = getattr(args, flag, None)
        if value is not None and not value.strip():
            raise ConfigError(f"--{flag.replace('_', '-')}: must not be blank")
    if args.dataset_name is not None and len(args.dataset_name) > MAX_DATASET_NAME:
        raise ConfigError(
            f"--dataset-name: must be at most {MAX_DATASET_NAME} characters, not "
            f"{len(args.dataset_name)}"
        )
    if args.import_command == "openai-evals" and args.path is not None:
        for flag in ("graders", "out"):
            if getattr(args, flag) is not None:
                raise ConfigError(
                    f"--{flag}: is for migrating samples (--dataset without PATH); with a "
                    "recorder log or export PATH it would do nothing"
                )


def _read_file(args: argparse.Namespace) -> ImportedRun:
    path = Path(args.path)
    if not path.exists():
        raise ConfigError(f"PATH: no such file {path}")
    if not path.is_file():
        raise ConfigError(f"PATH: {path} is not a file (give the log or results file itself)")
    tool = args.import_command
    if tool == "inspect":
        from neens.imports.inspect import read_inspect

        return read_inspect(path, allow_partial=args.allow_partial)
    if tool == "promptfoo":
        from neens.imports.promptfoo import read_promptfoo

        return read_promptfoo(path, arm=args.arm)
    if tool == "mlflow":
        from neens.imports.mlflow import read_mlflow

        return read_mlflow(path, run_id=args.run_id)
    from neens.imports.openai_evals import read_openai_evals

    samples = Path(args.dataset) if args.dataset else None
    return read_openai_evals(path, samples=samples)


def _server_client(args: argparse.Namespace) -> Any:
    """The server client for `--server`, checked before anything is read or saved; None
    without `--server`."""
    if not args.server:
        for flag in ("dataset_id", "dataset_version_id", "dataset_name"):
            if getattr(args, flag) is not None:
                raise ConfigError(f"--{flag.replace('_', '-')} is for --server")
        return None
    if args.dataset_version_id is not None and args.dataset_id is None:
        raise ConfigError("--dataset-version-id needs --dataset-id")
    if args.dataset_name is not None and args.dataset_id is not None:
        raise ConfigError("--dataset-name names a new dataset; with --dataset-id none is created")
    from neens_eval.client import Client

    return Client.from_env()


def _check_names(args: argparse.Namespace, run: ImportedRun) -> None:
    """The experiment's name and, with --server, the new dataset's, refused (never cut) when
    too long, before anything is saved; the run's model and task as the server's names are
    (a control character in them, kept by --name, would reach every table that shows them)."""
    from neens.domain.storable import name_problem
    from neens.imports.store import experiment_name

    name = experiment_name(run, Path(args.path), args.name)
    for field, value in (("model", run.model), ("task", run.task)):
        if value and (problem := name_problem(value)) is not None:
            raise ConfigError(
                f"{args.path}: the run's {field}, {ascii(value)}, {problem}: nothing was saved"
            )
    if args.server and args.dataset_id is None and args.dataset_name is None:
        if len(name) > MAX_DATASET_NAME:
            raise ConfigError(
                f"--server: the new dataset would be named after the run ({len(name)} "
                f"characters, over {MAX_DATASET_NAME}): give --dataset-name or --dataset-id"
            )


async def _import(args: argparse.Namespace, run: ImportedRun) -> dict[str, Any]:
    from neens.exp.store import open_store
    from neens.imports.store import save_import

    async with open_store(args.database_url) as db:
        saved = await save_import(db, run, Path(args.path), args.name)
    cases = len({t.case_key for t in run.trials})
    return {
        "id": saved.row.id,
        "name": saved.row.name,
        "tool": run.tool,
        "toolVersion": run.tool_version,
        "runId": run.run_id,
        "task": run.task,
        "model": run.model,
        "cases": cases,
        "caseTrials": saved.trials,
        "repeats": run.repeats,
        "graded": saved.graded,
        "passed": saved.passed,
        "passRate": saved.passed / saved.graded if saved.graded else None,
        "errors": saved.errors,
        "unknown": run.unknown,
        "warnings": run.warnings,
    }


def import_command(args: argparse.Namespace) -> int:
    body: dict[str, Any] | None = None
    if args.server and args.path is None:
        raise ConfigError("--server sends an imported run: give PATH")
    _check_flags(args)
    client = _server_client(args)
    if args.import_command != "openai-evals" or args.path is not None:
        run = _read(args)
        _check_names(args, run)
        body = asyncio.run(_import(args, run))
        if client is not None:
            if not args.json:
                _print_import(body)
            from neens.imports.server import send_import

            body["server"] = send_import(
                client,
                run,
                Path(args.path),
                body["name"],
                dataset_id=args.dataset_id,
                dataset_version_id=args.dataset_version_id,
                dataset_name=args.dataset_name,
            )
    migration = None
    if args.import_command == "openai-evals" and args.dataset and args.path is None:
        from neens.imports.migrate import migrate_command

        migration = migrate_command(args)
    elif args.import_command == "openai-evals" and args.path is None:
        raise ConfigError("give PATH (a recorder log or hosted export), or --dataset samples.jsonl")
    if args.json:
        out: dict[str, Any] = dict(body or {})
        if migration is not None:
            out = {"migration": migration} if body is None else {**out, "migration": migration}
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))
        return 0
    if body is not None and client is None:
        _print_import(body)
    if body is not None and "server" in body:
        sent = body["server"]
        made = "new dataset" if sent["datasetCreated"] else "dataset"
        print(
            f"server run {sent['runId']} {sent['status']} on {made} {sent['datasetId']} "
            f"(version {sent['datasetVersionId']}): {sent['url']}"
        )
    return 0


def _print_import(body: dict[str, Any]) -> None:
    rate = body["passRate"]
    shown = "no data" if rate is None else f"{rate * 100:.1f}% ({body['passed']}/{body['graded']})"
    print(f"import {body['id']} {body['name']}  pass {shown}")
    print(
        f"{body['caseTrials']} case-trials of {body['cases']} cases, "
        f"{body['repeats']} repeat{'s' if body['repeats'] != 1 else ''}, "
        f"{body['errors']} errored"
    )
    for field, reason in body["unknown"].items():
        print(f"unknown {field}: {reason}")
    for warning in body["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    return import_command(args)


def _common(parser: argparse.ArgumentParser, *, path_required: bool = True) -> None:
    if path_required:
        parser.add_argument("path", metavar="PATH", help="the file to import")
    parser.add_argument(
        "--name", metavar="NAME", help="the experiment's name (default: tool:task:model)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="store to use (default: $NEENS_DATABASE_URL, else SQLite at .neens/neens.db)",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="also send the run to the Neens server at $NEENS_BASE_URL (key: $NEENS_API_KEY) "
        "as a read-only pre-prod run",
    )
    parser.add_argument(
        "--dataset-id",
        metavar="ID",
        help="with --server: the server dataset whose items are the run's cases (default: a new "
        "dataset is created from the cases)",
    )
    parser.add_argument(
        "--dataset-version-id",
        metavar="ID",
        help="with --dataset-id: the version to use (default: its golden version)",
    )
    parser.add_argument(
        "--dataset-name",
        metavar="NAME",
        help="with --server and no --dataset-id: the new dataset's name (default: the run's name)",
    )
    parser.set_defaults(func=_run)


def register(subparsers: Any) -> None:
    """Add `import` and its commands to the `neens` command."""
    parser = subparsers.add_parser(
        "import",
        help="import another tool's run (Inspect AI, promptfoo, MLflow, OpenAI Evals) as an "
        "experiment",
        description=(
            "Read another tool's evaluation run and save it as an experiment of the bench, so "
            "`neens exp compare` pairs it case by case with any other run of the same cases. "
            "What the format does not record (cost, repeats) is saved as unknown, never 0."
        ),
    )
    commands = parser.add_subparsers(dest="import_command", metavar="TOOL", required=True)
    add: Callable[..., argparse.ArgumentParser] = commands.add_parser

    inspect = add("inspect", help="an Inspect AI log (.eval or .json)")
    inspect.add_argument(
        "--allow-partial",
        action="store_true",
        help="import a log whose status is not success, or that is invalidated",
    )
    _common(inspect)

    promptfoo = add("promptfoo", help="a promptfoo output (-o results.json or .jsonl)")
    promptfoo.add_argument(
        "--arm",
        metavar="NAME",
        help="the provider (label or id) or prompt label to import, when the file holds several",
    )
    _common(promptfoo)

    mlflow = add("mlflow", help="MLflow GenAI evaluation results (result_df exported as JSON)")
    mlflow.add_argument(
        "--run-id",
        metavar="ID",
        help="keep only assessments of this MLflow run (a trace can carry several runs')",
    )
    _common(mlflow)

    openai = add(
        "openai-evals",
        help="an OpenAI Evals recorder log or hosted export; or --dataset to migrate samples",
    )
    openai.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        help="a recorder log (--record_path) or a hosted export (output items)",
    )
    openai.add_argument(
        "--dataset",
        metavar="SAMPLES",
        help="the samples JSONL: keys a recorder log's cases by content; alone, migrates the "
        "samples to a dataset file (see --out)",
    )
    openai.add_argument(
        "--graders",
        metavar="FILE",
        help="with --dataset: the eval's graders (registry YAML or hosted eval JSON) to map to "
        "Neens graders",
    )
    openai.add_argument(
        "--out",
        metavar="DIR",
        help="with --dataset: the project folder to write datasets/NAME.jsonl and "
        "NAME.graders.json into (default: the current folder)",
    )
    _common(openai, path_required=False)
