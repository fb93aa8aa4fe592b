"""Judge deployments, and each project's composite Primary Score."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict, Unprocessable
from neens.store.db import Database, unique_violated
from neens.store.ids import new_id
from neens.store.models import Judge
from neens.store.sweep_pins import refuse_while_pinned, sweeps_scoring_with
from neens.store.tenancy import JUDGE, in_project, owned, owned_by

PRIMARY_SCORE = "Primary Score"
SIMILARITY_JUDGE = "Expected-output similarity"
SCOREABLE = ("managed", "llm_prompt", "composite")
NAME_UNIQUE = "uq_judges_project_id_name"
"""The constraint that keeps judge names unique in a project (`Database.write_unique`)."""


@dataclass(frozen=True, slots=True)
class JudgeInfo:
    id: str
    name: str
    type: str
    config: dict[str, Any]
    secret: str | None
    """An LLM endpoint's API key as stored (encrypted; `engine.judging.llm_endpoint` decrypts
    it for the call): never for responses."""
    enabled: bool
    score_production: bool
    is_primary: bool
    created_at: datetime


def _info(row: Judge) -> JudgeInfo:
    return JudgeInfo(
        row.id,
        row.name,
        row.type,
        dict(row.config),
        row.secret,
        row.enabled,
        row.score_production,
        row.is_primary,
        row.created_at,
    )


async def ensure_primary(s: AsyncSession, project_id: str) -> str:
    """The project's Primary Score id, created on first need.

    It starts as a composite of one built-in judge (similarity to the expected output), so a run
    works offline out of the box; add or reweight components with `PATCH /judges/{id}`.
    """
    primary = await s.scalar(
        select(Judge.id).where(owned_by(Judge, project_id), Judge.is_primary.is_(True))
    )
    if primary is not None:
        return primary
    similarity = Judge(
        id=new_id("jdg_"),
        project_id=project_id,
        name=SIMILARITY_JUDGE,
        type="managed",
        config={"check": "fuzzy_similarity", "options": {}},
    )
    primary_row = Judge(
        id=new_id("jdg_"),
        project_id=project_id,
        name=PRIMARY_SCORE,
        type="composite",
        config={"components": [{"judgeId": similarity.id, "weight": 1.0}]},
        is_primary=True,
    )
    try:
        async with s.begin_nested():
            s.add_all([similarity, primary_row])
    except IntegrityError as exc:
        # Another transaction made the project's Primary Score first (PostgreSQL: this insert
        # waited for it to commit): use that one.
        if unique_violated(exc) != NAME_UNIQUE:
            raise
        primary = await s.scalar(
            select(Judge.id).where(owned_by(Judge, project_id), Judge.is_primary.is_(True))
        )
        if primary is None:
            raise
        return primary
    return primary_row.id


async def create_judge(
    db: Database,
    project_id: str,
    *,
    name: str,
    type: str,
    config: dict[str, Any],
    secret: str | None,
    enabled: bool,
    score_production: bool,
) -> JudgeInfo:

    async def work(s: AsyncSession) -> Judge:
        await ensure_primary(s, project_id)
        if await s.scalar(select(Judge.id).where(owned_by(Judge, project_id), Judge.name == name)):
            raise Conflict(f"a judge named {name!r} already exists", field="name")
        if type == "composite":
            await check_components(s, project_id, config["components"], None)
        row = Judge(
            id=new_id("jdg_"),
            project_id=project_id,
            name=name,
            type=type,
            config=config,
            secret=None if secret is None else db.secrets.seal(secret),
            enabled=enabled,
            score_production=score_production,
        )
        s.add(row)
        return row

    row = await db.write_unique(work, NAME_UNIQUE)
    db.memo_forget("production-judges", project_id)
    return _info(row)


async def check_components(
    s: AsyncSession, project_id: str, components: list[dict[str, Any]], judge_id: str | None
) -> None:
    """The rules for a composite's components, whether it is created (`judge_id` None) or
    changed: each is an enabled, scoreable judge of the project, listed once, and none is the
    composite itself or includes it (a cycle). Errors name `components[i].judgeId`.

    A disabled component is refused as `POST /preprod-evals` refuses a disabled judge: through
    the composite it would still score every run. The rows are read `FOR SHARE` (PostgreSQL), so
    a concurrent `PATCH` disabling one waits for this transaction, then sees the composite that
    uses it (`_check_enabled_change`).
    """
    ids = [c["judgeId"] for c in components]
    rows = {
        r.id: r
        for r in await s.scalars(
            in_project(Judge, project_id)
            .where(Judge.id.in_(ids))
            .with_for_update(read=True)
            .execution_options(populate_existing=True)
        )
    }
    first: dict[str, int] = {}
    for index, component_id in enumerate(ids):
        row = rows.get(component_id)
        field = f"components[{index}].judgeId"
        if row is None:
            raise JUDGE.missing(component_id, field=field)
        if component_id == judge_id:
            raise Unprocessable(
                f"judge {row.name!r} is this composite: a composite cannot be its own component",
                field=field,
            )
        if row.type == "classifier":
            raise Unprocessable(
                f"judge {row.name!r} is a classifier: it assigns labels, not scores, "
                "so it cannot be part of a composite",
                field=field,
            )
        if not row.enabled:
            raise Unprocessable(
                f"judge {row.name!r} is disabled: enable it first, or leave it out", field=field
            )
        if component_id in first:
            raise Unprocessable(
                f"judge {row.name!r} is already components[{first[component_id]}]: list each "
                "judge once, with the whole weight it should have",
                field=field,
            )
        first[component_id] = index
        if judge_id is not None and await _reaches(s, component_id, judge_id):
            raise Unprocessable(
                f"judge {row.name!r} already includes this composite: that would be a cycle",
                field=field,
            )


async def _check_enabled_change(s: AsyncSession, project_id: str, row: Judge) -> None:
    """Keep every enabled composite's components enabled, naming what is in the way (409).

    A disabled judge cannot be picked for a run, but a composite that uses it would go on
    scoring it: so a judge that an enabled composite uses cannot be disabled until those
    composites are disabled or no longer use it, and a composite is enabled again only once its
    components are. `row` holds the requested state and is locked (`FOR UPDATE`), so a
    concurrent change of a composite's components (`check_components`) sees it.
    """
    if not row.enabled and row.is_primary:
        raise Conflict(
            f"judge {row.name!r} is the Primary Score, which runs and sweeps use when they name "
            "no judge: it cannot be disabled; change its components instead",
            field="enabled",
        )
    if not row.enabled:
        composites = await s.scalars(
            in_project(Judge, project_id)
            .where(Judge.type == "composite", Judge.enabled.is_(True), Judge.id != row.id)
            .order_by(Judge.created_at, Judge.id)
        )
        users = [
            c.name
            for c in composites
            if any(part.get("judgeId") == row.id for part in c.config.get("components", []))
        ]
        if users:
            raise Conflict(
                f"judge {row.name!r} is a component of the enabled composite(s) "
                f"{', '.join(repr(name) for name in users)}: remove it from their components "
                "or disable them first",
                field="enabled",
            )
    elif row.type == "composite":
        ids = [part["judgeId"] for part in row.config.get("components", [])]
        disabled = await s.scalars(
            in_project(Judge, project_id)
            .where(Judge.id.in_(ids), Judge.enabled.is_(False))
            .with_for_update(read=True)
        )
        names = sorted(c.name for c in disabled)
        if names:
            raise Conflict(
                f"the composite's component(s) {', '.join(repr(name) for name in names)} "
                f"{'is' if len(names) == 1 else 'are'} disabled: enable them first, or change "
                "its components",
                field="enabled",
            )


async def _reaches(s: AsyncSession, start: str, target: str) -> bool:
    """Whether composite `start` includes `target`, directly or through other composites."""
    seen: set[str] = set()
    frontier = [start]
    while frontier:
        current = frontier.pop()
        if current == target:
            return True
        if current in seen:
            continue
        seen.add(current)
        row = await s.get(Judge, current)
        if row is not None and row.type == "composite":
            frontier.extend(c["judgeId"] for c in row.config.get("components", []))
    return False


async def update_judge(
    db: Database, project_id: str, judge_id: str, fields: dict[str, Any]
) -> JudgeInfo:
    async with db.write() as s:
        row = await owned(s, JUDGE, project_id, judge_id, for_update=True)
        changing = (
            "components"
            if "components" in fields and fields["components"] != row.config.get("components")
            else "enabled"
            if fields.get("enabled") is False and row.enabled
            else None
        )
        if changing is not None:
            refuse_while_pinned(
                f"judge {row.name!r} ({changing})",
                await sweeps_scoring_with(s, project_id, row.id),
                changing,
            )
        if "components" in fields:
            if row.type != "composite":
                raise Unprocessable("only a composite judge has components", field="components")
            await check_components(s, project_id, fields["components"], row.id)
            row.config = {**row.config, "components": fields.pop("components")}
        was_enabled = row.enabled
        for name, value in fields.items():
            setattr(row, name, value)
        if row.enabled != was_enabled:
            await _check_enabled_change(s, project_id, row)
    db.memo_forget("production-judges", project_id)
    return _info(row)


async def list_judges(db: Database, project_id: str) -> list[JudgeInfo]:
    async with db.write() as s:
        await ensure_primary(s, project_id)
        rows = await s.scalars(in_project(Judge, project_id).order_by(Judge.created_at, Judge.id))
        return [_info(r) for r in rows]


async def get_judge(db: Database, project_id: str, judge_id: str) -> JudgeInfo:
    async with db.read() as s:
        row = await owned(s, JUDGE, project_id, judge_id)
    return _info(row)


async def judges_by_id(s: AsyncSession, project_id: str, ids: list[str]) -> dict[str, JudgeInfo]:
    """The judges named, plus every composite's components, recursively."""
    found: dict[str, JudgeInfo] = {}
    frontier = list(ids)
    while frontier:
        rows = await s.scalars(
            in_project(Judge, project_id).where(Judge.id.in_(frontier), Judge.id.notin_(found))
        )
        frontier = []
        for row in rows:
            found[row.id] = _info(row)
            if row.type == "composite":
                frontier.extend(c["judgeId"] for c in row.config.get("components", []))
    return found


