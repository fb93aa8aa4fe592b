"""`neens datasets`: upload evaluation datasets from JSONL files.

A dataset is a named, versioned list of items; each push creates a new version, and the dataset
is created on the first push of its name. A JSONL file holds one item per non-blank line:

    {"input": "Where is my order?", "expected_output": "It ships today.", "metadata": {"tier": 2}}

`input` (string) is required; `expected_output` (string or null) and `metadata` (object) are
optional. Any other key is refused rather than dropped, so a misspelt `expected_ouput` cannot
silently upload items without their expected output. The file is checked completely before
anything is sent, and every problem is reported as `FILE:LINE: what is wrong`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from neens_eval.client import Client, RetryNotice, describe_size, unexpected
from neens_eval.errors import ApiError, BodyCutOff, ConfigError, Unreachable
from neens_eval.strict_json import no_duplicate_keys

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers

ITEM_KEYS = ("input", "expected_output", "metadata")

T = TypeVar("T")

_ITEM_FIELD = re.compile(r"items\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class PushResult:
    """What the server recorded for one push."""

    dataset_id: str
    dataset_name: str
    version_id: str
    version_number: int
    item_count: int
    golden: bool
    created_dataset: bool

    def to_json(self) -> dict[str, Any]:
        """The `--json` output: one object with camelCase keys, like the API's."""
        return {
            "datasetId": self.dataset_id,
            "datasetName": self.dataset_name,
            "versionId": self.version_id,
            "versionNumber": self.version_number,
            "itemCount": self.item_count,
            "golden": self.golden,
            "createdDataset": self.created_dataset,
        }

    def describe(self) -> str:
        """One sentence for a person."""
        items = "1 item" if self.item_count == 1 else f"{self.item_count} items"
        new = "new dataset " if self.created_dataset else ""
        golden = ", marked golden" if self.golden else ""
        return (
            f"Pushed {items} to {new}{self.dataset_name} ({self.dataset_id}) as version "
            f"{self.version_number} ({self.version_id}){golden}."
        )


def register(subparsers: Subparsers) -> None:
    """Add the `datasets` group (the core CLI registers through the plugin protocol too)."""
    group = subparsers.add_parser(
        "datasets",
        help="upload evaluation datasets",
        description="Upload evaluation datasets. Each push creates a new version of a dataset.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND")
    push = commands.add_parser(
        "push",
        help="upload a JSONL file as a new version of a dataset",
        description=(
            "Upload FILE as a new version of the dataset NAME, creating the dataset if it does "
            'not exist. Each non-blank line of FILE is a JSON object: {"input": str, '
            '"expected_output"?: str | null, "metadata"?: object}.'
        ),
        usage="neens datasets push FILE.jsonl --name NAME [--golden] [--json]",
    )
    push.add_argument("file", type=Path, metavar="FILE.jsonl", help="the items, one per line")
    push.add_argument("--name", required=True, help="name of the dataset to push to")
    push.add_argument(
        "--golden",
        action="store_true",
        help="mark the new version as the dataset's golden version",
    )
    push.add_argument(
        "--json",
        action="store_true",
        dest="as_json",
        help="print the result as one JSON object on stdout",
    )
    push.set_defaults(func=push_command)


def push_command(args: argparse.Namespace) -> int:
    """`neens datasets push`: check the file, then upload it in one request."""
    name = args.name.strip()
    if not name:
        raise ConfigError("--name must not be empty; give the dataset's name")
    numbered = _read_numbered_items(args.file)
    items = [item for _, item in numbered]
    size = len(_encode({"items": items, "golden": args.golden}))
    client = Client.from_env()
    client.on_retry = _say_retrying()
    _refuse_over_the_limit(client, args.file, size)
    dataset, created = _find_or_create_dataset(client, name)
    dataset_id = _field(dataset, "id", str, "the dataset")
    where = f"dataset {name} ({dataset_id}){', created by this push,' if created else ''}"
    try:
        result = _push_version(client, dataset, created, items, golden=args.golden)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"neens: interrupted while uploading {args.file} to {where}: the new version may or "
            f"may not have been created; check the dataset's versions (GET "
            f"/datasets/{dataset_id}/versions) before pushing again\n"
        )
        raise
    except ApiError as exc:
        if exc.status == 413:
            raise ConfigError(
                f"{args.file}: the upload is {describe_size(size)}, over the server's request "
                f"size limit (NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 {exc.code}]; "
                f"{_SPLIT_HINT}{_left_empty(where, created)}"
            ) from exc
        # The server names a refused item by position (`items[6].input`); point at its line.
        match = _ITEM_FIELD.match(exc.field or "")
        if exc.status != 422 or not match or int(match[1]) >= len(numbered):
            raise
        raise ConfigError(f"{args.file}:{numbered[int(match[1])][0]}: {exc}") from exc
    except BodyCutOff as exc:
        if size < LARGE_UPLOAD_BYTES:
            raise
        raise ConfigError(
            f"{args.file}: the upload is {describe_size(size)} and the server closed the "
            f"connection while receiving it, most likely because it is over the server's request "
            f"size limit (NEENS_MAX_REQUEST_BYTES, 16 MiB by default); "
            f"{_SPLIT_HINT}{_left_empty(where, created)}"
        ) from exc
    except Unreachable as exc:
        if not exc.maybe_applied:
            raise
        raise Unreachable(
            f"{exc}: check the versions of {where} (GET /datasets/{dataset_id}/versions) before "
            f"pushing again",
            maybe_applied=True,
        ) from exc
    print(json.dumps(result.to_json()) if args.as_json else result.describe())
    return 0


