"""The `neens` command line: core command groups plus those other installed packages add.

Plugin protocol. A distribution adds command groups by declaring an entry point in the group
`neens.cli` that loads to `register(subparsers) -> None`:

    [project.entry-points."neens.cli"]
    platform = "neens.cli:register"

`subparsers` is the top-level `argparse._SubParsersAction` (`Subparsers` below); `register` adds
its groups with `subparsers.add_parser(...)`, and every runnable parser calls
`set_defaults(func=handler)`, where `handler(args: argparse.Namespace) -> int` returns the exit
code. A handler may raise any `neens_eval.errors.NeensClientError`; it is printed as one line
and mapped to its exit code. Keep imports in `register` light: it runs on every `neens --help`.

A plugin that fails to load or to register is skipped with a one-line warning naming its
distribution; whatever it had registered before failing is removed, so the rest of the command
line keeps working. Core groups are registered first and through the same protocol, so a plugin
cannot replace them (argparse refuses the duplicate name and the plugin is skipped).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

from neens_eval import __version__, datasets, eval_run, sweep, verify_cli
from neens_eval.errors import EXIT_USAGE, NeensClientError

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: standard output was closed by its reader (`neens … | head`)."""

ENTRY_POINT_GROUP = "neens.cli"

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = Callable[[argparse.Namespace], int]
Register: TypeAlias = Callable[[Subparsers], None]

CORE_GROUPS: dict[str, Register] = {
    "datasets": datasets.register,
    "eval": eval_run.register,
    "sweep": sweep.register,
    "verify": verify_cli.register,
}


def plugin_entry_points() -> list[metadata.EntryPoint]:
    """Every installed `neens.cli` entry point, in a stable order (by distribution, then name)."""
    found = metadata.entry_points(group=ENTRY_POINT_GROUP)
    return sorted(found, key=lambda entry_point: (_origin(entry_point), entry_point.name))


def build_parser(*, with_plugins: bool = True) -> argparse.ArgumentParser:
    """The full `neens` parser: core groups, then every plugin that loads cleanly."""
    return _build(with_plugins=with_plugins)[0]


