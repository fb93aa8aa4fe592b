"""Sweeps: the list, a sweep's detail (each arm's own status and progress, followed live while the
sweep runs), Compare arms (the verdict, the bar and where it came from, the leaderboard, the
per-agent verdicts and the cost–quality frontier), an arm's regression drill-down, and making a
redacted share link. Twins: `GET /model-sweeps`, `GET /model-sweeps/{id}`,
`GET /model-sweeps/{id}/comparison`, `GET /model-sweeps/{id}/arms/{arm_id}/regressions`,
`GET /share-links/settings` and `POST /share-links`.

A void sweep's pages show which arms diverged and nothing that compares arms: no Compare arms
button, no ranking, no winner, no frontier (its chart route answers 404)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import model_sweeps as api_sweeps
from neens.api.routers import share_links as api_share
from neens.api.routers import sweep_decisions as api_decisions
from neens.api.schemas.share import ShareLinkIn
from neens.domain.sweeps import SWEEP_TERMINAL
from neens.errors import NotFound, Unprocessable
from neens.views.decisions import sweep_decision
from neens.web.form_numbers import plain_decimal
from neens.web.guard import Viewer, current_viewer, db_of, read_form, settings_of
from neens.web.render import query, render, segment

router = APIRouter()


class _Arm(Protocol):
    @property
    def arm_id(self) -> str: ...


T = TypeVar("T", bound=_Arm)

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
SWEEPS_PER_PAGE = 50
REGRESSIONS_PER_PAGE = 50
CursorQuery = Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS)]
OptionalText = Annotated[str | None, Query(max_length=200)]

FRONTIER_SVG_HEADERS = {
    # Matplotlib's SVG styles itself inline: this response alone allows that, and nothing else.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def _bar(text: str | None) -> float | None:
    """The `?bar=` of a page: empty is no bar (the form sends it empty); else the API's rule,
    written in ASCII digits (`form_numbers`), and `-0` read as 0 so the page never echoes `-0.0`."""
    if text is None or not text.strip():
        return None
    value = plain_decimal(text.strip())
    if value is None:
        raise Unprocessable("bar must be a number from 0 to 1, e.g. 0.9", field="bar")
    if not 0 <= value <= 1:
        raise Unprocessable("bar must be from 0 to 1, e.g. 0.9", field="bar")
    return value


def _arm_param(text: str | None) -> str | None:
    """The `?baselineArm=` of a page: empty (the form's "the first arm") is none."""
    if text is None:
        return None
    return text.strip() or None


def ordered(arms: Sequence[T], leaderboard: Sequence[str]) -> list[T]:
    """The arms as the leaderboard lists them, the unranked ones after in position order: the
    order the API answered, never a ranking of the page's own."""
    by_id = {arm.arm_id: arm for arm in arms}
    ranked = [by_id[ident] for ident in leaderboard if ident in by_id]
    return ranked + [arm for arm in arms if arm.arm_id not in leaderboard]


@router.get("/sweeps")
async def sweep_list(request: Request, viewer: ViewerDep, cursor: CursorQuery = None) -> Response:
    page = await api_sweeps.list_sweeps(
        viewer.principal, db_of(request), limit=SWEEPS_PER_PAGE, cursor=cursor
    )
    return render(
        request,
        "sweeps/list.html",
        viewer,
        section="sweeps",
        twin="/model-sweeps" + query(limit=SWEEPS_PER_PAGE, cursor=cursor),
        sweeps=page.sweeps,
        next_cursor=page.next_cursor,
        cursor=cursor,
        terminal=SWEEP_TERMINAL,
    )


async def _detail(request: Request, viewer: Viewer, sweep_id: str) -> dict[str, Any]:
    sweep = await api_sweeps.get_sweep(sweep_id, viewer.principal, db_of(request))
    return {"sweep": sweep, "terminal": sweep.status in SWEEP_TERMINAL}


@router.get("/sweeps/{sweep_id}")
async def sweep_page(request: Request, sweep_id: str, viewer: ViewerDep) -> Response:
    return render(
        request,
        "sweeps/detail.html",
        viewer,
        section="sweeps",
        twin=f"/model-sweeps/{segment(sweep_id)}",
        **await _detail(request, viewer, sweep_id),
    )


@router.get("/sweeps/{sweep_id}/live")
async def sweep_live(request: Request, sweep_id: str, viewer: ViewerDep) -> Response:
    """The part of the sweep's page that changes while it runs; the page polls it."""
    return render(request, "sweeps/live.html", viewer, **await _detail(request, viewer, sweep_id))


@router.post("/sweeps/{sweep_id}/cancel")
async def cancel_sweep(request: Request, sweep_id: str, viewer: ViewerDep) -> Response:
    """The form twin of `POST /model-sweeps/{id}/cancel`."""
    await read_form(request, viewer.session)
    await api_sweeps.cancel_sweep(sweep_id, viewer.principal, db_of(request))
    return RedirectResponse(f"/ui/sweeps/{segment(sweep_id)}", status_code=303)


@router.get("/sweeps/{sweep_id}/compare")
async def compare_arms(
    request: Request,
    sweep_id: str,
    viewer: ViewerDep,
    bar: OptionalText = None,
    baseline_arm: Annotated[str | None, Query(alias="baselineArm", max_length=200)] = None,
) -> Response:
    db, principal = db_of(request), viewer.principal
    asked_bar, asked_arm = _bar(bar), _arm_param(baseline_arm)
    sweep = await api_sweeps.get_sweep(sweep_id, principal, db)
    comparison = await api_decisions.get_comparison(
        sweep_id, principal, db, bar=asked_bar, baseline_arm=asked_arm
    )
    sharing = (await api_share.get_settings(principal, db)).enabled
    params = {"bar": asked_bar, "baselineArm": asked_arm}
    return render(
        request,
        "sweeps/compare.html",
        viewer,
        section="sweeps",
        twin=f"/model-sweeps/{segment(sweep_id)}/comparison" + query(**params),
        sweep=sweep,
        c=comparison,
        arms={arm.arm_id: arm for arm in comparison.arms},
        models={arm.id: arm.model for arm in sweep.arms},
        providers={arm.id: arm.model_provider for arm in sweep.arms},
        sharing=sharing,
        asked_bar=asked_bar,
        params=params,
        ordered=ordered,
    )


@router.get("/sweeps/{sweep_id}/frontier.svg")
async def frontier_chart(
    request: Request,
    sweep_id: str,
    viewer: ViewerDep,
    bar: OptionalText = None,
    baseline_arm: Annotated[str | None, Query(alias="baselineArm", max_length=200)] = None,
) -> Response:
    """The cost–quality frontier of the comparison as SVG: the same decision the Compare arms
    page renders (`views.decisions.sweep_decision`, the function `/comparison` calls); 404 for
    a void sweep, which has no frontier."""
    from neens.web.frontier_chart import frontier_svg  # Matplotlib loads on the first chart

    decision = await sweep_decision(
        db_of(request),
        viewer.principal.project_id,
        sweep_id,
        bar=_bar(bar),
        baseline_arm_id=_arm_param(baseline_arm),
    )
    c = decision.comparison
    if c.frontier is None:
        raise NotFound(
            "a void sweep has no frontier: its arms did not run under the same conditions"
        )
    svg = frontier_svg(
        c.frontier, bar=c.bar.value, title=f"Cost–quality frontier: {decision.sweep.name}"
    )
    return Response(svg, media_type="image/svg+xml", headers=FRONTIER_SVG_HEADERS)


@router.get("/sweeps/{sweep_id}/arms/{arm_id}/regressions")
async def arm_regressions(
    request: Request,
    sweep_id: str,
    arm_id: str,
    viewer: ViewerDep,
    baseline_arm: Annotated[str | None, Query(alias="baselineArm", max_length=200)] = None,
) -> Response:
    db, principal = db_of(request), viewer.principal
    asked_arm = _arm_param(baseline_arm)
    sweep = await api_sweeps.get_sweep(sweep_id, principal, db)
    found = await api_decisions.get_regressions(
        sweep_id, arm_id, principal, db, limit=REGRESSIONS_PER_PAGE, baseline_arm=asked_arm
    )
    labels = {arm.id: arm.label for arm in sweep.arms}
    return render(
        request,
        "sweeps/regressions.html",
        viewer,
        section="sweeps",
        twin=f"/model-sweeps/{segment(sweep_id)}/arms/{segment(arm_id)}/regressions"
        + query(limit=REGRESSIONS_PER_PAGE, baselineArm=asked_arm),
        sweep=sweep,
        r=found,
        labels=labels,
        asked_arm=asked_arm,
    )


@router.post("/sweeps/{sweep_id}/share")
async def share_sweep(request: Request, sweep_id: str, viewer: ViewerDep) -> Response:
    """The form twin of `POST /share-links` for this sweep's decision: shows the link once
    (only its hash is stored). 403, with the API's message, while sharing is off."""
    await read_form(request, viewer.session)
    db, principal = db_of(request), viewer.principal
    sweep = await api_sweeps.get_sweep(sweep_id, principal, db)
    link = await api_share.create_link(
        ShareLinkIn.model_validate({"resourceType": "sweep_decision", "resourceId": sweep.id}),
        principal,
        db,
        settings_of(request),
        request,
    )
    token = (link.url or "").rsplit("/", 1)[-1]
    base = (settings_of(request).public_url or str(request.base_url)).rstrip("/")
    base = base.removesuffix("/ui")
    return render(
        request,
        "sweeps/shared.html",
        viewer,
        section="sweeps",
        sweep=sweep,
        link=link,
        page_url=f"{base}/ui/share/{token}",
        json_url=f"{base}/share/{token}",
    )
