"""The MCP tools: what a coding agent may call, each a thin shell over the route it mirrors.

A tool takes the body (or the parameters) of its HTTP route, in the same camelCase, validated by
the same pydantic model, and answers the JSON the route answers, built by the same function
(`neens.api.routers.model_sweeps`), so a tool and its route cannot disagree. The descriptions
are read by the agent, not by a person browsing the code: each says what the tool does and the
honesty rules of what it returns.

`sweep_tools` registers the sweep tools; `decision_tools` the sweep decision tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import model_sweeps as routes
from neens.api.routers.sweep_decisions import comparison_out
from neens.api.schemas.base import RequestBody
from neens.api.schemas.decisions import SweepComparisonOut
from neens.api.schemas.sweeps import SweepIn, SweepList, SweepOut, SweepPreviewOut
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import Principal
from neens.views import sweeps as views
from neens.views.decisions import sweep_decision


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls a tool and what it runs against."""

    db: Database
    settings: Settings
    principal: Principal
    """The key's project and role: every tool reads and writes in that project only."""
    wake_worker: Callable[[], None]
    """Wakes the job workers of this process after work was enqueued (workers of other
    processes find it by polling)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its name, what the agent reads about it, its input and output models, and what
    it does."""

    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    run: Callable[[Caller, Any], Awaitable[BaseModel]]
    """Called with the validated input model; returns the output model."""
    read_only: bool
    open_world: bool = False
    """True when the tool makes Neens call out (agents, judges) and spend money."""

    def tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_model.model_json_schema(by_alias=True),
            output_schema=self.output_model.model_json_schema(by_alias=True, mode="serialization"),
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.read_only,
                open_world_hint=self.open_world,
            ),
        )


@dataclass
class Toolbox:
    """The tools a server offers, by name, in the order they were added."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)

    def add(self, spec: ToolSpec) -> None:
        if spec.name in self.tools:
            raise ValueError(f"two tools named {spec.name!r}")
        self.tools[spec.name] = spec


class _CamelInput(RequestBody):
    """A tool's arguments: checked as a request body is (unknown names, unstorable text such as
    a NUL, non-finite numbers), spelled in camelCase."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


class SweepGetIn(_CamelInput):
    sweep_id: str = Field(min_length=1, max_length=200)
    """The sweep's id, `msw-…`, as `sweep_start` or `sweep_list` returned it."""


class SweepListIn(_CamelInput):
    limit: int = Field(default=20, ge=1, le=200)
    """Sweeps per page."""
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_CHARS)
    """The `nextCursor` of the previous page, passed back unchanged, to read the page after it."""


HONESTY = """\
How to read a sweep — say these the way they are, never round them into a verdict:
- `status: "void"` means the arms were not run under the same conditions (`voidReason` says \
what diverged, `divergedArms` which arms). A void sweep must never be ranked, compared or \
called a pass, whatever its arms' own numbers say; report the void reason instead.
- An arm's `passed` is pass^k: `true` only when all k runs finished and all k are green; \
`false` when k finished and not all are green (2 green runs of 3 is not a pass); `null` while \
fewer than k runs finished, or when the arm failed or was cancelled first: no verdict, never \
"passed so far" and never a failure.
- `estimatedUsd: null` (preview) means unpriced: the cost is unknown, never free or $0. \
`partial: true` means at least one arm is unpriced, so the total leaves it out. \
`unpricedCalls` counts answers whose cost is unknown and is not in `spentUsd`.
- The sweep's `status` says whether it finished: `pending` and `running` are not results yet."""

