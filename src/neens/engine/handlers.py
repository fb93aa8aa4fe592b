"""Which function does each kind of job."""

from __future__ import annotations

from neens.engine.push import run_push
from neens.queue.worker import Handler

HANDLERS: dict[str, Handler] = {
    "preprod.push": run_push,
}