class Parser(argparse.ArgumentParser):
    """The parser of `neens` and of every group and command under it (plugins' included, as
    `add_subparsers` builds the parsers with the class of its parent).

    Three differences from argparse's defaults, so a typo is never taken for something else:
    a flag must be spelled out (`--golde` is not `--golden`); an unknown flag after a command is
    reported by that command, with its usage line rather than the top-level one; and an unknown
    flag is named even when a required one is then missing (`--nmae x` is a misspelt `--name`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._parsing: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._parsing = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            # A command's parser is run by its group's with parse_known_args, which would hand
            # the leftovers up to `neens` itself: refuse them here, under this command's usage.
            unknown = self._unknown_flags() or extras
            self.error(f"unrecognized arguments: {' '.join(unknown)}{self._did_you_mean(unknown)}")
        return parsed, extras

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """Refuse an argument that is not UTF-8 text before it becomes a name, a label or a
        request, none of which could carry it. Python hands such bytes over as lone surrogates
        (`\\udcff` for the byte 0xff); only a file path (`type=Path`) may hold them, as a file
        system name can, and a command's own arguments are checked by that command's parser."""
        if (
            action.type is not Path
            and not isinstance(action, argparse._SubParsersAction)
            and (problem := _not_utf8(arg_string)) is not None
        ):
            raise argparse.ArgumentError(action, problem)
        return super()._get_value(action, arg_string)

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_flags()
        if unknown and not message.startswith("unrecognized arguments"):
            # A misspelt flag usually also leaves a required one missing; the typo is the news.
            message = f"unrecognized arguments: {' '.join(unknown)}{self._did_you_mean(unknown)}"
        super().error(message)

    def _unknown_flags(self) -> list[str]:
        """The flags in the arguments being parsed that this parser does not know."""
        unknown = []
        for arg in self._parsing:
            if arg == "--":
                break
            if (
                len(arg) > 1
                and arg[0] in self.prefix_chars
                and not self._negative_number_matcher.match(arg)
                and arg.split("=", 1)[0] not in self._option_string_actions
            ):
                unknown.append(arg)
            elif arg in self._name_parser_map():
                break  # what follows is a command's, which checks it itself
        return unknown

    def _name_parser_map(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def _did_you_mean(self, unknown: list[str]) -> str:
        flags = [flag for flag in self._option_string_actions if flag.startswith("--")]
        close = difflib.get_close_matches(unknown[0].split("=", 1)[0], flags, n=1)
        return f" (did you mean {close[0]}?)" if close else ""


def _not_utf8(arg: str) -> str | None:
    """Why `arg` (as Python received it from the command line) is not UTF-8 text, or None."""
    raw = os.fsencode(arg)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"'{raw.decode('utf-8', 'backslashreplace')}' is not UTF-8 text "
            f"(byte 0x{raw[exc.start]:02x} at offset {exc.start}); give it as UTF-8"
        )
    return None


def _build(*, with_plugins: bool) -> tuple[argparse.ArgumentParser, Subparsers]:
    parser: argparse.ArgumentParser = Parser(
        prog="neens",
        description=(
            "Neens command line: push datasets, run evaluation gates, compare models with "
            "sweeps, manage a server."
        ),
        epilog=(
            "Client commands read NEENS_BASE_URL and NEENS_API_KEY from the environment. "
            "Run `neens COMMAND --help` for the options of a command."
        ),
    )
    parser.add_argument("--version", action="version", version=f"neens-eval {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for register in CORE_GROUPS.values():
        register(subparsers)
    if with_plugins:
        for entry_point in plugin_entry_points():
            _register_plugin(entry_point, subparsers)
    return parser, subparsers


def main(argv: Sequence[str] | None = None) -> int:
    """Run `neens` with `argv` (default: the process arguments) and return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    # A core command does not need the plugins, so a slow or broken plugin never gets in the way
    # of `neens datasets push` in CI. Everything else (help, plugin groups) loads them all.
    core_command = bool(args_list) and args_list[0] in CORE_GROUPS
    parser, subparsers = _build(with_plugins=not core_command)
    if not args_list:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # --help and --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler | None = getattr(args, "func", None)
    if handler is None:
        # A group was named without one of its commands: show that group's commands.
        subparsers.choices.get(args_list[0], parser).print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = handler(args)
        sys.stdout.flush()  # here, not at exit, so a reader that went away is caught below
        return code
    except BrokenPipeError:
        # `neens exp list | head`: the reader has all it wanted. Whatever is left unwritten goes
        # nowhere, and the exit code says so as a program killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except NeensClientError as exc:
        print(f"neens: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("neens: interrupted", file=sys.stderr)
        return 130


def _register_plugin(entry_point: metadata.EntryPoint, subparsers: Subparsers) -> None:
    names_before = dict(subparsers.choices)
    help_lines_before = len(subparsers._choices_actions)
    try:
        register = entry_point.load()
        register(subparsers)
    except Exception as exc:  # any failure in a plugin must not stop the CLI
        # Undo a half-done registration so no group is listed that cannot be run.
        for name in set(subparsers.choices) - set(names_before):
            del subparsers.choices[name]
        del subparsers._choices_actions[help_lines_before:]
        detail = " ".join(str(exc).split()) or "no detail"
        print(
            f"neens: warning: skipped the commands from {_origin(entry_point)} (entry point "
            f"{entry_point.name!r}: {type(exc).__name__}: {detail}); reinstall or upgrade it, "
            f"or uninstall it to silence this warning",
            file=sys.stderr,
        )


def _origin(entry_point: metadata.EntryPoint) -> str:
    """The distribution an entry point comes from, as "name version", for messages."""
    dist = entry_point.dist
    if dist is None:
        return entry_point.value
    return f"{dist.name} {dist.version}"


if __name__ == "__main__":
    raise SystemExit(main())
