"""Which function does each kind of job."""

from __future__ import annotations

from neens.engine.notify import deliver
from neens.engine.production import score_production_session
from neens.engine.push import run_push
from neens.engine.scoring import score_run
from neens.queue.worker import Handler

HANDLERS: dict[str, Handler] = {
    "preprod.push": run_push,
    "preprod.score": score_run,
    "notify.deliver": deliver,
    "production.score": score_production_session,
}
