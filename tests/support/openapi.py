"""The app's OpenAPI document, built once per test process: building it takes seconds (the whole
app and every schema), and several test modules read it when they are collected."""

from __future__ import annotations

import copy
import functools
from typing import Any

from neens.api.openapi_dump import openapi_document


@functools.cache
def _built() -> dict[str, Any]:
    return openapi_document()


def document() -> dict[str, Any]:
    """A copy of the document of its own, for a caller that may change it."""
    return copy.deepcopy(_built())
