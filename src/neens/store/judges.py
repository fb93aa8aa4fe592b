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
    """Composite components must be scoreable judges of the project, and form no cycle."""
    ids = [c["judgeId"] for c in components]
    rows = {
        r.id: r for r in await s.scalars(in_project(Judge, project_id).where(Judge.id.in_(ids)))
    }
    for index, component_id in enumerate(ids):
        row = rows.get(component_id)
        field = f"components[{index}].judgeId"
        if row is None:
            raise JUDGE.missing(component_id, field=field)
        if row.type == "classifier":
            raise Unprocessable(
                f"judge {row.name!r} is a classifier: it assigns labels, not scores, "
                "so it cannot be part of a composite",
                field=field,
            )
        if judge_id is not None and await _reaches(s, component_id, judge_id):
            raise Unprocessable(
                f"judge {row.name!r} already includes this composite: that would be a cycle",
                field=field,
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
        row = await owned(s, JUDGE, project_id, judge_id)
        if "components" in fields:
            if row.type != "composite":
                raise Unprocessable("only a composite judge has components", field="components")
            await check_components(s, project_id, fields["components"], row.id)
            row.config = {**row.config, "components": fields.pop("components")}
        for name, value in fields.items():
            setattr(row, name, value)
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
    if len(set(ids)) != len(ids):
        raise Unprocessable("a judge is listed twice", field="judge_deployment_ids")
    return list(ids)
