"""LLM judges: asking a model, through any OpenAI-compatible endpoint, to score or label a case.

The pure parts (rendering the template, reading the reply) live in `neens.domain.judges`; this
module only sends the prompt and turns every way the call can fail into an unscored verdict.

Wire format, one request per verdict, through the official `openai` client:

    POST {base_url}/chat/completions
    {"model": <model>, "temperature": 0, ["max_tokens": <max_tokens>,]
     "messages": [{"role": "system", "content": SCORE_SYSTEM_PROMPT or classifier_system_prompt},
                  {"role": "user", "content": <the rendered template>}]}

The system message asks for `{"score": <0..1>, "reason": "..."}` (or `{"label": ..., "reason":
...}` for classifiers). The reply is still parsed leniently (fenced JSON, prose around it,
`Score: 0.8` lines), because models do not always obey, and `response_format` is not sent:
many OpenAI-compatible servers reject it. `Verdict.prompt` holds the user message exactly as
sent; the system message is the deterministic text below.

Destinations: the request goes through `destinations.guarded_client`, so a base URL that
resolves to a link-local or metadata address (or, with `allow_private` off, a private one) is
unscored "judge_call_failed" without a request being sent. Error text is bounded by
`destinations.excerpt`, and names the base URL without its userinfo, query or fragment
(`destinations.shown_url`), since whoever reads a verdict may not read the judge's endpoint.

Failure handling: an API error status, a connection error, a timeout, no choices or no message
text give an unscored verdict "judge_call_failed" carrying the error; nothing of that kind is
raised to the caller, since one flaky call must not abort a run of thousands. Programming errors
(and invalid templates or labels, as Unprocessable) do raise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from neens.domain.judges import (
    JudgeCase,
    Verdict,
    cannot_judge,
    parse_label_reply,
    parse_score_reply,
    render_prompt,
    validate_labels,
    validate_template,
)
from neens.engine.destinations import (
    DestinationRefused,
    GuardedAnyTransport,
    excerpt,
    shown_url,
    tls_context,
)
from neens.errors import Unprocessable

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

MAX_RETRIES: Final = 2
"""Retries of the `openai` client (connection errors, 408, 409, 429 and 5xx), within the budget."""

SCORE_SYSTEM_PROMPT: Final = (
    "You are an evaluation judge. Follow the instructions in the user message. "
    "Reply with only a JSON object and no other text: "
    '{"score": <a number from 0 to 1, where 1 is best>, '
    '"reason": "<one or two sentences explaining the score>"}'
)


def classifier_system_prompt(labels: Sequence[str]) -> str:
    """The system message of a classifier judge, listing its labels as JSON strings."""
    choices = ", ".join(json.dumps(label, ensure_ascii=False) for label in labels)
    return (
        "You are a classification judge. Follow the instructions in the user message. "
        "Reply with only a JSON object and no other text: "
        f'{{"label": <exactly one of: {choices}>, '
        '"reason": "<one or two sentences explaining the label>"}'
    )


@dataclass(frozen=True, slots=True)
class LlmEndpoint:
    """Where an LLM judge runs: any OpenAI-compatible chat-completions API.

    `base_url` includes the version prefix (`https://api.openai.com/v1`,
    `http://localhost:11434/v1`). A None `api_key` sends the placeholder "unused", which local
    servers ignore (the client refuses to run without one). The key is left out of `repr`, so it
    cannot leak into logs.

    `timeout_s` bounds the whole verdict, retries included: each attempt gets the full budget,
    but a server that hangs uses it up and the verdict comes back after `timeout_s`, not three
    times that. `max_tokens` is sent only when set.
    """

    base_url: str
    model: str
    api_key: str | None = field(repr=False)
    timeout_s: float = 60.0
    max_tokens: int | None = None
    allow_private: bool = True
    """Whether loopback and private addresses may be called (see `engine.destinations`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise Unprocessable("base_url must be an http:// or https:// URL", field="base_url")
        if not isinstance(self.model, str) or not self.model.strip():
            raise Unprocessable("model must be a non-empty string", field="model")
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, int | float)
            or not math.isfinite(self.timeout_s)
            or self.timeout_s <= 0
        ):
            raise Unprocessable("timeout_s must be a number of seconds above 0", field="timeout_s")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise Unprocessable("max_tokens must be a whole number above 0", field="max_tokens")


async def judge_with_llm(endpoint: LlmEndpoint, template: str, case: JudgeCase) -> Verdict:
    """Score `case` by asking the endpoint's model with `template`; see the module docstring.

    Cases `cannot_judge` refuses (no output; no expected output for a template that uses it)
    are unscored without a call. The verdict keeps the prompt and, when there was a reply, the
    raw reply; a reply without a readable 0..1 score is unscored "grade_parse_failure", never 0.
    """
    validate_template(template)
    if (refused := cannot_judge(template, case)) is not None:
        return refused
    prompt = render_prompt(template, case)
    reply = await _complete(endpoint, SCORE_SYSTEM_PROMPT, prompt)
    if isinstance(reply, Verdict):
        return reply
    return dataclasses.replace(parse_score_reply(reply), prompt=prompt)


