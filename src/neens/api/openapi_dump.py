"""Print the OpenAPI contract (`make openapi` writes it to schemas/openapi.json)."""

from __future__ import annotations

import json
import sys
from typing import Any

from neens.api.app import create_app
from neens.settings import Settings


def openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document; building it opens no database."""
    return create_app(Settings()).openapi()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
