"""`neens exp metrics`: two stand-in benchmark commands (Python scripts with seeded noise) run
in interleaved pairs and compared; bad commands refused with one line and exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from neens_eval.cli import main
from scipy.stats import binomtest, quantile_test

from tests.exp.conftest import Result

BENCH = """\
import json, os, random, sys
speed = float(sys.argv[1])
arm, pair = os.environ["NEENS_ARM"], int(os.environ["NEENS_PAIR"])
rng = random.Random(f"{sys.argv[2] if len(sys.argv) > 2 else arm}:{pair}")
with open("order.log", "a") as log:
    log.write(f"{arm} {pair}\\n")
print("warming up")
print(json.dumps({"lcp_ms": round(2300 * speed * rng.lognormvariate(0, 0.02)),
                  "score": 0.8 + rng.gauss(0, 0.01)}))
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.py").write_text(BENCH)
    return tmp_path


def _metrics(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    capsys.readouterr()
    code = main(["exp", "metrics", *args])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def _bench(speed: float, seed: str | None = None) -> str:
    return f"{sys.executable} bench.py {speed}" + (f" {seed}" if seed else "")


def _arms(base: str, cand: str) -> list[str]:
    """`--arm base=BASE --arm cand=CAND`."""
    return ["--arm", f"base={base}", "--arm", f"cand={cand}"]


def test_a_faster_candidate_is_better_and_the_order_alternates(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _metrics(capsys, *_arms(_bench(1.0), _bench(0.9)), "--higher", "score")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == (
        "metrics base vs cand: 11 pairs, interleaved (base first in odd pairs, cand first in "
        "even ones)"
    )
    lcp = next(line for line in lines if line.startswith("lcp_ms"))
    assert "0/11/0" in lcp and lcp.endswith("better (lower is better)")
    score = next(line for line in lines if line.startswith("score"))
    assert score.endswith("(higher is better)")
    order = (folder / "order.log").read_text().split("\n")[:-1]
    assert order[:6] == ["base 1", "cand 1", "cand 2", "base 2", "base 3", "cand 3"]
    assert len(order) == 22


def test_json_matches_scipy_on_the_printed_values(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _metrics(
        capsys,
        *_arms(_bench(1.0), _bench(1.0)),
        "--pairs",
        "9",
        "--json",
    )
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["pairs"] == 9 and len(body["firstInPair"]) == 9
    assert body["firstInPair"][:3] == ["base", "cand", "base"]
    for metric in body["metrics"]:
        a, b = metric["values"]["base"], metric["values"]["cand"]
        assert len(a) == len(b) == 9
        d = np.array(b) - np.array(a)
        assert metric["medianDifference"] == pytest.approx(float(np.median(d)), rel=1e-12)
        assert metric["medians"]["base"] == pytest.approx(float(np.median(a)), rel=1e-12)
        ci = quantile_test(d, q=0, p=0.5).confidence_interval(0.95)
        assert (metric["interval"]["low"], metric["interval"]["high"]) == (ci.low, ci.high)
        pos, neg = int((d > 0).sum()), int((d < 0).sum())
        assert metric["signTest"]["p"] == pytest.approx(binomtest(pos, pos + neg).pvalue)
    assert {m["name"] for m in body["metrics"]} == {"lcp_ms", "score"}
    assert body["exitCode"] == 0


def test_fail_on_worse_exits_1_when_a_metric_is_worse(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _arms(_bench(1.0), _bench(1.1))
    result = _metrics(capsys, *args, "--fail-on-worse")
    assert result.code == 1, result.err
    assert result.out.splitlines()[-1] == "worse: lcp_ms (--fail-on-worse)"
    assert _metrics(capsys, *args).code == 0  # without the flag a worse metric is a report


def test_a_higher_is_better_metric_that_rises_is_better(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = folder / "score.py"
    script.write_text(
        "import json, os, sys\n"
        "pair = int(os.environ['NEENS_PAIR'])\n"
        "print(json.dumps({'accuracy': float(sys.argv[1]) + pair / 1000}))\n"
    )
    score = f"{sys.executable} score.py"
    args = ["--arm", f"a={score} 0.7", "--arm", f"b={score} 0.8"]
    body = json.loads(_metrics(capsys, *args, "--higher", "accuracy", "--json").out)
    assert body["metrics"][0]["verdict"] == "better"
    body = json.loads(_metrics(capsys, *args, "--json").out)
    assert body["metrics"][0]["verdict"] == "worse"


@pytest.mark.parametrize(
    ("cand", "message"),
    [
        ("echo hi", "arm cand (`echo hi`), pair 1: printed no JSON object (its last line is 'hi')"),
        ("true", "arm cand (`true`), pair 1: printed nothing on standard output"),
        ("echo '[1, 2]'", "arm cand (`echo '[1, 2]'`), pair 1: printed JSON that is not an object"),
        (
            """echo '{"lcp_ms": "fast", "score": 1}'""",
            'pair 1: printed metric lcp_ms as "fast", not a number',
        ),
        ("""echo '{"lcp_ms": true, "score": 1}'""", "printed metric lcp_ms as true, not a number"),
        ("""echo '{"lcp_ms": NaN, "score": 1}'""", "printed metric lcp_ms as nan, not a finite"),
        (
            """echo '{"lcp_ms": 100000000000000000000000000000, "score": 1}'""",
            "pair 1: printed metric lcp_ms as 100000000000000000000000000000, too large a whole "
            "number (below 2⁶² either way; write a larger one with an exponent, as 1e29)",
        ),
        (
            f"""echo '{{"lcp_ms": -{2**62}, "score": 1}}'""",
            f"printed metric lcp_ms as -{2**62}, too large a whole number",
        ),
        (
            """echo '{"lcp_ms": 1, "score": 1, "lcp_ms": 2}'""",
            "pair 1: printed metric lcp_ms twice (each metric may appear once)",
        ),
        (
            """echo log line; echo '{"lcp_ms": 1, "lcp_ms": 2, "score": 1}'""",
            "pair 1: printed metric lcp_ms twice (each metric may appear once)",
        ),
        (
            """echo '{"lcp_ms": 3}'""",
            "metric score: missing from arm cand's output on pair 1 (arm base printed it on "
            "pair 1)",
        ),
        (
            """echo '{"lcp_ms": 3, "score": 1, "extra": 2}'""",
            "metric extra: printed by arm cand on pair 1 but not by arm base on pair 1",
        ),
        (
            "echo broken >&2; exit 4",
            "arm cand (`echo broken >&2; exit 4`), pair 1: exited with code 4: broken",
        ),
    ],
)
def test_a_bad_command_is_one_line_and_exit_2_with_nothing_printed(
    folder: Path, capsys: pytest.CaptureFixture[str], cand: str, message: str
) -> None:
    result = _metrics(capsys, *_arms(_bench(1.0), cand), "--json")
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1
    assert message in result.err, result.err


def test_a_metric_missing_in_a_later_run_of_the_same_arm_is_named(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = folder / "flaky.py"
    script.write_text(
        "import json, os\n"
        "pair = int(os.environ['NEENS_PAIR'])\n"
        "print(json.dumps({'a': 1, 'b': 2} if pair < 3 else {'a': 1}))\n"
    )
    command = f"{sys.executable} flaky.py"
    result = _metrics(capsys, "--arm", f"x={command}", "--arm", f"y={command}")
    assert result.code == 2 and result.out == ""
    assert "metric b: missing from arm x's output on pair 3" in result.err


def test_a_command_that_hangs_is_stopped_at_the_timeout(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _metrics(capsys, *_arms(_bench(1.0), "sleep 30"), "--timeout", "0.5")
    assert result.code == 2
    assert "arm cand (`sleep 30`), pair 1: ran longer than 0.5 s (--timeout)" in result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arm", "base=echo 1"], "--arm: give exactly two arms, the baseline first (got 1)"),
        (["--arm", "a=x", "--arm", "a=y"], "--arm: both arms are named a"),
        (["--arm", "just a command"], "is not NAME=COMMAND"),
        (["--arm", "a=x", "--arm", "b=y", "--pairs", "5"], "--pairs: must be at least 6"),
    ],
)
def test_bad_flags_are_refused_before_anything_runs(
    folder: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    result = _metrics(capsys, *args)
    assert result.code == 2
    assert message in result.err, result.err
    assert not (folder / "order.log").exists()


def test_an_unknown_higher_metric_is_named(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _metrics(
        capsys,
        *_arms(_bench(1.0), _bench(1.0)),
        "--pairs",
        "6",
        "--higher",
        "score,accuracy",
    )
    assert result.code == 2 and result.out == ""
    assert "--higher accuracy: no run printed a metric of that name (the metrics are " in (
        result.err
    )


def test_whole_numbers_just_below_the_bound_are_compared_exactly(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = 2**62 - 1
    args = _arms(f"""echo '{{"n": {big}}}'""", f"""echo '{{"n": -{big}}}'""")
    body = json.loads(_metrics(capsys, *args, "--pairs", "6", "--json").out)
    metric = body["metrics"][0]
    assert metric["values"] == {"base": [big] * 6, "cand": [-big] * 6}
    assert metric["medianDifference"] == float(-2 * big)  # the mean of the middle two
    assert metric["interval"] is not None
