"""The conformance table (sdk/conformance/*.json) for the Python tests: reading its cases, the
scripted server that replays a case's answers on loopback, and the comparison of what a CLI did
with what the case expects. sdk/typescript/test/conformance.ts is the same for the TypeScript
tests; sdk/conformance/README.md describes the format both read.

Standard library only, like the SDK.
"""

from __future__ import annotations

import copy
import json
import math
import os
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TABLE_DIR = Path(__file__).resolve().parents[2] / "conformance"
ANY = "{any}"

PYTHON_COMMANDS: Mapping[str, list[str]] = {
    "run": ["eval", "run"],
    "push": ["eval", "push"],
    "datasets-push": ["datasets", "push"],
    "sweep-preview": ["sweep", "preview"],
    "sweep-start": ["sweep", "start"],
    "sweep-get": ["sweep", "get"],
    "sweep-cancel": ["sweep", "cancel"],
    "sweep-decide": ["sweep", "decide"],
}
"""A case's command, as the TypeScript bin spells it, and the Python `neens` words for it."""


@dataclass(frozen=True)
class Case:
    table: str
    name: str
    document: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.table}: {self.name}"


def load_cases() -> list[Case]:
    """Every case of every table, with its `{"$fixture": name}` references resolved."""
    cases = []
    for path in sorted(TABLE_DIR.glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        fixtures = table.get("fixtures", {})
        for raw in table["cases"]:
            document = resolve(raw, fixtures)
            cases.append(Case(path.stem, document["name"], document))
    return cases


def resolve(value: Any, fixtures: Mapping[str, Any]) -> Any:
    """`{"$fixture": "name"}` is the fixture; with `"$merge": {...}` its keys are replaced."""
    if isinstance(value, dict):
        if "$fixture" in value:
            base = copy.deepcopy(resolve(fixtures[value["$fixture"]], fixtures))
            for key, item in resolve(value.get("$merge", {}), fixtures).items():
                base[key] = item
            return base
        return {key: resolve(item, fixtures) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, fixtures) for item in value]
    return value


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class ScriptedServer:
    """Replays a case's `server` answers: for each request, the last route of its method and
    path whose `after` request has been seen answers with its next reply (the last one repeats);
    a request no route matches gets a 404 in Neens' error shape."""

    routes: list[dict[str, Any]]
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _served: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(request)
            chosen = None
            for index, route in enumerate(self.routes):
                if route["method"] != request.method or route["path"] != request.path:
                    continue
                after = route.get("after")
                if after and not any(_matches(seen, after) for seen in self.requests[:-1]):
                    continue
                chosen = index
            if chosen is None:
                error = {"code": "not_found", "message": f"no {request.path}"}
                return 404, {"error": error}
            replies = self.routes[chosen]["replies"]
            served = self._served.get(chosen, 0)
            self._served[chosen] = served + 1
            reply = replies[min(served, len(replies) - 1)]
            return int(reply.get("status", 200)), reply.get("body")


def _matches(request: Request, wanted: Mapping[str, Any]) -> bool:
    if request.method != wanted["method"] or request.path != wanted["path"]:
        return False
    if "query" in wanted and request.query != wanted["query"]:
        return False
    return "body" not in wanted or request.body == wanted["body"]


