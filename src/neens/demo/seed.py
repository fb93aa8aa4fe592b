"""Seeding the worked example through a running server's own HTTP API, as a team would.

Configuration (prices, the golden dataset, judges and the Primary Score, agent connections) is
made with an admin key; production traces are sent, and the pre-prod runs and the sweep are
started and followed, with an ingest key, as an agent and a CI job hold one. Nothing is written
to the database directly: the runs and the sweep run for real in push mode, calling the
simulated endpoints, and every number the demo shows comes from the server.

Order matters in two places: production must be scored before the first pre-prod run is created
(its baseline is the production window), and the second run is created when the first has
finished (its baseline is the first run).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx

from neens.demo import catalog

RUN_TERMINAL = {"completed", "completed_with_regressions", "failed", "cancelled"}
SWEEP_TERMINAL = {"completed", "completed_with_failures", "failed", "cancelled", "void"}
POLL_S = 0.25
RUN_GATE: Mapping[str, float] = {"max_regressions": 0, "min_pass_rate": 0.9}


class SeedError(Exception):
    """Seeding stopped; the message says at which step and why."""


class Progress(Protocol):
    """Where seeding reports what it does (the command draws it on standard error)."""

    def step(self, text: str) -> None:
        """A step begins."""

    def sweep(self, done: int, total: int, detail: str) -> None:
        """The sweep's answers scored so far, of all, and each arm's state in a few words."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the simulated endpoints listen."""

    base_url: str
    models: Mapping[str, str]
    """Arm label -> the URL of the agent on that model."""
    agent: str
    judge_base_url: str


@dataclass
class Seeded:
    """What was made, by id, and the sweep's comparison as the server answered it."""

    dataset_id: str = ""
    judges: dict[str, str] = field(default_factory=dict)
    primary_score_id: str = ""
    connections: dict[str, str] = field(default_factory=dict)
    agent_connection_id: str = ""
    production_sessions: int = 0
    sweep_id: str = ""
    preprod_runs: dict[str, str] = field(default_factory=dict)
    """Version label -> run id."""
    run_statuses: dict[str, str] = field(default_factory=dict)
    estimate: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, Any] = field(default_factory=dict)
    comparison: dict[str, Any] = field(default_factory=dict)


