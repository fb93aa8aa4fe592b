"""Running a judge deployment on one case: built-in checks, LLM prompts, composites.

A composite evaluates its components first (each once per case, even when shared by several
composites) and combines their scores; a component that could not score leaves the composite
unscored rather than averaged over the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from neens.domain.judges import JudgeCase, Verdict, composite, run_managed
from neens.engine.llm_judge import LlmEndpoint, classify_with_llm, judge_with_llm
from neens.queue.worker import JobContext
from neens.secrets import SecretBox, SecretKeyError
from neens.store.judges import JudgeInfo


@dataclass(frozen=True, slots=True)
class Outbound:
    """What calling a judge's endpoint needs besides the judge: the keys its stored API key is
    encrypted with, and whether loopback and private addresses may be called."""

    secrets: SecretBox
    allow_private: bool


def outbound_of(ctx: JobContext) -> Outbound:
    """The `Outbound` of a job: the database's keys and the worker's settings."""
    return Outbound(ctx.db.secrets, ctx.settings.allow_private_destinations)


def llm_endpoint(judge: JudgeInfo, outbound: Outbound) -> LlmEndpoint:
    endpoint = judge.config["endpoint"]
    secret = judge.secret
    return LlmEndpoint(
        base_url=endpoint["baseUrl"],
        model=endpoint["model"],
        api_key=None
        if secret is None
        else outbound.secrets.open(secret, what=f"the API key of judge {judge.name!r}"),
        timeout_s=float(endpoint.get("timeoutS", 60.0)),
        allow_private=outbound.allow_private,
    )


def deterministic(judges: dict[str, JudgeInfo], judge_id: str) -> bool:
    """Whether a judge scores without a network call: a built-in check, or a composite of
    deterministic judges. Such a judge can score an answer in the write that stores it."""
    judge = judges.get(judge_id)
    if judge is None:
        return False
    if judge.type == "managed":
        return True
    if judge.type == "composite":
        return all(deterministic(judges, c["judgeId"]) for c in judge.config["components"])
    return False


class CaseJudge:
    """Evaluates judges for one case, remembering each judge's verdict."""

    def __init__(self, judges: dict[str, JudgeInfo], case: JudgeCase, outbound: Outbound) -> None:
        self.judges = judges
        self.case = case
        self.outbound = outbound
        self.verdicts: dict[str, Verdict] = {}

    async def verdict(self, judge_id: str) -> Verdict:
        if judge_id not in self.verdicts:
            self.verdicts[judge_id] = await self._evaluate(self.judges[judge_id])
        return self.verdicts[judge_id]

    async def _evaluate(self, judge: JudgeInfo) -> Verdict:
        if judge.type == "managed":
            return run_managed(judge.config["check"], judge.config["options"], self.case)
        if judge.type in ("llm_prompt", "classifier"):
            try:
                endpoint = llm_endpoint(judge, self.outbound)
            except SecretKeyError as exc:
                return Verdict.unscored("judge_call_failed", str(exc))
            if judge.type == "llm_prompt":
                return await judge_with_llm(endpoint, judge.config["template"], self.case)
            return await classify_with_llm(
                endpoint, judge.config["template"], judge.config["labels"], self.case
            )
        parts = []
        for component in judge.config["components"]:
            component_judge = self.judges[component["judgeId"]]
            parts.append(
                (
                    float(component["weight"]),
                    component_judge.name,
                    await self.verdict(component_judge.id),
                )
            )
        return composite(parts)