async def resolve_run_judges(s: AsyncSession, project_id: str, ids: list[str] | None) -> list[str]:
    """The judges a run will use: the ones asked for, or the Primary Score. Refuses unknown,
    disabled and classifier judges (a classifier assigns labels, not pass/fail scores)."""
    if ids is None:
        return [await ensure_primary(s, project_id)]
    rows = {
        r.id: r for r in await s.scalars(in_project(Judge, project_id).where(Judge.id.in_(ids)))
    }
    for index, judge_id in enumerate(ids):
        field = f"judge_deployment_ids[{index}]"
        row = rows.get(judge_id)
        if row is None:
            raise JUDGE.missing(judge_id, field=field)
        if not row.enabled:
            raise Unprocessable(f"judge {row.name!r} is disabled", field=field)
    if all(rows[j].type == "classifier" for j in ids):
        raise Unprocessable(
            "a classifier judge assigns a category label, not a pass/fail score: "
            "pick at least one LLM-prompt, managed or composite judge",
            field="judge_deployment_ids",
        )
    for index, judge_id in enumerate(ids):
        if rows[judge_id].type == "classifier":
            raise Unprocessable(
                f"judge {rows[judge_id].name!r} is a classifier; only scoreable judges "
                "(llm_prompt, managed, composite) can score a run",
                field=f"judge_deployment_ids[{index}]",
            )
    first: dict[str, int] = {}
    for index, judge_id in enumerate(ids):
        if judge_id in first:
            raise Unprocessable(
                f"judge {rows[judge_id].name!r} is listed twice (also at [{first[judge_id]}]); "
                "list each judge once",
                field=f"judge_deployment_ids[{index}]",
            )
        first[judge_id] = index
    return list(ids)
