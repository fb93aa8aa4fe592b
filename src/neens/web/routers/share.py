"""The public page of a share link, `/ui/share/{token}`: no sign-in, read-only, and exactly as
redacted as its JSON twin `GET /share/{token}` (labels only: no ids, prompts or answers), whose
function it renders. An unknown link is 404, an expired, revoked or turned-off one 410."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from neens.api.routers import share_links as api_share
from neens.web.guard import db_of
from neens.web.render import render, segment

router = APIRouter()


def ranked(arms: list[dict[str, Any]], leaderboard: list[str]) -> list[dict[str, Any]]:
    """The arms as the shared leaderboard lists them (by label), the unranked ones after."""
    first = [arm for label in leaderboard for arm in arms if arm["label"] == label]
    return first + [arm for arm in arms if arm["label"] not in leaderboard]


@router.get("/share/{token}")
async def shared_page(request: Request, token: str) -> Response:
    result = await api_share.shared(token, db_of(request))
    return render(
        request,
        "share/public.html",
        None,
        twin=f"/share/{segment(token)}",
        twin_public=True,
        robots_noindex=True,
        s=result,
        ranked=ranked,
    )
