"""Graders: what turns a case-trial's answer into a verdict, each with a version.

Kinds, and what they reuse:

- `exact`, `contains`, `regex`, `json_field`: the built-in checks of `neens.domain.judges`
  (`exact_match`, `contains`, `regex`, `json_field_match`), with the same options.
- `command`: a script that prints a score. It gets the case as JSON on stdin,
  `{"id", "input", "output", "expected"}`, and in $NEENS_ITEM_ID, $NEENS_ITEM_INPUT,
  $NEENS_OUTPUT and $NEENS_EXPECTED; it prints a number from 0 to 1, `true`/`false`,
  `pass`/`fail`, or a JSON object `{"score": 0.8, "reason": "..."}`. A script that exits
  non-zero, hangs past its timeout or prints no score is a grader error, recorded with why.
- `llm`: an LLM judge on any OpenAI-compatible endpoint (`neens.engine.llm_judge`), with the
  prompt template inline (`prompt`) or in a file (`prompt_file`), using {input}, {output} and
  {expected_output}; the key, if any, is read from the environment variable `api_key_env`.

A score passes at `threshold` (default 0.7, `neens.domain.judges.PASS_THRESHOLD`; the built-in
checks score 0 or 1). A grader's version is a hash of its definition (everything but its name)
and of every file it reads (the command's scripts in the project folder, the prompt file), so a
changed grader shows up in `exp compare` and refuses a resume.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.domain.judges import (
    JudgeCase,
    Verdict,
    parse_score_reply,
    run_managed,
    validate_managed_config,
    validate_template,
)
from neens.domain.judges.verdict import PASS_THRESHOLD
from neens.errors import Unprocessable
from neens.exp.datasets import Case, digest
from neens.exp.jsonread import finite
from neens.exp.process import run_process
from neens.exp.spec import DEFAULT_GRADER_TIMEOUT_S, GraderDef

MANAGED: Final = {
    "exact": "exact_match",
    "contains": "contains",
    "regex": "regex",
    "json_field": "json_field_match",
}
MAX_GRADER_OUTPUT: Final = 1024 * 1024
MAX_ENV_VALUE: Final = 100_000
"""Longest text put in an environment variable; longer ones are on stdin only (Linux refuses
a single variable over 128 KiB)."""
_PASS_TOLERANCE: Final = 1e-9
_VERSION_CHARS: Final = 16


@dataclass(frozen=True, slots=True)
class Grade:
    """One grader's finding on one case-trial."""

    grader: str
    kind: str
    version: str
    score: float | None
    passed: bool | None
    unscored: str | None
    """Why there is no verdict: the judge's reason code, or "grader_error"."""
    reason: str
    prompt: str | None = None
    raw_reply: str | None = None


def validate_grader(kind: str, options: dict[str, Any], where: str, label: str) -> None:
    """Refuse (ConfigError naming the field) options the grader cannot run with."""
    if kind in MANAGED:
        config = {k: v for k, v in options.items() if k not in ("kind", "threshold")}
        try:
            validate_managed_config(MANAGED[kind], config)
        except Unprocessable as exc:
            name = (exc.field or "").removeprefix("config.")
            raise ConfigError(f"{where}: {label}.{name}: {exc.message}") from None
        return
    if kind == "command":
        command = options.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}: {label}.command: must be a non-empty string")
        env = options.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigError(f"{where}: {label}.env: must be an object of names to strings")
        _check_timeout(options, where, label)
        return
    # llm
    for key in ("base_url", "model"):
        value = options.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {label}.{key}: must be a non-empty string")
    if not str(options["base_url"]).startswith(("http://", "https://")):
        raise ConfigError(f"{where}: {label}.base_url: must be an http:// or https:// URL")
    has_prompt, has_file = "prompt" in options, "prompt_file" in options
    if has_prompt == has_file:
        raise ConfigError(f"{where}: {label}.prompt: give either prompt or prompt_file")
    if has_prompt:
        try:
            validate_template(options["prompt"])
        except Unprocessable as exc:
            raise ConfigError(f"{where}: {label}.prompt: {exc.message}") from None
    elif not isinstance(options["prompt_file"], str) or not options["prompt_file"]:
        raise ConfigError(f"{where}: {label}.prompt_file: must be a path")
    key_env = options.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env):
        raise ConfigError(f"{where}: {label}.api_key_env: must be an environment variable name")
    max_tokens = options.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ConfigError(f"{where}: {label}.max_tokens: must be a whole number above 0")
    _check_timeout(options, where, label)