async def classify_with_llm(
    endpoint: LlmEndpoint, template: str, labels: Sequence[str], case: JudgeCase
) -> Verdict:
    """Label `case` with one of `labels` by asking the endpoint's model with `template`.

    As `judge_with_llm`, with labels validated by `validate_labels` and the reply read by
    `parse_label_reply`: a label outside `labels` is unscored "label_parse_failure".
    """
    validate_template(template)
    labels = validate_labels(labels)
    if (refused := cannot_judge(template, case)) is not None:
        return refused
    prompt = render_prompt(template, case)
    reply = await _complete(endpoint, classifier_system_prompt(labels), prompt)
    if isinstance(reply, Verdict):
        return reply
    return dataclasses.replace(parse_label_reply(reply, labels), prompt=prompt)


def _split_query(base_url: str) -> tuple[str, str]:
    """The base URL without its query and fragment, and its query as sent.

    The client appends `/chat/completions` to the base URL's path and query alike, so a query
    (a gateway's `?api-version=...`) would end up glued to the path; the HTTP client sends
    it apart, as it is (repeated keys and their order kept), with every call."""
    try:
        parts = urlsplit(base_url)
    except ValueError:  # a malformed host: the client says what is wrong with it
        return base_url, ""
    if not parts.query and not parts.fragment:
        return base_url, ""
    return urlunsplit(parts._replace(query="", fragment="")), parts.query


def _call_failed(prompt: str, why: str) -> Verdict:
    return Verdict.unscored(
        "judge_call_failed", f"the judge endpoint could not be used: {why}", prompt=prompt
    )


async def _complete(endpoint: LlmEndpoint, system: str, prompt: str) -> str | Verdict:
    """The model's reply text, or the unscored verdict saying why there is none."""
    openai = await _openai()
    base_url, query = _split_query(endpoint.base_url)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    try:
        async with (
            asyncio.timeout(endpoint.timeout_s),
            openai.AsyncOpenAI(
                base_url=base_url,
                api_key=endpoint.api_key or "unused",
                timeout=endpoint.timeout_s,
                max_retries=MAX_RETRIES,
                http_client=_http_client(openai, endpoint, query),
            ) as client,
        ):
            # Two calls rather than a "not given" sentinel, whose name changed across openai 1.x.
            if endpoint.max_tokens is None:
                completion = await client.chat.completions.create(
                    model=endpoint.model, messages=messages, temperature=0
                )
            else:
                completion = await client.chat.completions.create(
                    model=endpoint.model,
                    messages=messages,
                    temperature=0,
                    max_tokens=endpoint.max_tokens,
                )
    except TimeoutError:
        return _call_failed(prompt, f"no reply within {endpoint.timeout_s:g}s")
    except DestinationRefused as exc:
        return _call_failed(prompt, f"refused to call {shown_url(endpoint.base_url)}: {exc}")
    except openai.OpenAIError as exc:
        if isinstance(exc.__cause__, DestinationRefused):
            shown = shown_url(endpoint.base_url)
            return _call_failed(prompt, f"refused to call {shown}: {exc.__cause__}")
        return _call_failed(prompt, f"{type(exc).__name__}: {excerpt(str(exc))}")
    except ValueError as exc:  # a body labelled JSON that does not parse (or decode) as JSON
        return _call_failed(prompt, f"the response is not valid JSON: {excerpt(str(exc))}")
    return _reply_text(completion, prompt)


async def _openai() -> Any:
    """The `openai` package, imported on the first verdict rather than at start: importing it
    takes a second or more of CPU, which every `neens serve`, `neens worker` and `neens mcp`
    would otherwise pay whether or not it ever runs an LLM judge. The import runs in a thread so
    the event loop keeps serving while it loads."""
    global _openai_module
    if _openai_module is None:
        _openai_module = await asyncio.to_thread(importlib.import_module, "openai")
    return _openai_module


_openai_module: Any = None


def _http_client(openai: Any, endpoint: LlmEndpoint, query: str) -> Any:
    """The `openai` client's HTTP client, with the destination guard in its transport.

    Built from the client class `openai` itself uses (its HTTP package differs across
    versions), so the transport given is one it can drive; redirects are not followed."""
    client_class = openai.DefaultAsyncHttpxClient
    package = client_class.__mro__[1].__module__.split(".")[0]
    transport = GuardedAnyTransport(
        importlib.import_module(package).AsyncHTTPTransport(verify=tls_context(package)),
        allow_private=endpoint.allow_private,
    )
    options: dict[str, Any] = {
        "transport": transport,
        "timeout": endpoint.timeout_s,
        "follow_redirects": False,
    }
    if query:
        options["params"] = query  # the base URL's query (`_split_query`)
    return client_class(**options)


def _reply_text(completion: object, prompt: str) -> str | Verdict:
    """The first choice's message text, or why the response has none.

    Read defensively: the client does not validate responses strictly (OpenAI-compatible
    servers omit fields), so a malformed 200 body arrives as a partly built object, a list or a
    plain string. Whatever its shape, the server answered without a reply, which is a failed
    call, not a bug of ours.
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        if isinstance(completion, str | list | dict):
            return _call_failed(prompt, "the response is not a chat completion")
        return _call_failed(prompt, "the reply has no choices")
    choice = choices[0]
    content = getattr(getattr(choice, "message", None), "content", None)
    if not isinstance(content, str):
        finish_reason = getattr(choice, "finish_reason", None)
        return _call_failed(
            prompt, f"the reply has no message text (finish_reason {finish_reason!r})"
        )
    return content