_PREVIEW = f"""\
Estimate what a model sweep would call and cost, before starting it. Writes nothing, calls no \
agent and spends nothing.

A model sweep replays one frozen golden dataset against several models, one per arm (each arm \
is an agent connection, `conn_…`, configured in Neens), under identical conditions, k times \
per arm (`passK`, default 3). Takes the same input as `sweep_start` (`versionLabel` may be \
left out here). Answers, per arm, the model, the calls (k × items) and `estimatedUsd` with what \
it rests on (`basis`: `history`, `prompts` or `unpriced`; `basisDetail` in words); then \
`totalCalls`, `estimatedUsd` (the priced arms' sum), `partial`, and with `budgetUsd`, \
`wouldRefuse` and `refusal`.

- `estimatedUsd: null` means unpriced (no model recorded on the connection, or no price known \
for it): the cost is unknown, never free. Do not add it up as 0.
- `partial: true` means some arm is unpriced and the total covers only the priced ones.
- A `prompts` estimate counts only the dataset's text; the real cost is likely higher.

The same refusals as `sweep_start` come back as errors naming the field (fewer than two arms, \
one label or connection used twice, an unknown dataset or connection, the caps).

{HONESTY}"""

_START = f"""\
Start a model sweep: replay one frozen golden dataset against several models (one arm per \
agent connection) k times each under pinned conditions, and answer the new sweep (`msw-…`) as \
`sweep_get` would. Starting one calls your agents and spends money: preview it first with \
`sweep_preview`, and set `budgetUsd` to cap the spend.

Input, camelCase: `versionLabel` (required: what is being evaluated, e.g. a git SHA), `name`, \
`datasetId` or `datasetVersionId`, `passK` (runs per arm, default 3), `budgetUsd`, \
`judgeDeploymentIds` (default: the project's Primary Score), `gate` (e.g. \
`{{"min_pass_rate": 0.9}}`), and `arms`: `[{{"label", "agentConnectionId"}}]`, at least two.

Refused, as an error naming the field: fewer than two arms (`arms`; one arm compares nothing), \
two arms with one label or on one connection (`arms[1].label`, `arms[1].agentConnectionId`), a \
dataset, version, connection or judge not in this project, the caps on arms, k and calls, and \
an estimate over `budgetUsd`.

The sweep runs in the background: it starts `running`; poll it with `sweep_get` until its \
status is `completed`, `completed_with_failures`, `failed`, `cancelled` or `void`.

{HONESTY}"""

_GET = f"""\
Read one model sweep by id (`msw-…`), each arm rolled up from its child runs as they are now.

Answers the sweep's `status` (`pending`, `running`, `completed`, `completed_with_failures`, \
`failed`, `cancelled`, `void`), `reason` (why it was cancelled or failed), `voidReason` and \
`divergedArms`, `spentUsd`, `unpricedCalls`, `budgetUsd`, the pinned conditions \
(`fingerprint`, `passK`, judges, gate, dataset version) and per arm: `status`, `progress` \
(`runsFinished` of `runs`, `itemsDone` of `itemsTotal`), `greenRuns`, `passed`, `error` and \
`runIds` (its pre-prod runs). A sweep id that is not in this key's project answers as not \
found.

{HONESTY}"""

_LIST = f"""\
List this project's model sweeps, newest first, 20 per page (`limit` up to 200), each as \
`sweep_get` answers it. When `nextCursor` is not null, pass it back as `cursor` for the next \
page.

{HONESTY}"""


async def _preview(caller: Caller, body: SweepIn) -> SweepPreviewOut:
    project = caller.principal.project_id
    new = routes.new_sweep(body, creating=False)
    return routes.preview_out(await views.preview_sweep(caller.db, project, new, caller.settings))


async def _start(caller: Caller, body: SweepIn) -> SweepOut:
    project = caller.principal.project_id
    new = routes.new_sweep(body, creating=True)
    sweep_id = await views.create_sweep(caller.db, project, new, caller.settings)
    caller.wake_worker()
    return routes.sweep_out(await views.sweep_detail(caller.db, project, sweep_id))


async def _get(caller: Caller, body: SweepGetIn) -> SweepOut:
    project = caller.principal.project_id
    return routes.sweep_out(await views.sweep_detail(caller.db, project, body.sweep_id))


async def _list(caller: Caller, body: SweepListIn) -> SweepList:
    return await routes.sweep_page(
        caller.db, caller.principal.project_id, limit=body.limit, cursor=body.cursor
    )


