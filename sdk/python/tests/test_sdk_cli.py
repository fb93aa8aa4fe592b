"""The `neens` entry point: argument parsing, help, exit codes and the `neens.cli` plugins."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

import neens_eval
from neens_eval import cli, datasets

SDK_SRC = Path(neens_eval.__file__).resolve().parent.parent
REAL_PLUGIN_ENTRY_POINTS = cli.plugin_entry_points  # before the autouse fixture replaces it

MakePlugin = Callable[[str, str, str], None]  # the `make_plugin` fixture in conftest.py

GOOD_PLUGIN = """
import argparse

from neens_eval.errors import ConfigError, Unreachable


def register(subparsers):
    group = subparsers.add_parser("fake", help="commands from the fake plugin")
    commands = group.add_subparsers(metavar="COMMAND")
    hello = commands.add_parser("hello")
    hello.add_argument("--who", default="world")
    hello.add_argument("--fail", choices=["config", "unreachable"])
    hello.set_defaults(func=hello_command)


def hello_command(args: argparse.Namespace) -> int:
    if args.fail == "config":
        raise ConfigError("bad config from the plugin")
    if args.fail == "unreachable":
        raise Unreachable("plugin could not reach the server")
    print(f"hello {args.who}")
    return 0
"""

HALF_PLUGIN = """
def register(subparsers):
    subparsers.add_parser("half", help="registered before the plugin failed")
    raise RuntimeError("boom\\nsecond line")
"""

CLASHING_PLUGIN = """
def register(subparsers):
    subparsers.add_parser("datasets", help="tries to replace a core group")
