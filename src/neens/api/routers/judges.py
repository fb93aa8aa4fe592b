"""`/judges`: judge deployments, including the project's composite Primary Score."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from neens.api.deps import AdminKey, AnyKey, DbDep, SettingsDep
from neens.api.schemas.judges import (
    ClassifierJudgeIn,
    CompositeJudgeIn,
    JudgeIn,
    JudgeList,
    JudgeOut,
    JudgeUpdate,
    LlmPromptJudgeIn,
    ManagedJudgeIn,
)
from neens.domain.judges import validate_labels, validate_managed_config, validate_template
from neens.engine.destinations import check_url, shown_url
from neens.errors import Unprocessable
from neens.store import judges as store
from neens.store.keys import Principal

router = APIRouter(prefix="/judges", tags=["judges"])


def judge_out(info: store.JudgeInfo, principal: Principal) -> JudgeOut:
    """The judge as `principal` may read it: its API key is never shown, and to a key that
    cannot edit it (not an admin) its endpoint's base URL is shown without userinfo or query
    string, where an endpoint keeps credentials too."""
    return JudgeOut(
        id=info.id,
        name=info.name,
        type=info.type,
        config=info.config if principal.role == "admin" else _config_shown(info.config),
        has_api_key=info.secret is not None,
        enabled=info.enabled,
        score_production=info.score_production,
        is_primary=info.is_primary,
        created_at=info.created_at,
    )


def _config_shown(config: dict[str, Any]) -> dict[str, Any]:
    endpoint = config.get("endpoint")
    if not isinstance(endpoint, dict) or not isinstance(endpoint.get("baseUrl"), str):
        return config
    return {**config, "endpoint": {**endpoint, "baseUrl": shown_url(endpoint["baseUrl"])}}


def _endpoint(body: LlmPromptJudgeIn | ClassifierJudgeIn) -> dict[str, Any]:
    return {
        "baseUrl": str(body.endpoint.base_url).rstrip("/"),
        "model": body.endpoint.model,
        "timeoutS": body.endpoint.timeout_s,
    }


def _config(body: JudgeIn) -> tuple[dict[str, Any], str | None]:
    """The stored config and the secret, validated; errors name the body's fields."""
    if isinstance(body, ManagedJudgeIn):
        try:
            options = validate_managed_config(body.check, body.config)
        except Unprocessable as exc:
            raise Unprocessable(exc.message, field=exc.field or "config") from None
        return {"check": body.check, "options": options}, None
    if isinstance(body, CompositeJudgeIn):
        return {"components": [c.model_dump(by_alias=True) for c in body.components]}, None
    validate_template(body.template)
    config = {"template": body.template, "endpoint": _endpoint(body)}
    if isinstance(body, ClassifierJudgeIn):
        config["labels"] = validate_labels(body.labels)
    return config, body.endpoint.api_key


@router.post("", status_code=201, operation_id="judges-create")
async def create_judge(
    body: JudgeIn, principal: AdminKey, db: DbDep, settings: SettingsDep
) -> JudgeOut:
    config, secret = _config(body)
    if "endpoint" in config:
        allow = settings.allow_private_destinations
        check_url(config["endpoint"]["baseUrl"], allow_private=allow, field="endpoint.baseUrl")
    info = await store.create_judge(
        db,
        principal.project_id,
        name=body.name,
        type=body.type,
        config=config,
        secret=secret,
        enabled=body.enabled,
        score_production=body.score_production,
    )
    return judge_out(info, principal)


@router.get("", operation_id="judges-list")
async def list_judges(principal: AnyKey, db: DbDep) -> JudgeList:
    """The project's judges; the Primary Score is created on first need."""
    return JudgeList(
        judges=[judge_out(i, principal) for i in await store.list_judges(db, principal.project_id)]
    )


@router.get("/{judge_id}", operation_id="judges-get")
async def get_judge(judge_id: str, principal: AnyKey, db: DbDep) -> JudgeOut:
    return judge_out(await store.get_judge(db, principal.project_id, judge_id), principal)


@router.patch("/{judge_id}", operation_id="judges-update")
async def update_judge(
    judge_id: str, body: JudgeUpdate, principal: AdminKey, db: DbDep
) -> JudgeOut:
    """Enable or disable a judge, switch production scoring, or change a composite's parts."""
    fields = body.model_dump(exclude_unset=True)
    if "components" in fields:
        fields["components"] = [c.model_dump(by_alias=True) for c in body.components or []]
    return judge_out(
        await store.update_judge(db, principal.project_id, judge_id, fields), principal
    )