class Api:
    """A client of one key that turns any unexpected answer into a SeedError naming the call."""

    def __init__(self, base_url: str, key: str) -> None:
        self.client = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60.0
        )

    def __call__(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        try:
            r = self.client.request(method, path, json=body, params=params or None)
        except httpx.HTTPError as exc:
            raise SeedError(f"{method} {path} got no answer: {exc}") from None
        if not r.is_success:
            raise SeedError(f"{method} {path} answered HTTP {r.status_code}: {r.text[:500]}")
        return r.json() if r.content else None

    def close(self) -> None:
        self.client.close()


def seed(
    base_url: str,
    *,
    admin_key: str,
    ingest_key: str,
    endpoints: Endpoints,
    progress: Progress,
    timeout_s: float = 300.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Seeded:
    """Create the worked example on the server at `base_url` and wait for it to finish."""
    admin, ingest = Api(base_url, admin_key), Api(base_url, ingest_key)
    try:
        return _seed(admin, ingest, endpoints, progress, time.monotonic() + timeout_s, clock)
    finally:
        admin.close()
        ingest.close()


def _seed(
    admin: Api,
    ingest: Api,
    endpoints: Endpoints,
    progress: Progress,
    deadline: float,
    clock: Callable[[], datetime],
) -> Seeded:
    seeded = Seeded()
    progress.step("Pricing the simulated models (one is left unpriced: it is self-hosted)")
    _price(admin)
    progress.step(f"Pushing the golden dataset ({len(catalog.ITEMS)} items, two agents)")
    seeded.dataset_id = _golden_dataset(admin)
    progress.step("Creating the rubric judges and the Primary Score")
    _judges(admin, endpoints.judge_base_url, seeded)
    progress.step("Connecting the agent on each simulated model")
    for model in catalog.MODELS:
        seeded.connections[model.label] = _connection(
            admin, f"support-agent on {model.model} (simulated)", endpoints.models[model.label],
            model.model,
        )  # fmt: skip
    seeded.agent_connection_id = _connection(
        admin, "support-agent (simulated)", endpoints.agent, catalog.AGENT_MODEL.model
    )
    progress.step(f"Sending production traces of support-agent {catalog.PRODUCTION.label}")
    sessions = production_sessions(clock())
    for session in sessions:
        ingest("POST", "/sessions", session)
    seeded.production_sessions = len(sessions)
    _wait_for_production_scores(ingest, len(sessions), deadline)
    progress.step("Estimating the sweep's cost")
    arms = [
        {"label": model.label, "agentConnectionId": seeded.connections[model.label]}
        for model in catalog.MODELS
    ]
    sweep = {"datasetId": seeded.dataset_id, "passK": catalog.PASS_K, "arms": arms}
    sweep["budgetUsd"] = catalog.BUDGET_USD
    seeded.estimate = ingest("POST", "/model-sweeps/preview", sweep)
    progress.step(
        f"Running the sweep ({len(arms)} arms × {catalog.PASS_K} runs × {len(catalog.ITEMS)} "
        f"items) and the pre-prod runs of {catalog.CANDIDATE.label} and {catalog.REGRESSED.label}"
    )
    sweep |= {"name": catalog.SWEEP, "versionLabel": catalog.CANDIDATE.label}
    sweep["gate"] = dict(catalog.GATE)
    seeded.sweep_id = ingest("POST", "/model-sweeps", sweep)["id"]
    _follow(ingest, seeded, progress, deadline)
    seeded.comparison = ingest("GET", f"/model-sweeps/{seeded.sweep_id}/comparison")
    return seeded


def _price(admin: Api) -> None:
    for model in catalog.MODELS:
        if model.price is not None:
            price = {
                "inputPerMTokUsd": model.price.input_per_mtok,
                "outputPerMTokUsd": model.price.output_per_mtok,
            }
            admin("PUT", f"/model-pricing/{model.model}", price)


def _golden_dataset(admin: Api) -> str:
    dataset_id = str(admin("POST", "/datasets", {"name": catalog.DATASET})["id"])
    items = [
        {
            "input": item.prompt,
            "expected_output": item.expected,
            "metadata": {"key": item.key, "agent": item.agent, "kind": item.kind},
        }
        for item in catalog.ITEMS
    ]
    admin("POST", f"/datasets/{dataset_id}/versions", {"items": items, "golden": True})
    return dataset_id


def _judges(admin: Api, judge_base_url: str, seeded: Seeded) -> None:
    """The rubrics as LLM-prompt judges on the simulated judge model, and the Primary Score
    (created by the server on first need) made their weighted mean."""
    for rubric in catalog.RUBRICS:
        judge = {
            "name": rubric.name,
            "type": "llm_prompt",
            "template": rubric.template,
            "endpoint": {"baseUrl": judge_base_url, "model": catalog.JUDGE_MODEL},
            "scoreProduction": rubric.score_production,
        }
        seeded.judges[rubric.name] = admin("POST", "/judges", judge)["id"]
    primary = next(j for j in admin("GET", "/judges")["judges"] if j["isPrimary"])
    seeded.primary_score_id = primary["id"]
    components = [
        {"judgeId": seeded.judges[rubric.name], "weight": rubric.weight}
        for rubric in catalog.RUBRICS
    ]
    admin("PATCH", f"/judges/{primary['id']}", {"components": components})


def _follow(ingest: Api, seeded: Seeded, progress: Progress, deadline: float) -> None:
    """Start the first pre-prod run, the second when the first has finished, and wait for
    them and the sweep; SeedError as soon as a run fails or is cancelled, or when the sweep
    ends other than completed."""
    first = _preprod_run(ingest, seeded, catalog.CANDIDATE, {"kind": "prod_window", "range": "7d"})
    second: str | None = None
    while True:
        sweep = ingest("GET", f"/model-sweeps/{seeded.sweep_id}")
        _report(progress, sweep)
        for label, run_id in seeded.preprod_runs.items():
            if seeded.run_statuses.get(run_id) in RUN_TERMINAL:
                continue
            run = ingest("GET", f"/preprod-evals/{run_id}")
            seeded.run_statuses[run_id] = run["status"]
            if run["status"] in ("failed", "cancelled"):
                items = ingest("GET", f"/preprod-evals/{run_id}/items")["items"]
                why = next((i["error"] for i in items if i["error"]), None)
                detail = f" (the first item's error: {why})" if why else ""
                raise SeedError(
                    f"the pre-prod run of {label} ended {run['status']}: {run['error']}{detail}"
                )
        if second is None and seeded.run_statuses[first] in RUN_TERMINAL:
            baseline = {"kind": "preprod_run", "value": first}
            second = _preprod_run(ingest, seeded, catalog.REGRESSED, baseline)
        runs_done = all(s in RUN_TERMINAL for s in seeded.run_statuses.values())
        if sweep["status"] in SWEEP_TERMINAL and second is not None and runs_done:
            break
        if time.monotonic() > deadline:
            raise SeedError(
                f"the sweep and the pre-prod runs did not finish in time: the sweep is "
                f"{sweep['status']} ({_arms_state(sweep)}); runs: {_runs_state(seeded)}"
            )
        time.sleep(POLL_S)
    seeded.sweep = sweep
    if sweep["status"] != "completed":
        errors = "; ".join(f"{a['label']}: {a['error']}" for a in sweep["arms"] if a["error"])
        why = sweep["reason"] or sweep["voidReason"] or errors
        raise SeedError(f"the sweep ended {sweep['status']}: {why}")
    _no_item_errors(ingest, sweep)


def _no_item_errors(ingest: Api, sweep: dict[str, Any]) -> None:
    """SeedError naming the answers that errored: a sweep can complete with some (one failed
    call costs one item), but then its comparison is not the story the catalog predicts, and
    the endpoint's reason says more than the numbers that differ."""
    errors: list[str] = []
    for arm in sweep["arms"]:
        for run_id in arm["runIds"]:
            items = ingest("GET", f"/preprod-evals/{run_id}/items")["items"]
            errors += [f"{arm['label']}, {i['itemId']}: {i['error']}" for i in items if i["error"]]
    if errors:
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        raise SeedError(f"{len(errors)} of the sweep's answers errored: {shown}")


def _connection(admin: Api, name: str, url: str, model: str) -> str:
    body = {
        "name": name,
        "url": url,
        "model": model,
        "provider": catalog.SIMULATED,
        "requestFormat": "neens",
    }
    return str(admin("POST", "/agent-connections", body)["id"])


def _preprod_run(
    ingest: Api, seeded: Seeded, version: catalog.Version, baseline: dict[str, str]
) -> str:
    run = ingest(
        "POST",
        "/preprod-evals",
        {
            "name": f"support-agent {version.label}",
            "dataset_id": seeded.dataset_id,
            "version_label": version.label,
            "runner_mode": "push",
            "agent_connection_id": seeded.agent_connection_id,
            "baseline": baseline,
            "gate": dict(RUN_GATE),
        },
    )
    seeded.preprod_runs[version.label] = run["id"]
    seeded.run_statuses[run["id"]] = run["status"]
    return str(run["id"])


def _wait_for_production_scores(ingest: Api, expected: int, deadline: float) -> None:
    """Production sessions are scored by a job shortly after they arrive; the first pre-prod
    run's baseline reads those scores, so it waits for every one."""
    while True:
        scores = ingest("GET", "/scores", source="production", limit=1000)["scores"]
        if len(scores) >= expected:
            return
        if time.monotonic() > deadline:
            raise SeedError(
                f"only {len(scores)} of {expected} production sessions were scored in time"
            )
        time.sleep(POLL_S)


def _report(progress: Progress, sweep: dict[str, Any]) -> None:
    done = sum(a["progress"]["itemsDone"] for a in sweep["arms"])
    total = sum(a["progress"]["itemsTotal"] for a in sweep["arms"])
    progress.sweep(done, total, _arms_state(sweep))


def _arms_state(sweep: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for arm in sweep["arms"]:
        counts[arm["status"]] = counts.get(arm["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def _runs_state(seeded: Seeded) -> str:
    return ", ".join(
        f"{label} {seeded.run_statuses.get(run_id, '?')}"
        for label, run_id in seeded.preprod_runs.items()
    )


# --- production traffic -------------------------------------------------------------------------

_ORDER = re.compile(r"\b(1\d{4})\b")


def production_sessions(now: datetime) -> list[dict[str, Any]]:
    """The support agent's production traffic over the last days, as native session JSON: one
    session per golden prompt answered by the production version, a few prompts twice. Each is
    an agent span (the agent's name, the question, the answer), an order lookup where there is
    an order number, and the model call with its token counts."""
    asked = [*catalog.ITEMS, *(catalog.BY_KEY[key] for key in catalog.PRODUCTION_REPEATS)]
    model = catalog.AGENT_MODEL
    sessions = []
    for n, item in enumerate(asked):
        started = now - timedelta(hours=3.5 * (len(asked) - n))
        took = catalog.latency_s(900, 2400, catalog.PRODUCTION.label, item.key, n)
        ended = started + timedelta(seconds=took)
        tokens_in, tokens_out = catalog.usage(model.model, item, n)
        output = item.expected if catalog.PRODUCTION.correct(item) else item.mistake
        spans: list[dict[str, Any]] = [
            {
                "id": "agent", "name": item.agent, "kind": "agent", "input": item.prompt,
                "output": output, "start_time": _iso(started), "end_time": _iso(ended),
            },
        ]  # fmt: skip
        called = started + timedelta(seconds=took * 0.2)
        order = _ORDER.search(item.prompt)
        if order is not None:
            looked_up = called + timedelta(seconds=0.15)
            spans.append(
                {
                    "id": "tool", "parent_id": "agent", "name": "orders.lookup", "kind": "tool",
                    "input": f'{{"order_id": "{order[1]}"}}', "output": '{"found": true}',
                    "start_time": _iso(called), "end_time": _iso(looked_up),
                }
            )  # fmt: skip
            called = looked_up
        spans.append(
            {
                "id": "llm", "parent_id": "agent", "name": f"chat {model.model}", "kind": "llm",
                "model": model.model, "input_tokens": tokens_in, "output_tokens": tokens_out,
                "start_time": _iso(called), "end_time": _iso(ended),
            }
        )  # fmt: skip
        sessions.append(
            {
                "session": {
                    "id": f"prod-{n + 1:04d}",
                    "agent_name": item.agent,
                    "attributes": {"service.version": catalog.PRODUCTION.label},
                },
                "spans": spans,
            }
        )
    return sessions


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")
