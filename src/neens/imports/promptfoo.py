"""promptfoo outputs: `promptfoo eval -o results.json` (export version 3, or 2) and `-o out.jsonl`.

One `EvaluateResult` is one test × prompt × provider × repeat. promptfoo's `testIdx` is
positional (a new one per repeat, and every later test shifts when one is added), so it never
keys a case. The case key is the test's `metadata.id` when it has one (a string), else the
SHA-256 of the RFC 8785 canonical JSON of `{description, vars, assert}`. The repeat index is the
result's rank among the same case's results, in `testIdx` order.

`success` is pass/fail and `score` the number; `failureReason` 2 (ERROR) is an error of the
model call or of the provider (`error_kind` "model"), never an assertion failure, as promptfoo's
own `stats.errors` counts it. Each assertion of `gradingResult.componentResults` is a scorer of
its own (its `metric`, else its type), versioned by the hash of its definition.

A file holds one arm: when results name several providers or prompts, `--arm` (matched against
the provider's label or id, or the prompt's label) chooses one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import rfc8785

from neens.imports.errors import ImportFormatError
from neens.imports.trial import (
    CaseKeyKind,
    ImportedRun,
    Score,
    Trial,
    check_case_key,
    check_unique,
    checked,
    content_key,
    jsonl_objects,
    loads,
    mapping,
    number,
    number_at,
    read_file,
    repeats_of,
    shown,
    text_of,
    whole,
    whole_at,
)

FAILURE_ERROR: Final = 2
"""`ResultFailureReason.ERROR`: the provider or the run failed, not an assertion."""


def read_promptfoo(path: Path, *, arm: str | None = None) -> ImportedRun:
    """The run in a promptfoo `.json` (v2 or v3) or `.jsonl` output file."""
    where = str(path)
    raw = read_file(path, where)
    meta: Mapping[str, Any] = {}
    if path.suffix == ".jsonl":
        results = list(jsonl_objects(raw, where))
        eval_id = next((r.get("evalId") for r in results if r.get("evalId")), None)
        created = None
    else:
        body = _json(raw, where)
        top = mapping(body, where)
        summary = mapping(top.get("results"), f"{where}: results")
        version = summary.get("version")
        if version not in (2, 3):
            raise ImportFormatError(
                f"{where}: results.version: {version!r} is not a promptfoo output version this "
                "reads (2 or 3)"
            )
        listed = summary.get("results")
        if not isinstance(listed, list):
            raise ImportFormatError(f"{where}: results.results: expected a list of results")
        results = [mapping(r, f"{where}: results.results[{i}]") for i, r in enumerate(listed)]
        eval_id = top.get("evalId")
        meta = top["metadata"] if isinstance(top.get("metadata"), Mapping) else {}
        created = summary.get("timestamp")
    if not results:
        raise ImportFormatError(f"{where}: has no results")
    results = _one_arm(results, arm, where)
    trials = _trials(results, where)
    check_unique(trials, where)
    priced = any(t.cost_usd is not None for t in trials)
    unknown = {}
    if not priced:
        unknown["cost_usd"] = (
            "no result carries a cost above 0 (promptfoo writes 0 when the provider reports none)"
        )
    if repeats_of(trials) == 1:
        unknown["repeats"] = (
            "promptfoo does not store the repeat index; results of the same case are ranked by "
            "testIdx, and here each case has one"
        )
    first = results[0]
    return ImportedRun(
        tool="promptfoo",
        tool_version=text_of(meta.get("promptfooVersion")),
        run_id=text_of(eval_id),
        task=None,
        model=_arm_name(first),
        trials=trials,
        repeats=repeats_of(trials),
        unknown=unknown,
        created_at=text_of(created),
    )


def _json(raw: bytes, where: str) -> Any:
    try:
        return loads(raw, where)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{where}: not JSON: {exc}") from None


def _arm_name(result: Mapping[str, Any]) -> str | None:
    provider = result.get("provider")
    name = None
    if isinstance(provider, Mapping):
        name = provider.get("label") or provider.get("id")
    elif isinstance(provider, str):
        name = provider
    prompt = result.get("prompt")
    label = prompt.get("label") if isinstance(prompt, Mapping) else None
    if name is None:
        return None
    return str(name) if not label else f"{name} / {label}"


def _arms(result: Mapping[str, Any]) -> set[str]:
    """Every name `--arm` may match for this result."""
    names = set()
    provider = result.get("provider")
    if isinstance(provider, Mapping):
        names |= {str(v) for v in (provider.get("label"), provider.get("id")) if v}
    prompt = result.get("prompt")
    if isinstance(prompt, Mapping) and prompt.get("label"):
        names.add(str(prompt["label"]))
    full = _arm_name(result)
    if full:
        names.add(full)
    return names


def _one_arm(
    results: list[Mapping[str, Any]], arm: str | None, where: str
) -> list[Mapping[str, Any]]:
    arms = sorted({_arm_name(r) or "unnamed" for r in results})
    if arm is not None:
        chosen = [r for r in results if arm in _arms(r)]
        if not chosen:
            raise ImportFormatError(
                f"--arm {arm}: no result of {where} is of it (arms: {', '.join(arms)})"
            )
        if len({_arm_name(r) for r in chosen}) > 1:
            raise ImportFormatError(
                f"--arm {arm}: matches several arms of {where}; give the full name (arms: "
                f"{', '.join(arms)})"
            )
        return chosen
    if len(arms) > 1:
        raise ImportFormatError(
            f"{where}: holds {len(arms)} arms ({', '.join(arms)}); import one at a time with "
            "--arm NAME"
        )
    return results


def _test_body(test_case: Mapping[str, Any]) -> dict[str, Any]:
    """What makes a test the test it is: its description, vars and asserts."""
    return {
        "description": test_case.get("description"),
        "vars": test_case.get("vars") or {},
        "assert": test_case.get("assert") or [],
    }


def case_key(test_case: Mapping[str, Any], where: str = "testCase") -> tuple[str, CaseKeyKind]:
    """The test's `metadata.id`, else the hash of its description, vars and asserts."""
    metadata = test_case.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("id"), str) and metadata["id"]:
        return metadata["id"], "metadata_id"
    return content_key(_test_body(test_case), where), "content_sha256"


