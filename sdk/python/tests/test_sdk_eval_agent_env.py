"""How `neens eval run` runs the agent command: the environment it is given (correlation
attributes, exporter settings) and how a failing or hanging command is stopped."""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from neens_eval import correlation
from neens_eval.correlation import exporter_env, item_env, merge_resource_attributes, parse_pairs
from neens_eval.errors import ConfigError
from neens_eval.invoke import Invoker, check_command

BASE = "https://neens.example.com/api"


def otel_decode(value: str) -> dict[str, str]:
    """What the OpenTelemetry Python SDK reads from OTEL_RESOURCE_ATTRIBUTES: split on commas,
    then on the first '=', and percent-decode the value (OTELResourceDetector)."""
    out = {}
    for pair in value.split(","):
        key, _, raw = pair.partition("=")
        out[key.strip()] = urllib.parse.unquote(raw.strip())
    return out


# --- OTEL_RESOURCE_ATTRIBUTES -------------------------------------------------------------------


def test_the_correlation_attributes_are_added_to_the_users_own_attributes() -> None:
    merged = merge_resource_attributes(
        "service.name=support,team=search%20ranking",
        {"neens.eval_run_id": "ppr_1", "neens.dataset_item_id": "dsi_1"},
    )

    assert merged == (
        "service.name=support,team=search%20ranking,neens.eval_run_id=ppr_1,"
        "neens.dataset_item_id=dsi_1"
    )


def test_a_user_value_for_a_correlation_key_is_replaced_not_duplicated() -> None:
    merged = merge_resource_attributes(
        "neens.version_label=stale, a=1,,", {"neens.version_label": "v2"}
    )

    assert merged == "a=1,neens.version_label=v2"


@pytest.mark.parametrize("label", ["pr 482, rc=1", "100% ready", "émoji 🙂", "a,b=c%2C"])
def test_values_are_percent_encoded_so_the_otel_sdk_reads_them_back_exactly(label: str) -> None:
    merged = merge_resource_attributes("x=1", {"neens.version_label": label})

    assert otel_decode(merged) == {"x": "1", "neens.version_label": label}


def test_the_item_environment_carries_the_prompt_and_the_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env, fits = item_env(
        {"PATH": "/bin", "OTEL_RESOURCE_ATTRIBUTES": "a=1"},
        run_id="ppr_1",
        item_id="dsi_9",
        version_label="v 1",
        prompt="Where is order 17?",
    )

    assert fits
    assert env["NEENS_ITEM_INPUT"] == "Where is order 17?"
    assert (env["NEENS_EVAL_RUN_ID"], env["NEENS_DATASET_ITEM_ID"]) == ("ppr_1", "dsi_9")
    assert env["NEENS_VERSION_LABEL"] == "v 1"
    assert otel_decode(env["OTEL_RESOURCE_ATTRIBUTES"]) == {
        "a": "1",
        "neens.eval_run_id": "ppr_1",
        "neens.dataset_item_id": "dsi_9",
        "neens.version_label": "v 1",
    }
    assert env["PATH"] == "/bin"


def test_a_prompt_too_long_for_an_environment_variable_goes_on_stdin_only() -> None:
    prompt = "x" * correlation.MAX_ENV_STRING_BYTES
    env, fits = item_env(
        {"NEENS_ITEM_INPUT": "stale"}, run_id="r", item_id="i", version_label="v", prompt=prompt
    )

    assert not fits
    assert "NEENS_ITEM_INPUT" not in env


# --- the OTLP exporter --------------------------------------------------------------------------


def test_with_nothing_configured_the_exporter_points_at_neens_with_the_key() -> None:
    assert exporter_env({}, BASE, "nk_live_abc") == {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{BASE}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Bearer%20nk_live_abc",
    }


def test_the_docs_ci_step_sets_only_the_endpoint_and_the_key_is_added() -> None:
    environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{BASE}/v1/traces"}

    assert exporter_env(environ, BASE, "nk_live_abc") == {
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Bearer%20nk_live_abc"
    }


def test_an_authorization_header_the_user_set_is_left_alone() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://neens.example.com/api/",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20nk_live_other",
    }

    assert exporter_env(environ, BASE, "nk_live_abc") == {}


def test_other_generic_headers_are_carried_over_when_the_key_is_added() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": BASE,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=search",
    }

    added = exporter_env(environ, BASE, "nk_live_abc")

    assert parse_pairs(added["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]) == {
        "x-team": "search",
        "Authorization": "Bearer nk_live_abc",
    }


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://collector.internal:4318/v1/traces",
        "http://neens.example.com/api/v1/traces",  # http, not https: another origin
        "https://neens.example.com/other/v1/traces",  # outside the base path
        "https://neens.example.com.evil.test/api/v1/traces",
    ],
)
def test_the_key_is_never_given_for_an_endpoint_other_than_neens(endpoint: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}

    assert exporter_env(environ, BASE, "nk_live_abc") == {}


# --- running the command ------------------------------------------------------------------------


def test_the_prompt_reaches_the_command_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "out"
    invoker = Invoker(
        [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"],
        item_timeout=30,
    )

    result = invoker.run("dsi_1", "Où est ma commande ? 🙂", dict(os.environ))

    assert result.ok
    assert result.reason == ""
    assert out.read_text(encoding="utf-8") == "Où est ma commande ? 🙂"


def test_a_failing_command_is_explained_by_its_exit_code_and_last_error_line() -> None:
    invoker = Invoker(
        [sys.executable, "-c", "import sys; print('detail', file=sys.stderr);"
         "print('ValueError: bad prompt', file=sys.stderr); sys.exit(7)"],
        item_timeout=30,
    )  # fmt: skip

    result = invoker.run("dsi_1", "q", dict(os.environ))

    assert not result.ok
    assert result.returncode == 7
    assert result.reason == "the command exited with code 7: ValueError: bad prompt"


def test_a_command_past_its_timeout_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # A shell wrapper that starts a long-lived grandchild which ignores SIGTERM, then waits.
    script = f"trap '' TERM; sleep 60 & echo $! > {pid_file}; wait"
    invoker = Invoker(["sh", "-c", script], item_timeout=0.5)

    started = time.monotonic()
    result = invoker.run("dsi_1", "", dict(os.environ))

    assert time.monotonic() - started < 10
    assert result.timed_out
    assert result.returncode is None
    assert result.reason.startswith("the command timed out after")
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child not reaped yet is a zombie: it is gone for every purpose here.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_command_that_cannot_start_is_reported_per_item(tmp_path: Path) -> None:
    invoker = Invoker([str(tmp_path)], item_timeout=5)  # a directory cannot be executed

    result = invoker.run("dsi_1", "q", dict(os.environ))

    assert not result.ok
    assert result.reason.startswith("could not start the command (")


def test_a_missing_command_is_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="was not found on PATH"):
        check_command(["surely-not-installed-agent"], {"PATH": "/nonexistent"})
    with pytest.raises(ConfigError, match="no agent command"):
        check_command([], dict(os.environ))
    check_command([sys.executable, "-c", "pass"], dict(os.environ))
