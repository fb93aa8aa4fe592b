"""The composite action .github/actions/neens-eval-gate/action.yml, its steps run as written.

Each step's `run` script is run with the shell GitHub gives a composite step
(`bash --noprofile --norc -eo pipefail`), with the step's `env`, whose `${{ … }}` expressions are
filled as the runner fills them: the action's inputs (with their defaults), `github.*`,
`runner.temp` and the outputs earlier steps wrote to $GITHUB_OUTPUT. An expression this test does
not know fails it, so the action cannot use one that was never exercised. As on GitHub, a step
that fails stops the job.

Neens is a live server; the pull request's comments go to a loopback stand-in for the GitHub REST
API (a real HTTP server answering the three calls the action makes), since the real one cannot be
reached from a test. The SDK is already installed (the Python one in this environment, the
TypeScript one from its packed tarball), so the install step runs with `install: false`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from neens.demo.endpoints import agent_suite, serve
from neens.store.keys import CreatedKey
from tests.support.agent_cmd import ANSWERS
from tests.support.ci_jobs import golden_dataset, support_connection
from tests.support.live import LiveServer
from tests.support.stand_in import Answer, StandInRequest, stand_in_server

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / ".github" / "actions" / "neens-eval-gate" / "action.yml"
SDK_TESTS = ROOT / "sdk" / "python" / "tests"
REPOSITORY = "acme/support-agent"
PULL_REQUEST = 7


@dataclass
class FakeGitHub:
    """The issue-comment calls of the GitHub REST API, for one repository, on loopback."""

    url: str = ""
    comments: dict[int, str] = field(default_factory=dict)
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)


@contextmanager
def fake_github() -> Iterator[FakeGitHub]:
    github = FakeGitHub()
    prefix = f"/repos/{REPOSITORY}/issues"

    def answer(request: StandInRequest) -> Answer:
        github.calls.append((request.method, request.path, request.headers.get("Authorization")))
        path = request.path.split("?", 1)[0]
        if request.headers.get("Authorization") != "Bearer ghs_test_token":
            return 401, {"message": "Bad credentials"}
        if request.method == "GET" and path == f"{prefix}/{PULL_REQUEST}/comments":
            return 200, [{"id": key, "body": body} for key, body in github.comments.items()]
        if request.method == "POST" and path == f"{prefix}/{PULL_REQUEST}/comments":
            key = len(github.comments) + 1
            github.comments[key] = json.loads(request.body or b"{}")["body"]
            return 201, {"id": key}
        if request.method == "PATCH" and path.startswith(f"{prefix}/comments/"):
            key = int(path.rsplit("/", 1)[1])
            github.comments[key] = json.loads(request.body or b"{}")["body"]
            return 200, {"id": key}
        return 404, {"message": "Not Found"}

    with stand_in_server(answer) as url:
        github.url = url
        yield github


@dataclass
class Job:
    code: int
    log: str
    outputs: dict[str, str]


def run_action(
    inputs: dict[str, str],
    *,
    cwd: Path,
    env: dict[str, str],
    tmp: Path,
    action_path: Path = ACTION.parent,
    steps: int | None = None,
) -> Job:
    """Run the action's steps in order (the first `steps` of them), as the runner does, until
    one fails. `action_path` is where the runner checked the action out."""
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    declared = action["inputs"]
    unknown = set(inputs) - set(declared)
    assert not unknown, f"not inputs of the action: {unknown}"
    context = {
        "github.sha": "0123abcd",
        "github.token": "ghs_test_token",
        "github.event.pull_request.number": str(PULL_REQUEST),
        "runner.temp": str(tmp),
        "github.action_path": str(action_path),
    }
    for name, spec in declared.items():
        context[f"inputs.{name}"] = inputs.get(name, str(spec.get("default", "")))
    for name in list(context):  # a default may itself be an expression, such as github.sha
        context[name] = _fill(context[name], context)
    outputs_file = tmp / "github_output"
    log: list[str] = []
    for step in action["runs"]["steps"][:steps]:
        assert step["shell"] == "bash" and "if" not in step, step["name"]
        outputs_file.write_text("")
        step_env = {name: _fill(str(value), context) for name, value in step["env"].items()}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env={**env, "GITHUB_OUTPUT": str(outputs_file), **step_env},
            capture_output=True,
            text=True,
            timeout=180,
        )
        log.append(f"## {step['name']}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        for line in outputs_file.read_text().splitlines():
            key, _, value = line.partition("=")
            context[f"steps.{step.get('id')}.outputs.{key}"] = value
        if done.returncode != 0:
            return Job(done.returncode, "\n".join(log), _outputs(action, context))
    return Job(0, "\n".join(log), _outputs(action, context))


def _outputs(action: dict[str, Any], context: dict[str, str]) -> dict[str, str]:
    return {name: _fill(spec["value"], context) for name, spec in action["outputs"].items()}


def _fill(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        expression = match[1].strip()
        if expression.startswith("steps."):
            return context.get(expression, "")  # a step that wrote no output: empty, as on GitHub
        assert expression in context, f"the test does not know the expression {expression!r}"
        return context[expression]

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def _installed_bin(project: Path) -> Path:
    sys.path.insert(0, str(SDK_TESTS))
    try:
        from typescript_package import installed_bin
    finally:
        sys.path.remove(str(SDK_TESTS))
    return installed_bin(project)


def test_the_action_comments_the_verdict_on_the_pull_request_and_fails_the_job_on_a_failed_gate(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, tmp_path: Path
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    _installed_bin(project)  # node_modules/.bin/neens-eval, as `npm install @neens/eval` makes
    dataset = golden_dataset(live_server.url, key.key)
    answers = dict(ANSWERS)
    admin = {"Authorization": f"Bearer {admin_key.key}"}
    with (
        serve(*agent_suite(answers)) as agents,
        httpx.Client(timeout=30, base_url=live_server.url, headers=admin) as api,
        fake_github() as github,
    ):
        connection = support_connection(api, agents.url("/neens"))
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "GITHUB_API_URL": github.url,
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
        }
        inputs = {
            "base-url": live_server.url,
            "api-key": key.key,
            "dataset": dataset,
            "agent-connection": connection,
            "install": "false",
            "args": "--min-pass-rate 0.9 --max-regressions 0",
        }
        passed = run_action({**inputs, "sdk": "python"}, cwd=project, env=env, tmp=tmp_path)
        answers[next(iter(ANSWERS))] = "No idea, sorry."
        failed = run_action({**inputs, "sdk": "node"}, cwd=project, env=env, tmp=tmp_path)

    assert passed.code == 0, passed.log
    assert passed.outputs["exit-code"] == "0"
    assert failed.code == 1, failed.log
    assert failed.outputs["exit-code"] == "1"
    assert "the gate FAILED" in failed.log
    # One comment, posted by the first job and updated by the second, with the workflow's token.
    assert list(github.comments) == [1]
    comment = github.comments[1]
    assert comment.startswith("<!-- neens-eval-gate -->\n## Neens pre-prod gate: FAILED\n")
    summary = Path(failed.outputs["summary"]).read_text(encoding="utf-8")
    assert comment == "<!-- neens-eval-gate -->\n" + summary
    assert "version `0123abcd`" in comment  # github.sha, the version-label default
    assert f"{live_server.url}/ui/preprod-evals/" in comment
    methods = [method for method, _, _ in github.calls]
    assert methods == ["GET", "POST", "GET", "PATCH"]
    assert {auth for _, _, auth in github.calls} == {"Bearer ghs_test_token"}
    result = json.loads(Path(failed.outputs["result"]).read_text(encoding="utf-8"))
    assert result["verdict"] == "failed" and result["versionLabel"] == "0123abcd"
    step_summary = (tmp_path / "step_summary.md").read_text(encoding="utf-8")
    assert "## Neens pre-prod gate: PASSED" in step_summary
    assert "## Neens pre-prod gate: FAILED" in step_summary


def test_the_workflow_of_docs_ci_uses_the_action_with_inputs_it_declares() -> None:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    workflow = next(block for block in blocks if "neens-eval-gate" in json.dumps(block))
    steps = workflow["jobs"]["preprod-eval"]["steps"]
    (step,) = [s for s in steps if "neens-eval-gate" in s.get("uses", "")]
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))

    assert (ROOT / step["uses"] / "action.yml") == ACTION
    assert set(step["with"]) <= set(action["inputs"])
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required <= set(step["with"])
    assert workflow["permissions"]["pull-requests"] == "write"


@pytest.mark.parametrize("sdk", ["python", "node"])
def test_the_install_step_installs_the_sdk_that_comes_with_the_action(
    sdk: str, tmp_path: Path
) -> None:
    """`uses: …/neens-eval-gate@ref` checks out the whole repository at that ref; the install
    step installs the SDK from its sdk/ folder (a package index may hold another program under
    the SDK's name, or none). The checkout is a copy, so builds never touch the working tree."""
    checkout = tmp_path / "action-checkout"
    action_path = checkout / ".github" / "actions" / "neens-eval-gate"
    shutil.copytree(ACTION.parent, action_path)
    shutil.copytree(
        ROOT / "sdk",
        checkout / "sdk",
        ignore=shutil.ignore_patterns("node_modules", "dist", "*.egg-info", "__pycache__"),
    )
    project = tmp_path / "repo"
    project.mkdir()
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    env = {**os.environ, "PATH": f"{environment / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    inputs = {"base-url": "http://127.0.0.1:9", "api-key": "nk_live_x", "sdk": sdk}

    job = run_action(inputs, cwd=project, env=env, tmp=tmp_path, action_path=action_path, steps=1)

    assert job.code == 0, job.log
    assert f"installed the {sdk} SDK" in job.log
    command = (
        [str(environment / "bin" / "neens")]
        if sdk == "python"
        else [str(project / "node_modules" / ".bin" / "neens-eval")]
    )
    version = subprocess.run([*command, "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "neens-eval 0.1.0"


def test_the_install_step_says_what_to_do_when_no_sdk_comes_with_the_action(
    tmp_path: Path,
) -> None:
    """The action folder copied alone into a repository has no SDK beside it: the step says so
    and how to fix it, exit 2, and installs nothing from an index by name."""
    action_path = tmp_path / "repo" / ".github" / "actions" / "neens-eval-gate"
    shutil.copytree(ACTION.parent, action_path)
    inputs = {"base-url": "http://127.0.0.1:9", "api-key": "nk_live_x"}

    job = run_action(
        inputs,
        cwd=tmp_path / "repo",
        env=dict(os.environ),
        tmp=tmp_path,
        action_path=action_path,
        steps=1,
    )

    assert job.code == 2, job.log
    assert "no Neens SDK beside this action" in job.log
    assert "install: false" in job.log