@contextmanager
def serve(routes: list[dict[str, Any]]) -> Iterator[ScriptedServer]:
    scripted = ScriptedServer(routes)

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw.strip() else None
            query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
            status, answer = scripted.answer(Request(self.command, parts.path, query, body))
            payload = b"" if answer is None else json.dumps(answer).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scripted.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield scripted
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _closed_port() -> int:
    """A loopback port with nothing listening: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    requests: list[Request]
    base_url: str
    closed_port: int


def run_case(case: Case, cli: Sequence[str], tmp: Path, *, python: bool) -> Outcome:
    """Run the case's command with the CLI `cli` (the words before the command) against a
    scripted server; `python` picks the Python spelling of the command."""
    document = case.document
    for name, content in document.get("files", {}).items():
        text = content if isinstance(content, str) else json.dumps(content)
        (tmp / name).write_text(text.replace("{dir}", str(tmp)), encoding="utf-8")
    closed_port = _closed_port()
    document = json.loads(json.dumps(document).replace("{closedPort}", str(closed_port)))
    with serve(document.get("server", [])) as server:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "NEENS_")) and not key.lower().endswith("_proxy")
        }
        env.update({"NEENS_BASE_URL": server.url, "NEENS_API_KEY": "nk_live_conformance"})
        for key, value in document.get("env", {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value.replace("{dir}", str(tmp)).replace("{baseUrl}", server.url)
        command = PYTHON_COMMANDS[document["command"]] if python else [document["command"]]
        args = [arg.replace("{dir}", str(tmp)) for arg in document["args"]]
        done = subprocess.run(
            [*cli, *command, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=60,
        )
        return Outcome(
            done.returncode,
            done.stdout,
            done.stderr,
            list(server.requests),
            server.url,
            closed_port,
        )


def problems(case: Case, outcome: Outcome, tmp: Path) -> list[str]:
    """How `outcome` differs from what the case expects (empty when it conforms)."""
    base_url = outcome.base_url
    case = Case(
        case.table,
        case.name,
        json.loads(json.dumps(case.document).replace("{closedPort}", str(outcome.closed_port))),
    )
    expect = case.document["expect"]
    found: list[str] = []
    if outcome.code != expect["exitCode"]:
        found.append(f"exit code {outcome.code}, expected {expect['exitCode']}")
    if "stdout" in expect:
        wanted = _placeholders(expect["stdout"], base_url, tmp)
        if wanted is None:
            if outcome.stdout.strip():
                found.append(f"standard output should be empty, got {outcome.stdout!r}")
        else:
            lines = outcome.stdout.splitlines()
            if len(lines) != 1:
                found.append(f"standard output is not one JSON line: {outcome.stdout!r}")
            else:
                found.extend(_differences(json.loads(lines[0]), wanted, "stdout"))
    for text in expect.get("stderrContains", []):
        if _placeholders(text, base_url, tmp) not in outcome.stderr:
            found.append(f"standard error lacks {text!r}")
    found.extend(_request_problems(outcome.requests, expect.get("requests", [])))
    for text in expect.get("notRequested", []):
        if any(f"{r.method} {r.path}" == text for r in outcome.requests):
            found.append(f"{text} was requested")
    for name, content in expect.get("written", {}).items():
        path = tmp / name
        actual = path.read_text(encoding="utf-8") if path.exists() else None
        wanted_text = _placeholders(content, base_url, tmp)
        if actual != wanted_text:
            found.append(f"file {name}: {actual!r}, expected {wanted_text!r}")
    if found:
        found.append(f"standard error was:\n{outcome.stderr}")
    return found


def report_lines(case: Case, outcome: Outcome, *, python: bool) -> list[str]:
    """The report a person reads (standard output, or standard error with `--json`) without the
    progress and log lines (`neens: ...`), with the scripted server's address as `{baseUrl}` and
    the Python spelling of the commands (`neens eval push`) as the TypeScript one
    (`neens-eval push`), so the two CLIs' reports can be compared line for line."""
    text = outcome.stderr if "--json" in case.document["args"] else outcome.stdout
    text = text.replace(outcome.base_url, "{baseUrl}")
    if python:
        for command, words in PYTHON_COMMANDS.items():
            text = text.replace("neens " + " ".join(words), f"neens-eval {command}")
    return [line for line in text.splitlines() if not line.startswith("neens:")]


def _request_problems(requests: list[Request], wanted: list[dict[str, Any]]) -> list[str]:
    """`wanted` must appear among the requests in this order (others may come between)."""
    at = 0
    for expected in wanted:
        while at < len(requests) and not _matches(requests[at], expected):
            at += 1
        if at == len(requests):
            made = [f"{r.method} {r.path} {r.query or ''} {json.dumps(r.body)}" for r in requests]
            return [f"request {json.dumps(expected)} not made in order; made: {made}"]
        at += 1
    return []


def _placeholders(value: Any, base_url: str, tmp: Path) -> Any:
    """`{baseUrl}` is the scripted server's address, `{dir}` the case's folder."""
    if isinstance(value, str):
        return value.replace("{baseUrl}", base_url).replace("{dir}", str(tmp))
    if isinstance(value, list):
        return [_placeholders(item, base_url, tmp) for item in value]
    if isinstance(value, dict):
        return {key: _placeholders(item, base_url, tmp) for key, item in value.items()}
    return value


def _differences(actual: Any, wanted: Any, where: str) -> list[str]:
    if wanted == ANY:
        return []
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r}, expected an object"]
        found = []
        for key in sorted(set(actual) | set(wanted)):
            if key not in wanted:
                found.append(f"{where}.{key}: unexpected key (value {actual[key]!r})")
            elif key not in actual:
                found.append(f"{where}.{key}: missing")
            else:
                found.extend(_differences(actual[key], wanted[key], f"{where}.{key}"))
        return found
    if isinstance(wanted, list):
        if not isinstance(actual, list) or len(actual) != len(wanted):
            return [f"{where}: {actual!r}, expected {wanted!r}"]
        return [
            problem
            for index, (a, w) in enumerate(zip(actual, wanted, strict=True))
            for problem in _differences(a, w, f"{where}[{index}]")
        ]
    if isinstance(wanted, float | int) and not isinstance(wanted, bool):
        numeric = isinstance(actual, float | int) and not isinstance(actual, bool)
        if numeric and math.isclose(actual, wanted, rel_tol=1e-12, abs_tol=0.0):
            return []
    if actual != wanted or isinstance(actual, bool) != isinstance(wanted, bool):
        return [f"{where}: {actual!r}, expected {wanted!r}"]
    return []
