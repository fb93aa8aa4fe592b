"""`exp compare --pairwise judge.json`: an LLM judge that sees A's and B's answers side by side,
in both orders, on any OpenAI-compatible endpoint (the judges code: `classify_with_llm`).

    {"name": "pref", "base_url": "http://127.0.0.1:11434/v1", "model": "judge",
     "prompt": "Question: {input}\\nAnswer 1: {output_1}\\nAnswer 2: {output_2}\\n..."}

For every paired case (each trial both runs made), the judge is asked twice: A's answer first,
then B's first, and labels each time "first", "second" or "tie". B is preferred when it wins in
both orders, A when A does; anything else is a tie or, when the two orders disagree, a
preference that follows the position (counted apart: a judge with a position bias). The
template may use {input}, {expected_output}, {output_1} and {output_2}; without one, a default
asks which answer is better.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import PairwiseVerdict
from neens.exp.datasets import Case
from neens.exp.jsonread import finite, loads

JUDGE_KEYS: Final = (
    "name",
    "base_url",
    "model",
    "prompt",
    "prompt_file",
    "api_key_env",
    "timeout",
    "max_tokens",
)
LABELS: Final = ("first", "second", "tie")
DEFAULT_PROMPT: Final = (
    "Two answers to the same input follow. Judge which one is better: more correct, more "
    "helpful, closer to the reference when there is one.\n\n"
    "Input:\n{input}\n\nReference answer (may be empty):\n{expected_output}\n\n"
    "Answer 1:\n{output_1}\n\nAnswer 2:\n{output_2}\n\n"
    'Label "first" if answer 1 is better, "second" if answer 2 is better, "tie" if neither is.'
)
_PLACEHOLDERS: Final = ("{input}", "{expected_output}", "{output_1}", "{output_2}")


@dataclass(frozen=True, slots=True)
class PairwiseJudge:
    name: str
    endpoint: Any
    """A `neens.engine.llm_judge.LlmEndpoint`."""
    template: str


def read_judge(path: Path, position: int) -> PairwiseJudge:
    import os

    from neens.engine.llm_judge import LlmEndpoint
    from neens.errors import Unprocessable

    where = f"--pairwise {path}"
    try:
        raw = loads(path.read_text(encoding="utf-8"), where)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: cannot be read as JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a JSON object")
    for key in raw:
        if key not in JUDGE_KEYS:
            raise ConfigError(f"{where}: {key}: unknown key (known keys: {', '.join(JUDGE_KEYS)})")
    if "prompt" in raw and "prompt_file" in raw:
        raise ConfigError(f"{where}: prompt: give either prompt or prompt_file")
    template = raw.get("prompt", DEFAULT_PROMPT)
    if "prompt_file" in raw:
        try:
            template = (path.parent / raw["prompt_file"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, TypeError) as exc:
            raise ConfigError(f"{where}: prompt_file: cannot be read: {exc}") from None
    if not isinstance(template, str) or not all(
        p in template for p in ("{output_1}", "{output_2}")
    ):
        raise ConfigError(f"{where}: prompt: must contain {{output_1}} and {{output_2}}")
    api_key = None
    if (key_env := raw.get("api_key_env")) is not None:
        api_key = os.environ.get(str(key_env))
        if not api_key:
            raise ConfigError(f"{where}: api_key_env: ${key_env} is not set")
    name = raw.get("name", f"pairwise-{position + 1}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: name: must be a non-empty string")
    timeout = raw.get("timeout", 60.0)
    if isinstance(timeout, int) and not isinstance(timeout, bool) and not finite(timeout):
        raise ConfigError(f"{where}: timeout: must be a number of seconds above 0")
    try:
        endpoint = LlmEndpoint(
            base_url=str(raw.get("base_url", "")).rstrip("/"),
            model=raw.get("model", ""),
            api_key=api_key,
            timeout_s=timeout,
            max_tokens=raw.get("max_tokens"),
        )
    except Unprocessable as exc:
        raise ConfigError(f"{where}: {exc.field}: {exc.message}") from None
    return PairwiseJudge(name=name, endpoint=endpoint, template=template)


def _render(template: str, case: Case, first: str, second: str) -> str:
    values = {
        "{input}": case.input_text,
        "{expected_output}": case.expected_text or "",
        "{output_1}": first,
        "{output_2}": second,
    }
    # One pass, so an answer that itself contains "{output_2}" is never expanded.
    out, index = [], 0
    while index < len(template):
        for placeholder in _PLACEHOLDERS:
            if template.startswith(placeholder, index):
                out.append(values[placeholder])
                index += len(placeholder)
                break
        else:
            out.append(template[index])
            index += 1
    return "".join(out)


async def _ask(judge: PairwiseJudge, prompt: str) -> str | None:
    """The judge's label ("first", "second", "tie"), or None when it gave none."""
    from neens.domain.judges import JudgeCase
    from neens.engine.llm_judge import classify_with_llm

    # The prompt is already rendered; "{output}" carries it whole into the judges code.
    verdict = await classify_with_llm(
        judge.endpoint, "{output}", list(LABELS), JudgeCase(None, prompt, None)
    )
    return verdict.label


async def judge_pairs(
    judge: PairwiseJudge,
    pairs: list[tuple[Case, int, str, str]],
    *,
    concurrency: int = 8,
) -> list[PairwiseVerdict]:
    """Ask `judge` about each (case, trial, A's answer, B's answer) in both orders."""
    limit = asyncio.Semaphore(concurrency)

    async def one(case: Case, trial: int, a: str, b: str) -> PairwiseVerdict:
        async with limit:
            a_first, b_first = await asyncio.gather(
                _ask(judge, _render(judge.template, case, a, b)),
                _ask(judge, _render(judge.template, case, b, a)),
            )
        return PairwiseVerdict(case.id, trial, a_first, b_first)

    return list(await asyncio.gather(*(one(*pair) for pair in pairs)))