LARGE_UPLOAD_BYTES = 1_000_000
"""From this size on, a connection the server closes while receiving the upload is taken for
its request size limit (NEENS_MAX_REQUEST_BYTES) rather than for an outage."""

_SPLIT_HINT = (
    "split the file into smaller datasets (each push sends one whole version in one request), "
    "or ask the server's operator to raise NEENS_MAX_REQUEST_BYTES"
)


SMALLEST_LIMIT_BYTES = 1024
"""The lowest request size limit a Neens server can be set to (NEENS_MAX_REQUEST_BYTES): an
upload no larger than this fits any server, so its limit is not asked for."""


def _refuse_over_the_limit(client: Client, file: Path, size: int) -> None:
    """Stop before anything is created when the upload (`size` bytes, as it will be sent) is over
    the request size limit the server tells in `GET /healthz` (`maxRequestBytes`). A server that
    does not tell its limit (one older than the field) is sent the upload as before; it refuses
    one that is too large with a 413, after the dataset was created."""
    if size <= SMALLEST_LIMIT_BYTES:
        return
    limit = _server_limit(client)
    if limit is not None and size > limit:
        raise ConfigError(
            f"{file}: the upload is {_describe_bytes(size)}, over the server's request size "
            f"limit (NEENS_MAX_REQUEST_BYTES) of {_describe_bytes(limit)}; nothing was created; "
            f"{_SPLIT_HINT}"
        )


def _server_limit(client: Client) -> int | None:
    """The server's request size limit in bytes, from `GET /healthz` (which needs no key), or
    None when the answer does not give it. An error answer is taken for a server that cannot
    tell (the upload then goes on as before); a server that does not answer at all is reported
    as such, as the next request would be."""
    try:
        health = client.get("/healthz")
    except ApiError:
        return None
    limit = health.get("maxRequestBytes") if isinstance(health, dict) else None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return None
    return limit


def _describe_bytes(size: int) -> str:
    """An exact byte count, with the size in MB from 1 MB on: `17234567 bytes (17.2 MB)`."""
    return f"{size} bytes" if size < 1_000_000 else f"{size} bytes ({describe_size(size)})"


def _left_empty(where: str, created: bool) -> str:
    return f"; the {where} has no version yet" if created else ""


def _encode(body: Any) -> bytes:
    """The request body as the client sends it (to know its size before sending it)."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _say_retrying() -> Callable[[RetryNotice], None]:
    """Say on standard error that Neens is being waited for: at once, then every 10 seconds."""
    said_at: list[float] = []

    def say(notice: RetryNotice) -> None:
        if said_at and notice.waited_s - said_at[-1] < 10:
            return
        said_at.append(notice.waited_s)
        sys.stderr.write(f"{notice.describe()}\n")
        sys.stderr.flush()

    return say


def read_items(path: Path) -> list[dict[str, Any]]:
    """Read and check a JSONL file; raise `ConfigError` naming the file and line on any problem."""
    return [item for _, item in _read_numbered_items(path)]


def _read_numbered_items(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The items of a JSONL file, each with the number of the line it is on."""
    items: list[tuple[int, dict[str, Any]]] = []
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                where = f"{path}:{number}"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise ConfigError(f"{where}: not valid UTF-8; save the file as UTF-8") from None
                if number == 1:
                    line = line.removeprefix("\ufeff")  # editors on Windows add a BOM
                if line.strip():
                    items.append((number, parse_item(line, where)))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory; give a .jsonl file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not items:
        raise ConfigError(
            f'{path}: no items; write one JSON object per line, such as {{"input": "Hello"}}'
        )
    return items


