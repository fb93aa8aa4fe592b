"""`/healthz`: is the server up and its database reachable."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field
from sqlalchemy import text

from neens import __version__
from neens.api.deps import DbDep, SettingsDep
from neens.api.schemas.base import ResponseBody

router = APIRouter(tags=["health"])


class Health(ResponseBody):
    status: str = Field(description='"ok" when the database answered.')
    version: str = Field(description="The Neens version serving.")
    database: str = Field(description='The database dialect: "sqlite" or "postgresql".')
    max_request_bytes: int = Field(
        description=(
            "The largest request body this server accepts, in bytes (NEENS_MAX_REQUEST_BYTES); "
            "a larger one is refused with 413. `neens datasets push` checks a file against it "
            "before creating anything."
        )
    )


@router.get("/healthz", operation_id="health-get")
async def healthz(db: DbDep, settings: SettingsDep) -> Health:
    async with db.read() as s:
        await s.execute(text("SELECT 1"))
    return Health(
        status="ok",
        version=__version__,
        database=db.dialect,
        max_request_bytes=settings.max_request_bytes,
    )


class Index(ResponseBody):
    name: str = Field(description='"Neens".')
    version: str = Field(description="The Neens version serving.")
    docs: str = Field(description="The interactive API reference (Swagger UI), served offline.")
    redoc: str = Field(description="The same reference as one readable page (ReDoc).")
    openapi: str = Field(description="The OpenAPI document every route and field is in.")
    health: str = Field(description="Whether the server is up and its database reachable.")


@router.get("/", operation_id="health-index")
async def index(request: Request) -> Index:
    """Where to go from the server's address: needs no key."""
    root = request.scope.get("root_path", "").rstrip("/")
    return Index(
        name="Neens",
        version=__version__,
        docs=f"{root}/docs",
        redoc=f"{root}/redoc",
        openapi=f"{root}/openapi.json",
        health=f"{root}/healthz",
    )