def _definition_version(assertion: Any) -> str | None:
    if not isinstance(assertion, Mapping):
        return None
    try:
        return hashlib.sha256(rfc8785.dumps(dict(assertion))).hexdigest()[:16]
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return None


def _scores(result: Mapping[str, Any]) -> tuple[Score, ...]:
    grading = result.get("gradingResult")
    if not isinstance(grading, Mapping):
        return ()
    components = grading.get("componentResults")
    if not isinstance(components, Sequence) or not components:
        return (
            Score(
                scorer="promptfoo",
                version=None,
                score=number(grading.get("score")),
                passed=grading.get("pass") if isinstance(grading.get("pass"), bool) else None,
                raw=grading.get("score"),
                reason=text_of(grading.get("reason")),
            ),
        )
    scores = []
    seen: dict[str, int] = {}
    for component in components:
        if not isinstance(component, Mapping):
            continue
        assertion = component.get("assertion")
        name = "assertion"
        if isinstance(assertion, Mapping):
            name = str(assertion.get("metric") or assertion.get("type") or "assertion")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        passed = component.get("pass")
        scores.append(
            Score(
                scorer=name,
                version=_definition_version(assertion),
                score=number(component.get("score")),
                passed=passed if isinstance(passed, bool) else None,
                raw=component.get("score"),
                reason=text_of(component.get("reason")),
            )
        )
    return tuple(scores)


def _cost(result: Mapping[str, Any], at: str) -> float | None:
    """The result's cost, or None: promptfoo writes 0 when the provider reported no cost (an
    errored call included), so 0 is unknown, never free."""
    cost = number_at(result.get("cost"), f"{at}: cost")
    # NaN, Infinity and a negative cost are kept, for `checked` to refuse: they are not "no
    # cost".
    return None if cost == 0 else cost


def _trials(results: list[Mapping[str, Any]], where: str) -> list[Trial]:
    ordered = sorted(
        enumerate(results), key=lambda pair: (whole(pair[1].get("testIdx")) or 0, pair[0])
    )
    rank: dict[str, int] = {}
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    trials = []
    for index, result in ordered:
        at = f"{where}: result {index}"
        test_case = result.get("testCase")
        if not isinstance(test_case, Mapping):
            raise ImportFormatError(f"{at}: testCase: expected the test as a JSON object")
        key, kind = case_key(test_case, f"{at}: testCase")
        check_case_key(key, at)
        # Repeats of one test share its metadata.id and its body; two different tests that
        # share an id would be merged into one case with "repeats" that are not.
        body = _test_body(test_case)
        seen = first.setdefault(key, (index, body))
        if kind == "metadata_id" and seen[1] != body:
            differ = [k for k in body if body[k] != seen[1][k]]
            raise ImportFormatError(
                f"{at}: testCase.metadata.id: {key!r} is also the id of result {seen[0]}, a "
                f"different test ({', '.join(differ)} differ); give each test its own id"
            )
        trial_idx = rank.get(key, 0)
        rank[key] = trial_idx + 1
        failure = result.get("failureReason")
        error = text_of(result.get("error")) if failure == FAILURE_ERROR else None
        if failure == FAILURE_ERROR and error is None:
            error = "promptfoo recorded an error (failureReason 2) without a message"
        response = result.get("response")
        response = response if isinstance(response, Mapping) else {}
        usage = result.get("tokenUsage") or response.get("tokenUsage")
        usage = usage if isinstance(usage, Mapping) else {}
        success = result.get("success")
        if success is not None and not isinstance(success, bool):
            raise ImportFormatError(f"{at}: success: expected true or false, got {shown(success)}")
        trials.append(
            Trial(
                case_key=key,
                case_key_kind=kind,
                trial_idx=trial_idx,
                passed=None
                if error is not None
                else (success if isinstance(success, bool) else None),
                scores=() if error is not None else _scores(result),
                error=error,
                error_kind="model" if error is not None else None,
                model=_arm_name(result),
                cost_usd=_cost(result, at),
                latency_ms=number_at(result.get("latencyMs"), f"{at}: latencyMs"),
                input_tokens=whole_at(usage.get("prompt"), f"{at}: tokenUsage.prompt"),
                output_tokens=whole_at(usage.get("completion"), f"{at}: tokenUsage.completion"),
                output=None if error is not None else text_of(response.get("output")),
                input=test_case.get("vars") if test_case.get("vars") is not None else {},
                expected=None,
            )
        )
        checked(trials[-1], at, _FIELDS)
    return trials


_FIELDS: Final = {
    "case_key": "testCase.metadata.id",
    "output": "response.output",
    "model": "provider",
    "cost_usd": "cost",
    "latency_ms": "latencyMs",
    "input": "testCase.vars",
    "scores": "gradingResult.componentResults",
}