def parse_item(line: str, where: str) -> dict[str, Any]:
    """Check one JSONL line; `where` ("FILE:LINE") prefixes every error message."""
    line = line.rstrip("\r\n")  # so a line cut short is reported at its end, not on the next
    try:
        value = json.loads(
            line, parse_constant=_refuse_constant, object_pairs_hook=no_duplicate_keys
        )
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # from _refuse_constant or no_duplicate_keys
        raise ConfigError(f"{where}: {exc}") from None
    if not isinstance(value, dict):
        _fail(where, f'expected a JSON object such as {{"input": "..."}}, got {_kind(value)}')
    for key in value:
        if key not in ITEM_KEYS:
            close = difflib.get_close_matches(key, ITEM_KEYS, n=1)
            hint = f" (did you mean {json.dumps(close[0])}?)" if close else ""
            _fail(
                where,
                f"unknown key {json.dumps(key)}{hint}; the keys are "
                f'"input", "expected_output" and "metadata"',
            )
    if "input" not in value:
        _fail(where, 'missing "input"; every item needs an "input" string')
    if not isinstance(value["input"], str):
        _fail(where, f'"input" must be a string, got {_kind(value["input"])}')
    expected = value.get("expected_output")
    if expected is not None and not isinstance(expected, str):
        _fail(where, f'"expected_output" must be a string or null, got {_kind(expected)}')
    if "metadata" in value and not isinstance(value["metadata"], dict):
        _fail(where, f'"metadata" must be an object, got {_kind(value["metadata"])}')
    for key in ITEM_KEYS:
        problem = _unstorable(value[key], key) if key in value else None
        if problem is not None:
            field, reason = problem
            _fail(where, f"{field}: {reason}; Neens cannot store it, remove it")
    return value


_UNSTORABLE_CHAR = re.compile("[\x00\ud800-\udfff]")
"""What the server refuses in any text: NUL, and a lone surrogate (`"\\ud800"` in JSON)."""


def _unstorable(value: Any, field: str) -> tuple[str, str] | None:
    """The first text in `value` the server would refuse, as (field, reason), or None."""
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        current, path = stack.pop()
        if isinstance(current, str):
            match = _UNSTORABLE_CHAR.search(current)
            if match is not None:
                return path, _char_reason(match)
        elif isinstance(current, dict):
            children = []
            for key, child in current.items():
                match = _UNSTORABLE_CHAR.search(key)
                if match is not None:
                    return f"{path} key {json.dumps(key)}", _char_reason(match)
                children.append((child, f"{path}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(current, list):
            stack.extend(reversed([(child, f"{path}[{i}]") for i, child in enumerate(current)]))
    return None


def _char_reason(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x00":
        return f"contains a NUL character (\\x00) at offset {match.start()}"
    return f"contains a lone surrogate (\\u{ord(char):04x}) at offset {match.start()}"


def push_dataset(
    client: Client, name: str, items: list[dict[str, Any]], *, golden: bool = False
) -> PushResult:
    """Create a new version of dataset `name` holding `items`, creating the dataset if needed."""
    dataset, created = _find_or_create_dataset(client, name)
    return _push_version(client, dataset, created, items, golden=golden)


def _push_version(
    client: Client,
    dataset: dict[str, Any],
    created: bool,
    items: list[dict[str, Any]],
    *,
    golden: bool,
) -> PushResult:
    dataset_id = _field(dataset, "id", str, "the dataset")
    path = f"/datasets/{urllib.parse.quote(dataset_id, safe='')}/versions"
    version = client.post(path, {"items": items, "golden": golden})
    what = f"POST {path}"
    return PushResult(
        dataset_id=dataset_id,
        dataset_name=_field(dataset, "name", str, "the dataset"),
        version_id=_field(version, "id", str, what),
        version_number=_field(version, "number", int, what),
        item_count=_field(version, "itemCount", int, what),
        golden=_field(version, "golden", bool, what),
        created_dataset=created,
    )


def _find_or_create_dataset(client: Client, name: str) -> tuple[dict[str, Any], bool]:
    found = _find_dataset(client, name)
    if found is not None:
        return found, False
    try:
        created = client.post("/datasets", {"name": name})
    except ApiError as exc:
        # 409: created by someone else since the lookup (two CI jobs pushing at once); use it.
        found = _find_dataset(client, name) if exc.status == 409 else None
        if found is None:
            raise
        return found, False
    if not isinstance(created, dict):
        raise unexpected("POST /datasets", "a dataset object")
    return created, True


def _find_dataset(client: Client, name: str) -> dict[str, Any] | None:
    listing = _field(client.get("/datasets", {"name": name}), "datasets", list, "GET /datasets")
    # Compare names here too rather than trusting the filter to be exact.
    for dataset in listing:
        if isinstance(dataset, dict) and dataset.get("name") == name:
            return dataset
    return None


def _field(document: Any, key: str, kind: type[T], what: str) -> T:
    value = document.get(key) if isinstance(document, dict) else None
    # bool is a subclass of int, but a count or a number is never true/false.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise unexpected(what, f"{key!r} as {kind.__name__}")
    return value


def _fail(where: str, problem: str) -> NoReturn:
    raise ConfigError(f"{where}: {problem}")


def _refuse_constant(name: str) -> Any:
    # json accepts NaN and Infinity, but they are not JSON and the server would refuse them.
    raise ValueError(f"{name} is not valid JSON; write a number or a string instead")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
