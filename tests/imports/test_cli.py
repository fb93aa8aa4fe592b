"""`neens import …` then `neens exp compare`: a real Inspect AI log and a real promptfoo output
of the same four cases, paired by case."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.imports.conftest import FIXTURES, Result

Neens = Callable[..., Result]


def test_an_inspect_log_and_a_promptfoo_output_compare_case_by_case(neens: Neens) -> None:
    a = neens("import", "inspect", str(FIXTURES / "inspect_arith.eval"), "--json")
    assert a.code == 0, a.err
    b = neens("import", "promptfoo", str(FIXTURES / "promptfoo_arith.json"), "--name", "echo")
    assert b.code == 0, b.err
    a_id = a.json()["id"]
    b_id = b.out.split()[1]
    assert b.out.startswith(f"import {b_id} echo  pass 75.0% (3/4)")
    assert "unknown cost_usd: no result carries a cost above 0" in b.out

    compared = neens("exp", "compare", a_id, b_id)
    assert compared.code == 0, compared.err
    lines = compared.out.splitlines()
    assert lines[0].startswith(f"A inspect_ai:arith:mockllm/model {a_id}  pass 75.0%")
    assert lines[1].startswith("B echo") and lines[1].endswith("pass 75.0%")
    # Per case, A's rate over its two epochs against B's one repeat: q1 1 vs 1, q2 .5 vs 1,
    # q3 .5 vs 1, q4 1 vs 0. B − A = (0 + .5 + .5 − 1) / 4 = 0; McNemar on "every repeat
    # passed": q2 and q3 improved, q4 regressed.
    assert "(4 paired cases, 95% paired bootstrap)" in lines[3]
    assert lines[3].startswith("B − A   0.0pp")
    assert lines[4] == "mcnemar p=1.000  1 regressed, 2 improved"
    assert "q4    100%  0%  -100pp" in compared.out
    assert "graded A only" in compared.err  # Inspect's includes and promptfoo's contains

    body = neens("exp", "compare", a_id, b_id, "--json").json()
    assert body["pairedCases"] == 4 and body["diff"] == 0.0
    assert (body["mcnemar"]["n10"], body["mcnemar"]["n01"]) == (1, 2)
    assert body["a"]["trials"] == 2 and body["b"]["trials"] == 1


def test_errors_are_counted_by_kind_and_left_out_of_pairing(neens: Neens) -> None:
    a = neens("import", "promptfoo", str(FIXTURES / "promptfoo_errors.jsonl"), "--json").json()
    assert (a["caseTrials"], a["errors"], a["graded"], a["passed"]) == (6, 2, 4, 2)
    assert a["unknown"] == {}  # priced (above 0) and repeated: nothing unknown
    b = neens("import", "promptfoo", str(FIXTURES / "promptfoo_errors.json"), "--json").json()
    body = neens("exp", "compare", a["id"], b["id"], "--json").json()
    assert body["a"]["errors"] == {"infra": 0, "agent": 2}
    assert body["pairedCases"] == 2 and body["verdict"] == "inconclusive"


def test_an_inspect_harness_error_is_an_infra_error(neens: Neens) -> None:
    done = neens("import", "inspect", str(FIXTURES / "inspect_arith_errors.json"), "--json")
    body = done.json()
    assert (body["errors"], body["graded"], body["passed"]) == (1, 7, 5)
    listed = neens("exp", "list", "--json").json()["experiments"]
    assert listed[0]["id"] == body["id"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "nope.eval"], "PATH: no such file nope.eval"),
        (["mlflow", str(FIXTURES)], "is not a file (give the log or results file itself)"),
        (["promptfoo", str(FIXTURES / "inspect_arith.json")], "results.version: None"),
        (["inspect", str(FIXTURES / "promptfoo_arith.yaml")], "neither an .eval archive"),
        (["openai-evals"], "give PATH"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_saves_nothing(
    neens: Neens, args: list[str], message: str
) -> None:
    result = neens("import", *args)
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and message in result.err
    assert neens("exp", "list", "--json").json()["experiments"] == []


@pytest.mark.parametrize("tool", ["inspect", "promptfoo", "mlflow", "openai-evals"])
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_nested_deeper_than_the_parser_goes_is_one_line_exit_2(
    neens: Neens, tmp_path: Path, tool: str, suffix: str
) -> None:
    deep = tmp_path / f"deep{suffix}"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    result = neens("import", tool, str(deep))
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and "JSON nested too deeply to read" in result.err
    assert neens("exp", "list", "--json").json()["experiments"] == []


def test_the_file_and_its_unknowns_are_kept_with_the_experiment(
    neens: Neens, tmp_path: Path
) -> None:
    body = neens("import", "inspect", str(FIXTURES / "inspect_arith.json"), "--json").json()
    assert body["unknown"] == {
        "cost_usd": "the log records no cost for its model calls (model_usage.total_cost)"
    }
    assert (body["toolVersion"], body["repeats"], body["cases"]) == ("0.3.285", 2, 4)
