"""The New pre-prod eval form: what it offers, its smart defaults, and turning what was posted
into the body of `POST /preprod-evals`.

Everything but the version label has a default: the newest dataset's golden version, the
project's Primary Score, the newest agent connection in push mode (runner mode when there is
none the key can see: an ingest key cannot list connections, as in the API), the newest finished
run over that dataset as the baseline (else production over the last 7 days), and a gate that
blocks any regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neens.api.schemas.agent_connections import ConnectionOut
from neens.api.schemas.datasets import DatasetOut, VersionOut
from neens.api.schemas.judges import JudgeOut
from neens.api.schemas.preprod import PreprodOut
from neens.domain.run_lifecycle import TERMINAL
from neens.errors import Unprocessable
from neens.store.judges import SCOREABLE
from neens.web.form_numbers import plain_decimal, whole_number
from neens.web.guard import Form

PROD_WINDOWS = (("24h", "last 24 hours"), ("7d", "last 7 days"), ("30d", "last 30 days"))
DEFAULT_PROD_WINDOW = "prod:7d"
NO_BASELINE = "none"


@dataclass(frozen=True, slots=True)
class DatasetChoice:
    value: str
    """`ds_…` for the golden version, `ds_…:dsv_…` to pin a version."""
    label: str


@dataclass(frozen=True, slots=True)
class DatasetGroup:
    dataset: DatasetOut
    choices: list[DatasetChoice]


@dataclass(frozen=True, slots=True)
class Offer:
    """What the form offers the signed-in key."""

    datasets: list[DatasetGroup]
    judges: list[JudgeOut]
    connections: list[ConnectionOut] | None
    """None when the key may not list connections (ingest): the form asks for an id."""
    runs: list[PreprodOut]
    """Recent runs, offered as baselines."""


@dataclass(slots=True)
class Values:
    """The form's values: its defaults, or what was posted when it is shown again."""

    name: str = ""
    dataset: str = ""
    version_label: str = ""
    runner_mode: str = "runner"
    agent_connection_id: str = ""
    judges: list[str] = field(default_factory=list)
    baseline: str = DEFAULT_PROD_WINDOW
    max_regressions: str = "0"
    min_pass_rate: str = ""
    max_avg_usd: str = ""
    max_delta_pct: str = ""


def dataset_groups(
    datasets: list[DatasetOut], versions: dict[str, list[VersionOut]]
) -> list[DatasetGroup]:
    """Newest dataset first; its golden version first among its choices."""
    groups = []
    for dataset in reversed(datasets):
        choices = []
        golden = next((v for v in versions[dataset.id] if v.golden), None)
        if golden is not None:
            choices.append(
                DatasetChoice(
                    dataset.id, f"golden version (v{golden.number}, {golden.item_count} items)"
                )
            )
        for version in reversed(versions[dataset.id]):
            choices.append(
                DatasetChoice(
                    f"{dataset.id}:{version.id}",
                    f"v{version.number} only ({version.item_count} items)",
                )
            )
        groups.append(DatasetGroup(dataset, choices))
    return groups


def scoreable(judges: list[JudgeOut]) -> list[JudgeOut]:
    """The judges a run may use: enabled and scoring pass/fail (no classifier)."""
    return [j for j in judges if j.enabled and j.type in SCOREABLE]


def defaults(offer: Offer) -> Values:
    values = Values()
    with_golden = [g for g in offer.datasets if g.choices and ":" not in g.choices[0].value]
    group = with_golden[0] if with_golden else (offer.datasets[0] if offer.datasets else None)
    if group is not None and group.choices:
        values.dataset = group.choices[0].value
    values.judges = [j.id for j in offer.judges if j.is_primary] or [j.id for j in offer.judges[:1]]
    if offer.connections:
        values.runner_mode = "push"
        values.agent_connection_id = offer.connections[-1].id
    if group is not None:
        finished = [
            r
            for r in offer.runs
            if r.dataset_id == group.dataset.id
            and r.status in ("completed", "completed_with_regressions")
        ]
        if finished:
            values.baseline = f"run:{finished[0].id}"
    return values


def posted(form: Form) -> Values:
    return Values(
        name=form.get("name").strip(),
        dataset=form.get("dataset"),
        version_label=form.get("version_label").strip(),
        runner_mode=form.get("runner_mode", "runner"),
        agent_connection_id=form.get("agent_connection_id").strip(),
        judges=form.getlist("judge"),
        baseline=form.get("baseline", NO_BASELINE),
        max_regressions=form.get("max_regressions").strip(),
        min_pass_rate=form.get("min_pass_rate").strip(),
        max_avg_usd=form.get("max_avg_usd").strip(),
        max_delta_pct=form.get("max_delta_pct").strip(),
    )


def _number(text: str, field: str, *, integer: bool) -> int | float:
    """A gate field's number in ASCII digits (`form_numbers`): `1_0` or `٣` is refused, not
    read as 10 or 3."""
    value = whole_number(text) if integer else plain_decimal(text)
    if value is None:
        kind = "a whole number (digits 0-9)" if integer else "a number such as 0.75 (digits 0-9)"
        raise Unprocessable(f"{field} must be {kind}, not {text!r}", field=field)
    return value


def _baseline(choice: str) -> dict[str, str] | None:
    if choice == NO_BASELINE or not choice:
        return None
    kind, _, value = choice.partition(":")
    if kind == "prod":
        return {"kind": "prod_window", "range": value}
    if kind == "run":
        return {"kind": "preprod_run", "value": value}
    raise Unprocessable(f"unknown baseline choice {choice!r}", field="baseline")


def request_body(values: Values) -> dict[str, Any]:
    """The JSON body of `POST /preprod-evals` the form stands for; validated by the route's own
    model afterwards, so the form accepts exactly what the API accepts."""
    dataset_id, _, version_id = values.dataset.partition(":")
    if not dataset_id:
        raise Unprocessable(
            "pick a dataset; push one with `neens datasets push FILE --name NAME --golden`",
            field="dataset_id",
        )
    if not values.judges:
        raise Unprocessable("pick at least one judge", field="judge_deployment_ids")
    body: dict[str, Any] = {
        "dataset_id": dataset_id,
        "version_label": values.version_label,
        "runner_mode": values.runner_mode,
        "judge_deployment_ids": values.judges,
    }
    if version_id:
        body["dataset_version_id"] = version_id
    if values.name:
        body["name"] = values.name
    if values.runner_mode == "push":
        body["agent_connection_id"] = values.agent_connection_id or None
    baseline = _baseline(values.baseline)
    if baseline is not None:
        body["baseline"] = baseline
    gate: dict[str, Any] = {}
    if values.max_regressions:
        gate["max_regressions"] = _number(
            values.max_regressions, "gate.max_regressions", integer=True
        )
    if values.min_pass_rate:
        gate["min_pass_rate"] = _number(values.min_pass_rate, "gate.min_pass_rate", integer=False)
    cost: dict[str, Any] = {}
    if values.max_avg_usd:
        cost["max_avg_usd"] = _number(values.max_avg_usd, "gate.cost.max_avg_usd", integer=False)
    if values.max_delta_pct:
        cost["max_delta_pct"] = _number(
            values.max_delta_pct, "gate.cost.max_delta_pct", integer=False
        )
    if cost:
        gate["cost"] = cost
    body["gate"] = gate
    return body


def is_terminal(status: str) -> bool:
    return status in TERMINAL