def _check_timeout(options: dict[str, Any], where: str, label: str) -> None:
    timeout = options.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not finite(timeout)
        or timeout <= 0
    ):
        raise ConfigError(f"{where}: {label}.timeout: must be a number of seconds above 0")


def command_files(command: str, cwd: Path) -> list[Path]:
    """The files inside the project folder that `command` names (its scripts): what a change
    to the agent or a grader is seen by. Interpreters and anything outside `cwd` are left out."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    root = cwd.resolve()
    found: list[Path] = []
    for word in words:
        path = (cwd / word).resolve()
        if path.is_file() and path.is_relative_to(root) and path not in found:
            found.append(path)
    return found


def files_digest(paths: list[Path], cwd: Path) -> dict[str, str]:
    """Each file's path (relative to `cwd` when inside it) and the SHA-256 of its content.
    OSError when one cannot be read."""
    root = cwd.resolve()
    digests: dict[str, str] = {}
    for path in paths:
        resolved = path.resolve()
        name = str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)
        digests[name] = hashlib.sha256(resolved.read_bytes()).hexdigest()
    return digests


def grader_files(grader: GraderDef, cwd: Path) -> list[Path]:
    if grader.kind == "command":
        return command_files(grader.options["command"], cwd)
    if grader.kind == "llm" and "prompt_file" in grader.options:
        return [cwd / grader.options["prompt_file"]]
    return []


def grader_version(grader: GraderDef, cwd: Path, where: str, label: str) -> str:
    """A hash of the grader's definition and of the files it reads (paths relative to the
    project folder, so the same project checked out elsewhere has the same versions)."""
    try:
        files = files_digest(grader_files(grader, cwd), cwd)
    except OSError as exc:
        raise ConfigError(f"{where}: {label}: a file it reads cannot be read: {exc}") from None
    return digest({"definition": grader.options, "files": files})[:_VERSION_CHARS]


@dataclass(frozen=True, slots=True)
class ReadyGrader:
    """A grader ready to run: its definition, its version, and what it read at the start."""

    definition: GraderDef
    version: str
    template: str | None = None
    api_key: str | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def kind(self) -> str:
        return self.definition.kind


def prepare(grader: GraderDef, cwd: Path, where: str, label: str) -> ReadyGrader:
    """Read what the grader needs (its prompt file, its API key) and version it."""
    version = grader_version(grader, cwd, where, label)
    options = grader.options
    if grader.kind != "llm":
        return ReadyGrader(grader, version)
    if "prompt_file" in options:
        path = cwd / options["prompt_file"]
        try:
            template = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}: {label}.prompt_file: cannot be read: {exc}") from None
        try:
            validate_template(template)
        except Unprocessable as exc:
            raise ConfigError(f"{where}: {label}.prompt_file: {exc.message}") from None
    else:
        template = options["prompt"]
    api_key = None
    if (key_env := options.get("api_key_env")) is not None:
        api_key = os.environ.get(key_env)
        if not api_key:
            raise ConfigError(f"{where}: {label}.api_key_env: ${key_env} is not set")
    return ReadyGrader(grader, version, template=template, api_key=api_key)


def _passes(score: float, threshold: float | None) -> bool:
    bar = PASS_THRESHOLD if threshold is None else threshold
    return score >= bar - _PASS_TOLERANCE


def _from_verdict(grader: ReadyGrader, verdict: Verdict) -> Grade:
    score = verdict.score
    return Grade(
        grader=grader.name,
        kind=grader.kind,
        version=grader.version,
        score=score,
        passed=None if score is None else _passes(score, grader.definition.threshold),
        unscored=verdict.unscored_reason or (None if score is not None else "label_without_score"),
        reason=verdict.reason,
        prompt=verdict.prompt,
        raw_reply=verdict.raw_reply,
    )


def _error(grader: ReadyGrader, reason: str, raw: str | None = None) -> Grade:
    return Grade(
        grader=grader.name,
        kind=grader.kind,
        version=grader.version,
        score=None,
        passed=None,
        unscored="grader_error",
        reason=reason,
        raw_reply=raw,
    )


async def grade(grader: ReadyGrader, case: Case, output: str | None, cwd: Path) -> Grade:
    """Run one grader on one answer. Never raises for a grader's own failure: that is a Grade
    with `unscored="grader_error"` and the reason."""
    judged = JudgeCase(input=case.input_text, output=output, expected_output=case.expected_text)
    options = grader.definition.options
    if grader.kind in MANAGED:
        config = {k: v for k, v in options.items() if k not in ("kind", "threshold")}
        return _from_verdict(grader, run_managed(MANAGED[grader.kind], config, judged))
    if grader.kind == "llm":
        from neens.engine.llm_judge import LlmEndpoint, judge_with_llm

        endpoint = LlmEndpoint(
            base_url=options["base_url"].rstrip("/"),
            model=options["model"],
            api_key=grader.api_key,
            timeout_s=float(options.get("timeout", DEFAULT_GRADER_TIMEOUT_S)),
            max_tokens=options.get("max_tokens"),
        )
        assert grader.template is not None
        return _from_verdict(grader, await judge_with_llm(endpoint, grader.template, judged))
    return await _grade_with_command(grader, case, output, cwd)


async def _grade_with_command(
    grader: ReadyGrader, case: Case, output: str | None, cwd: Path
) -> Grade:
    options = grader.definition.options
    if output is None:
        return _from_verdict(
            grader, Verdict.unscored("no_output", "the agent produced no output to grade")
        )
    expected = case.expected_text
    body = {"id": case.id, "input": case.input, "output": output, "expected": case.expected}
    env = {**os.environ, **options.get("env", {}), "NEENS_ITEM_ID": case.id}
    for name, value in (
        ("NEENS_ITEM_INPUT", case.input_text),
        ("NEENS_OUTPUT", output),
        ("NEENS_EXPECTED", expected),
    ):
        if value is not None and len(value) <= MAX_ENV_VALUE and "\x00" not in value:
            env[name] = value
    timeout = float(options.get("timeout", DEFAULT_GRADER_TIMEOUT_S))
    try:
        result = await run_process(
            options["command"],
            stdin=json.dumps(body, ensure_ascii=False).encode(),
            env=env,
            cwd=cwd,
            timeout_s=timeout,
            max_output=MAX_GRADER_OUTPUT,
        )
    except OSError as exc:
        return _error(grader, f"the grader command could not start: {exc}")
    if result.timed_out:
        return _error(grader, f"the grader command printed no score within {timeout:g} s")
    if result.overflowed:
        return _error(grader, "the grader command printed more than 1 MiB")
    if result.exit_code != 0:
        detail = result.stderr_line()
        return _error(
            grader,
            f"the grader command exited with code {result.exit_code}"
            + (f": {detail}" if detail else ""),
        )
    text = result.stdout.decode("utf-8", "replace").strip()
    return _read_score(grader, text)


def _read_score(grader: ReadyGrader, text: str) -> Grade:
    """A command grader's printed score: a bare number, true/false, pass/fail, or what an LLM
    judge's reply may be (a JSON object with "score", `Score: 0.8` lines)."""
    word = text.lower()
    if word in ("true", "pass", "passed"):
        return _from_verdict(grader, Verdict.scored(1.0, f"the grader printed {text}"))
    if word in ("false", "fail", "failed"):
        return _from_verdict(grader, Verdict.scored(0.0, f"the grader printed {text}"))
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        if not (math.isfinite(number) and 0 <= number <= 1):
            return _error(grader, f"the grader printed {text[:60]}, not a score from 0 to 1", text)
        return _from_verdict(grader, Verdict.scored(number, f"the grader printed {text}"))
    verdict = parse_score_reply(text)
    if verdict.score is None:
        return _error(grader, f"the grader printed no score: {verdict.reason}", text[:2000])
    return _from_verdict(grader, verdict)
