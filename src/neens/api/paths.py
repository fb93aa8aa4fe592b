"""Path parameter convertors: ids whose shape routing itself checks.

Importing this module registers them with Starlette; a router using `{name:convertor}` imports
it so the convertor exists before its routes are built.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor


class SweepId(Convertor[str]):
    """A sweep id in a path: `msw-…`. So `/model-sweeps/preview` is only the preview route, and
    `GET /model-sweeps/preview` is no route at all rather than a lookup of a sweep "preview"."""

    regex = "msw-[^/]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("sweep_id", SweepId())


class RunId(Convertor[str]):
    """A pre-prod run id in a path: `ppr_…`. So `/preprod-evals/imports` is only the import
    route, and `GET /preprod-evals/imports` is no route at all rather than a lookup of a run
    "imports"."""

    regex = "ppr_[^/]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", RunId())