"""


def test_no_arguments_prints_help_on_stderr_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: neens")
    assert "datasets" in captured.err


def test_help_lists_core_and_plugin_groups(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-fake", "neens_fake_plugin:register", GOOD_PLUGIN)

    assert cli.main(["--help"]) == 0

    out = capsys.readouterr().out
    assert "datasets" in out
    assert "fake" in out and "commands from the fake plugin" in out
    assert "NEENS_BASE_URL" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"neens-eval {neens_eval.__version__}"


def test_group_without_a_command_shows_the_group_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["datasets"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: neens datasets")
    assert "push" in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nope"]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_push_arguments_are_parsed() -> None:
    args = cli.build_parser().parse_args(
        ["datasets", "push", "golden.jsonl", "--name", "support-golden", "--golden", "--json"]
    )
    assert args.file == Path("golden.jsonl")
    assert args.name == "support-golden"
    assert args.golden is True
    assert args.as_json is True
    assert args.func is datasets.push_command


def test_push_flags_default_to_off() -> None:
    args = cli.build_parser().parse_args(["datasets", "push", "a.jsonl", "--name", "n"])
    assert (args.golden, args.as_json) == (False, False)


def test_push_without_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["datasets", "push", "a.jsonl"]) == 2
    assert "--name" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "usage", "error"),
    [
        (["datasets", "push", "a.jsonl", "--name", "n", "--golde"],
         "usage: neens datasets push FILE.jsonl",
         "neens datasets push: error: unrecognized arguments: --golde (did you mean --golden?)"),
        (["datasets", "push", "a.jsonl", "--nmae", "x"],
         "usage: neens datasets push FILE.jsonl",
         "neens datasets push: error: unrecognized arguments: --nmae (did you mean --name?)"),
        (["eval", "run", "--create", "--datase", "d", "--version-label", "v", "--", "true"],
         "usage: neens eval run ",
         "neens eval run: error: unrecognized arguments: --datase (did you mean --dataset?)"),
        (["sweep", "get", "swp_1", "--wai"],
         "usage: neens sweep get ",
         "neens sweep get: error: unrecognized arguments: --wai (did you mean --wait?)"),
        (["--bogus"], "usage: neens [-h]", "neens: error: unrecognized arguments: --bogus"),
    ],
)  # fmt: skip
def test_a_misspelt_flag_is_named_under_the_usage_of_its_command(
    capsys: pytest.CaptureFixture[str], args: list[str], usage: str, error: str
) -> None:
    assert cli.main(args) == 2

    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(usage)
    assert lines[-1] == error


NOT_UTF8 = os.fsdecode(b"bad\xff")
"""What Python makes of the bytes `bad\\xff` on the command line: a lone surrogate for 0xff."""


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["datasets", "push", "a.jsonl", "--name", NOT_UTF8],
         "neens datasets push: error: argument --name: "),
        (["eval", "push", "--dataset", "d", "--version-label", NOT_UTF8,
          "--agent-connection", "conn_1"],
         "neens eval push: error: argument --version-label: "),
        (["sweep", "get", NOT_UTF8], "neens sweep get: error: argument SWEEP_ID: "),
        (["eval", "run", "--create", "--dataset", "d", "--version-label", "v", "--", NOT_UTF8],
         "neens eval run: error: argument COMMAND: "),
    ],
)  # fmt: skip
def test_an_argument_that_is_not_utf8_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    assert cli.main(args) == 2

    last = capsys.readouterr().err.splitlines()[-1]
    assert last == error + "'bad\\xff' is not UTF-8 text (byte 0xff at offset 3); give it as UTF-8"


def test_a_file_path_may_be_any_bytes_a_file_system_name_can_hold() -> None:
    path = os.fsdecode(b"caf\xe9.jsonl")
    args = cli.build_parser().parse_args(["datasets", "push", path, "--name", "n"])
    assert args.file == Path(path)


def test_no_parser_takes_an_abbreviated_flag() -> None:
    parsers = [cli.build_parser()]
    seen = 0
    while parsers:
        parser = parsers.pop()
        seen += 1
        assert parser.allow_abbrev is False, parser.prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    assert seen > 10
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["datasets", "push", "a.jsonl", "--nam", "n"])


def test_plugin_commands_run_and_their_errors_map_to_exit_codes(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-fake", "neens_fake_plugin:register", GOOD_PLUGIN)

    assert cli.main(["fake", "hello", "--who", "CI"]) == 0
    assert capsys.readouterr().out == "hello CI\n"

    assert cli.main(["fake", "hello", "--fail", "config"]) == 2
    assert capsys.readouterr().err == "neens: error: bad config from the plugin\n"

    assert cli.main(["fake", "hello", "--fail", "unreachable"]) == 3
    assert "plugin could not reach the server" in capsys.readouterr().err

    assert cli.main(["fake"]) == 2  # group without a command: that group's help
    assert capsys.readouterr().err.startswith("usage: neens fake")


def test_broken_plugin_is_skipped_with_a_one_line_warning(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-broken", "neens_missing_module_xyz:register", "")
    make_plugin("neens-fake", "neens_fake_plugin:register", GOOD_PLUGIN)

    assert cli.main(["--help"]) == 0

    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith("neens: warning:")
    assert "neens-broken 1.0" in warnings[0]
    assert "ModuleNotFoundError" in warnings[0]
    assert "neens-broken" not in captured.out
    assert "fake" in captured.out  # the other plugin still loaded
    assert "datasets" in captured.out


def test_plugin_failing_midway_leaves_nothing_behind(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-half", "neens_half_plugin:register", HALF_PLUGIN)

    assert cli.main(["--help"]) == 0
    captured = capsys.readouterr()
    assert "half" not in captured.out
    [warning] = captured.err.splitlines()
    assert "neens-half 1.0" in warning and "RuntimeError: boom second line" in warning

    assert cli.main(["half"]) == 2
    assert "invalid choice: 'half'" in capsys.readouterr().err


def test_plugin_cannot_replace_a_core_group(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-clash", "neens_clash_plugin:register", CLASHING_PLUGIN)

    assert cli.main(["--help"]) == 0
    captured = capsys.readouterr()
    assert "neens-clash 1.0" in captured.err
    assert "upload evaluation datasets" in captured.out
    assert "tries to replace a core group" not in captured.out


def test_core_commands_do_not_load_plugins(
    make_plugin: MakePlugin, capsys: pytest.CaptureFixture[str]
) -> None:
    make_plugin("neens-broken", "neens_missing_module_xyz:register", "")

    assert cli.main(["datasets", "push", "missing.jsonl", "--name", "x"]) == 2
    assert "warning" not in capsys.readouterr().err


def test_plugin_entry_points_reads_the_neens_cli_group(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    second = metadata.EntryPoint("zeta", "z:register", cli.ENTRY_POINT_GROUP)
    first = metadata.EntryPoint("alpha", "a:register", cli.ENTRY_POINT_GROUP)

    def entry_points(*, group: str) -> list[metadata.EntryPoint]:
        asked.append(group)
        return [second, first]

    monkeypatch.setattr(metadata, "entry_points", entry_points)

    assert REAL_PLUGIN_ENTRY_POINTS() == [first, second]
    assert asked == ["neens.cli"]


def test_python_dash_m_runs_the_cli_without_site_packages() -> None:
    """`python -S` leaves site-packages out, so this also proves the CLI needs nothing else."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "neens_eval", "--version"],
        env={**os.environ, "PYTHONPATH": str(SDK_SRC)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout.strip(), result.stderr) == (
        0,
        f"neens-eval {neens_eval.__version__}",
        "",
    )
