"""Running the task once for one case: a command or an agent endpoint.

Every failure is one of two kinds, and only one of them is ever retried:

- **infra**: the way to the agent failed, not the agent. A transport error (connection refused
  or dropped), a 429 or a 5xx answer. Retried (`--retries`) with backoff; still failing after the
  retries, the case-trial is recorded as an infra error.
- **agent**: the agent failed. A command that exits non-zero, hangs past its timeout or floods
  stdout (over 8 MiB); an endpoint that answers another 4xx, no JSON or no answer where the
  answer should be, or takes longer than the task's timeout. Never retried: trying again until
  it works would hide exactly what the experiment measures.

A command task gets the case's input on stdin and in $NEENS_ITEM_INPUT (inputs over 100,000
characters on stdin only), with $NEENS_ITEM_ID, $NEENS_TRIAL and $NEENS_EXPERIMENT_ID; its
answer is its stdout, without the trailing newlines. An http task is called exactly as agent
connections are (`neens.engine.agent_call`).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from neens.domain.storable import unstorable_text_reason
from neens.exp.datasets import Case
from neens.exp.spec import CommandTask, HttpTask

if TYPE_CHECKING:
    from neens.engine.agent_call import AgentReply
    from neens.queue.worker import AgentPoster

ErrorKind = Literal["infra", "agent"]
MAX_ANSWER_BYTES: Final = 8 * 1024 * 1024
MAX_ENV_VALUE: Final = 100_000
_ENV_REFERENCE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call of the task: an answer, or an error of a kind."""

    output: str | None
    error: str | None = None
    error_kind: ErrorKind | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None

    @property
    def retryable(self) -> bool:
        return self.error_kind == "infra"


@dataclass(frozen=True, slots=True)
class Feedback:
    """What a later --seq attempt is told: its number, the answer before and why it failed."""

    attempt: int
    """2, 3, …: the first attempt gets no feedback."""
    previous_output: str
    reasons: str
    """The failing graders' reasons, one per line as "name: reason"."""

    def prompt(self, text: str) -> str:
        """The input as an http task sends it with the feedback after it."""
        return (
            f"{text}\n\nYour previous answer was:\n{self.previous_output}\n\n"
            f"It did not pass:\n{self.reasons}\n\nAnswer again."
        )


@dataclass(frozen=True, slots=True)
class TaskContext:
    experiment_id: str
    name: str
    cwd: Path


async def run_command(
    task: CommandTask,
    case: Case,
    trial: int,
    context: TaskContext,
    feedback: Feedback | None = None,
) -> Attempt:
    """Run the command once. A --seq attempt after the first also gets $NEENS_ATTEMPT,
    $NEENS_FEEDBACK (the failing graders' reasons) and $NEENS_PREVIOUS_OUTPUT."""
    from neens.exp.process import run_process

    text = case.input_text
    env = {
        **os.environ,
        **task.env,
        "NEENS_ITEM_ID": case.id,
        "NEENS_TRIAL": str(trial),
        "NEENS_EXPERIMENT_ID": context.experiment_id,
    }
    extra = {"NEENS_ITEM_INPUT": text}
    if feedback is not None:
        env["NEENS_ATTEMPT"] = str(feedback.attempt)
        extra["NEENS_FEEDBACK"] = feedback.reasons
        extra["NEENS_PREVIOUS_OUTPUT"] = feedback.previous_output
    for name, value in extra.items():
        if len(value) <= MAX_ENV_VALUE and "\x00" not in value:
            env[name] = value
    started = time.monotonic()
    try:
        result = await run_process(
            task.command,
            stdin=text.encode(),
            env=env,
            cwd=context.cwd,
            timeout_s=task.timeout_s,
            max_output=MAX_ANSWER_BYTES,
        )
    except OSError as exc:
        return Attempt(None, f"the command could not start: {exc}", "agent")
    latency_ms = (time.monotonic() - started) * 1000
    if result.timed_out:
        return Attempt(
            None, f"no answer within {task.timeout_s:g} s (timeout)", "agent", latency_ms
        )
    if result.overflowed:
        return Attempt(
            None,
            f"the command wrote more than {MAX_ANSWER_BYTES:,} bytes to stdout",
            "agent",
            latency_ms,
        )
    if result.exit_code != 0:
        detail = result.stderr_line()
        return Attempt(
            None,
            f"the command exited with code {result.exit_code}" + (f": {detail}" if detail else ""),
            "agent",
            latency_ms,
        )
    try:
        answer = result.stdout.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        # Replacing the bytes with U+FFFD would grade (and store) an answer the agent never
        # gave; an answer that is not text is the agent's error, as a NUL in it is.
        return Attempt(
            None,
            f"the answer is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start} of standard output)",
            "agent",
            latency_ms,
        )
    if (reason := unstorable_text_reason(answer)) is not None:
        return Attempt(None, f"the answer {reason}", "agent", latency_ms)
    return Attempt(answer, latency_ms=latency_ms)


def expand_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header values with ${NAME} replaced from the environment; ValueError naming a missing
    variable. The spec keeps the reference, so a stored experiment never holds the secret."""

    def value(match: re.Match[str]) -> str:
        name = match[1]
        if name not in os.environ:
            raise ValueError(name)
        return os.environ[name]

    return {key: _ENV_REFERENCE.sub(value, text) for key, text in headers.items()}


async def run_http(
    client: AgentPoster,
    task: HttpTask,
    headers: dict[str, str],
    case: Case,
    context: TaskContext,
    feedback: Feedback | None = None,
) -> Attempt:
    """Call the endpoint once (`client` is an entered `neens.engine.agent_client.AgentClient`).
    A --seq attempt after the first sends the input followed by the feedback."""
    from neens.engine.agent_call import AgentCallFailed, AgentEndpoint, call_agent

    endpoint = AgentEndpoint(
        url=task.url,
        request_format=task.request_format,
        answer_path=task.answer_path,
        headers=headers,
        model=task.model,
    )
    started = time.monotonic()
    try:
        reply = await call_agent(
            client,
            endpoint,
            case.input_text if feedback is None else feedback.prompt(case.input_text),
            run_id=context.experiment_id,
            item_id=case.id,
            version_label=context.name,
            timeout_s=task.timeout_s,
        )
    except AgentCallFailed as exc:
        latency_ms = (time.monotonic() - started) * 1000
        infra = exc.transport or (
            exc.status is not None and (exc.status == 429 or exc.status >= 500)
        )
        return Attempt(None, exc.reason, "infra" if infra else "agent", latency_ms)
    if (reason := unstorable_text_reason(reply.answer)) is not None:
        # A NUL or a lone surrogate cannot be stored (or graded as the agent sent it): the
        # endpoint's answer is unusable, as the same answer from a command task is.
        return Attempt(None, f"the answer {reason}", "agent", reply.latency_ms)
    return Attempt(reply.answer, latency_ms=reply.latency_ms, cost_usd=_cost(reply))


def _cost(reply: AgentReply) -> float | None:
    """The call's cost from the usage and model the reply reports, or None (unpriced)."""
    from neens.domain.pricing import PriceBook, PriceLookupError

    if reply.model is None or reply.input_tokens is None or reply.output_tokens is None:
        return None
    try:
        usd, _ = PriceBook().cost(reply.model, None, reply.input_tokens, reply.output_tokens)
    except (PriceLookupError, OverflowError):
        return None
    return usd
