"""What the CI-job tests (the GitHub action, the GitLab job, the TypeScript CLI) set up on a live
server before a job runs: the golden dataset of `agent_cmd.ANSWERS` and an agent connection."""

from __future__ import annotations

import time

import httpx

from tests.support.agent_cmd import ANSWERS


def golden_dataset(url: str, key: str) -> str:
    """A new dataset whose golden version holds `ANSWERS`; its id."""
    with httpx.Client(timeout=30, base_url=url, headers={"Authorization": f"Bearer {key}"}) as api:
        dataset = api.post("/datasets", json={"name": f"golden-{time.time_ns()}"}).json()["id"]
        items = [{"input": prompt, "expected_output": answer} for prompt, answer in ANSWERS.items()]
        created = api.post(f"/datasets/{dataset}/versions", json={"items": items, "golden": True})
        assert created.status_code == 201, created.text
    return str(dataset)


def support_connection(admin_api: httpx.Client, agent_url: str) -> str:
    """An agent connection named "support" to `agent_url` in the neens request format; its id."""
    created = admin_api.post(
        "/agent-connections",
        json={"name": "support", "url": agent_url, "requestFormat": "neens"},
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])
