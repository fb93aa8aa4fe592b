"""Running a judge deployment on one case: built-in checks, LLM prompts, composites.

A composite evaluates its components first (each once per case, even when shared by several
composites) and combines their scores; a component that could not score leaves the composite
unscored rather than averaged over the rest.
"""

from __future__ import annotations

from neens.domain.judges import JudgeCase, Verdict, composite, run_managed
from neens.engine.llm_judge import LlmEndpoint, classify_with_llm, judge_with_llm
from neens.store.judges import JudgeInfo


def llm_endpoint(judge: JudgeInfo) -> LlmEndpoint:
    endpoint = judge.config["endpoint"]
    return LlmEndpoint(
        base_url=endpoint["baseUrl"],
        model=endpoint["model"],
        api_key=judge.secret,
        timeout_s=float(endpoint.get("timeoutS", 60.0)),
    )


class CaseJudge:
    """Evaluates judges for one case, remembering each judge's verdict."""

    def __init__(self, judges: dict[str, JudgeInfo], case: JudgeCase) -> None:
        self.judges = judges
        self.case = case
        self.verdicts: dict[str, Verdict] = {}

    async def verdict(self, judge_id: str) -> Verdict:
        if judge_id not in self.verdicts:
            self.verdicts[judge_id] = await self._evaluate(self.judges[judge_id])
        return self.verdicts[judge_id]

    async def _evaluate(self, judge: JudgeInfo) -> Verdict:
        if judge.type == "managed":
            return run_managed(judge.config["check"], judge.config["options"], self.case)
        if judge.type == "llm_prompt":
            return await judge_with_llm(llm_endpoint(judge), judge.config["template"], self.case)
        if judge.type == "classifier":
            return await classify_with_llm(
                llm_endpoint(judge), judge.config["template"], judge.config["labels"], self.case
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