def sweep_tools(toolbox: Toolbox) -> None:
    """Preview, start, read and list model sweeps: the tools of `/model-sweeps`."""
    toolbox.add(
        ToolSpec(
            "sweep_preview", "Preview a model sweep's cost", _PREVIEW, SweepIn, SweepPreviewOut,
            _preview, read_only=True,
        )
    )  # fmt: skip
    toolbox.add(
        ToolSpec(
            "sweep_start", "Start a model sweep", _START, SweepIn, SweepOut, _start,
            read_only=False, open_world=True,
        )
    )  # fmt: skip
    toolbox.add(
        ToolSpec(
            "sweep_get", "Read a model sweep", _GET, SweepGetIn, SweepOut, _get, read_only=True
        )
    )
    toolbox.add(
        ToolSpec(
            "sweep_list", "List model sweeps", _LIST, SweepListIn, SweepList, _list,
            read_only=True,
        )
    )  # fmt: skip


class SweepDecisionIn(_CamelInput):
    sweep_id: str = Field(min_length=1, max_length=200)
    """The sweep's id, `msw-…`."""
    bar: float | None = Field(default=None, ge=0, le=1)
    """The pass rate an arm has to clear, 0 to 1; default: the sweep's pinned gate, else 0.9."""
    baseline_arm: str | None = Field(default=None, min_length=1, max_length=200)
    """The arm (`msa-…`) savings and regressions are measured against; default: the first arm."""


DECISION_RULES = (
    "Read the answer exactly as it is; these four rules are not optional:\n"
    "- `comparable: false` means the sweep is void: never rank its arms, name a winner or "
    "compare them, whatever their own numbers say. Report `voidReason` instead.\n"
    "- `costPerCaseUsd: null` means unpriced: the cost is unknown, never free or $0. "
    "`pricedCases` against `cases` says how much of an arm its cost covers.\n"
    "- `rate: null` means no data (nothing was scored), not 0%.\n"
    "- An item counts as passed only when it passed every one of its scored repeats; an item "
    "that passed on some repeats and failed on others is counted in `flakyItems`, never as a "
    "pass."
)

_DECISION = (
    "Read a model sweep's decision: which arm (model) to ship, at what bar, at what cost per "
    "case, overall and per agent name. The same answer as GET /model-sweeps/{id}/comparison, "
    "computed by the server: never re-rank or re-derive it.\n\n"
    "`verdict.sentence` says the verdict in one sentence; `verdict.outcome` is `recommended`, "
    "`no_arm_clears`, `not_finished` (an arm is still running: no recommendation yet) or "
    "`unavailable` (void). `bar.source` says where the bar came from (`query`, `gate` or "
    "`default`). The baseline arm is the first arm unless `baselineArm` is given; it is never "
    "chosen for being the best. Per arm: `rate` over items with its 95% Wilson interval and "
    "`n`, `regressions` against the baseline, `excluded` (why it is not ranked), "
    "`notDistinguishable` (its interval overlaps the winner's: do not call one better than the "
    "other), `mcnemar` (a second, paired test line, not the ranking rule). `agents` repeats it "
    "per agent name, with `Unattributed` for items no single agent name can be given to.\n\n"
    + DECISION_RULES
)


async def _decision(caller: Caller, body: SweepDecisionIn) -> SweepComparisonOut:
    decision = await sweep_decision(
        caller.db,
        caller.principal.project_id,
        body.sweep_id,
        bar=body.bar,
        baseline_arm_id=body.baseline_arm,
    )
    return comparison_out(decision)


def decision_tools(toolbox: Toolbox) -> None:
    """The tool that reads a sweep's decision (`GET /model-sweeps/{id}/comparison`)."""
    toolbox.add(
        ToolSpec(
            "sweep_decision", "Read a model sweep's decision", _DECISION, SweepDecisionIn,
            SweepComparisonOut, _decision, read_only=True,
        )
    )  # fmt: skip


def all_tools() -> Toolbox:
    """Every tool the Neens MCP server offers."""
    toolbox = Toolbox()
    sweep_tools(toolbox)
    decision_tools(toolbox)
    return toolbox
