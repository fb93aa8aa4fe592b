"""`/healthz`: is the server up and its database reachable."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field
from sqlalchemy import text

from neens import __version__
from neens.api.deps import DbDep
from neens.api.schemas.base import ResponseBody

router = APIRouter(tags=["health"])


class Health(ResponseBody):
    status: str = Field(description='"ok" when the database answered.')
    version: str = Field(description="The Neens version serving.")
    database: str = Field(description='The database dialect: "sqlite" or "postgresql".')


@router.get("/healthz", operation_id="health-get")
async def healthz(db: DbDep) -> Health:
    async with db.read() as s:
        await s.execute(text("SELECT 1"))
    return Health(status="ok", version=__version__, database=db.dialect)
