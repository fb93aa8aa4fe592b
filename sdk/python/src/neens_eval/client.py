"""A small JSON client for the Neens HTTP API, on `urllib.request` so it needs no dependency.

Retries follow one rule: retry only when the server cannot have acted on the request, or when
acting twice is harmless. GET and PUT are idempotent, so every connection failure and every
502/503/504 is retried for them. A POST creates something, so it is retried only when it cannot
have reached the application: the connection was refused or failed while the request was being
sent, or the server said 503 (not taking requests). A POST that times out waiting for its answer,
whose connection drops afterwards, or that meets a 502/504 from a proxy is reported at once as
`Unreachable` with `maybe_applied` set, rather than risking a duplicate; the caller can look on
the server for what it may have created once the server answers again.

A request whose body the server stopped reading (it closed the connection while the body was
still being sent, as it does early for a body over its size limit) is never sent again, whatever
its method: the answer the server sent first (a 413) is read and reported when it can be, else
`BodyCutOff` says what happened and how large the body was.

Retries go on for a time window (`RetryPolicy.window_s`, 60 s by default, `NEENS_RETRY_WINDOW`
to change it), with a backoff that doubles up to a cap, so a server restart or a short outage
does not fail a CI job.

Redirects are never followed: urllib would replay the `Authorization` header to wherever the
redirect points, and a redirect almost always means `NEENS_BASE_URL` is slightly wrong (http
instead of https, a missing path prefix), which the error message says.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from email.message import Message
from typing import IO, Any

from neens_eval import __version__
from neens_eval.errors import ApiError, BodyCutOff, ConfigError, Unreachable

BASE_URL_VAR = "NEENS_BASE_URL"
API_KEY_VAR = "NEENS_API_KEY"
RETRY_WINDOW_VAR = "NEENS_RETRY_WINDOW"
RETRY_STATUSES = frozenset({502, 503, 504})
API_KEY_PREFIX = "nk_live_"
"""Every key Neens issues is this prefix followed by URL-safe characters (`neens keys create`)."""
_API_KEY_SHAPE = re.compile(r"nk_live_[A-Za-z0-9_-]+")
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})

Params = Mapping[str, str | int | bool | None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a request is retried, and how long to wait between tries.

    A request is tried again until `window_s` seconds have passed since its first try (the last
    wait is shortened so one try lands at the end of the window). The wait before retry number
    n (from 0) is `backoff * 2**n`, capped at `max_backoff`. The default window rides out a
    server restart or a short outage without stalling a CI job for long.
    """

    window_s: float = 60.0
    """How long retries may go on, from the first try; 0 disables retries."""
    backoff: float = 0.5
    max_backoff: float = 5.0
    attempts: int | None = None
    """An optional cap on the tries, the first included (None: only the window counts)."""
    window_from: str = RETRY_WINDOW_VAR
    """What set `window_s`, named when the retries give up: NEENS_RETRY_WINDOW, or the command
    line flag (`with_window(..., "--retry-window")`)."""

    def __post_init__(self) -> None:
        if self.attempts is not None and self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if self.backoff < 0 or self.max_backoff < 0 or self.window_s < 0:
            raise ValueError("RetryPolicy delays and window must not be negative")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0 for the first retry)."""
        return float(min(self.backoff * 2 ** min(retry, 64), self.max_backoff))

    def with_window(self, window_s: float, window_from: str) -> RetryPolicy:
        """This policy with the window `window_s`, set by `window_from` (such as a flag)."""
        return replace(self, window_s=window_s, window_from=window_from)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        """The default policy, with the window from NEENS_RETRY_WINDOW when it is set."""
        env = os.environ if environ is None else environ
        text = env.get(RETRY_WINDOW_VAR, "").strip()
        if not text:
            return DEFAULT_RETRY
        return replace(DEFAULT_RETRY, window_s=parse_window(text, RETRY_WINDOW_VAR))


def parse_window(text: str, what: str) -> float:
    """A retry window in seconds (0 or more), or a `ConfigError` naming `what`."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and value != float("inf")):
        raise ConfigError(
            f"{what}: {text!r} is not a number of seconds (0 or more), such as 60; it is how "
            f"long Neens is retried when it does not answer"
        )
    return value


DEFAULT_RETRY = RetryPolicy()
"""Used when a `Client` is built without an explicit policy (read at construction time)."""


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """Passed to `Client.on_retry` before each wait: what failed and how long it has lasted."""

    method: str
    path: str
    problem: str
    waited_s: float
    window_s: float

    def describe(self) -> str:
        """The one line the CLI shows while it waits for Neens."""
        return (
            f"neens: Neens does not answer {self.method} {self.path} ({self.problem}); "
            f"retrying for up to {max(self.window_s - self.waited_s, 0):.0f} s more"
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turn every redirect into an `HTTPError` instead of following it (see the module doc)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


class _BodySendFailed(OSError):
    """The connection broke while the body was sent, and no early answer could be read."""

    def __init__(self, cause: OSError, problem: str) -> None:
        super().__init__(str(cause))
        self.problem = problem


class _EarlyAnswerMixin:
    """An HTTP connection that, when the server closes the connection while the body is still
    being sent (a 413 for a body over its size limit is answered before the body is read), reads
    the answer the server sent first rather than reporting only the broken pipe."""

    _send_failed: OSError | None = None

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._send_failed = None
        body = args[2] if len(args) > 2 else kwargs.get("body")
        try:
            super().request(*args, **kwargs)  # type: ignore[misc]
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            if not body:
                raise  # no body: nothing was refused, the connection failed (retried as such)
            self._send_failed = exc  # getresponse() reads the early answer, if there is one

    def getresponse(self) -> http.client.HTTPResponse:
        try:
            response: http.client.HTTPResponse = super().getresponse()  # type: ignore[misc]
        except (OSError, http.client.HTTPException) as exc:
            if self._send_failed is None:
                raise
            raise _BodySendFailed(self._send_failed, _describe(exc)) from None
        return response


_CONNECTION_CLASSES: dict[type[Any], type[Any]] = {}


def _early_answer_class(http_class: type[Any]) -> Any:
    if http_class not in _CONNECTION_CLASSES:
        name = f"EarlyAnswer{http_class.__name__}"
        _CONNECTION_CLASSES[http_class] = type(name, (_EarlyAnswerMixin, http_class), {})
    return _CONNECTION_CLASSES[http_class]


class _HTTPHandler(urllib.request.HTTPHandler):
    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        return super().do_open(_early_answer_class(http_class), req, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        return super().do_open(_early_answer_class(http_class), req, **kwargs)


class Client:
    """Talks JSON to one Neens server with one API key.

    Every method returns the decoded JSON answer (None for an empty one) or raises a
    `neens_eval.errors.NeensClientError`: `ApiError` (or `AuthError`) when the server answered
    with an error, `Unreachable` when it could not be reached after the retries.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float = 30.0,
        *,
        retry: RetryPolicy | None = None,
    ) -> None:
        base_url, api_key = base_url.strip(), api_key.strip()
        for problem in (_base_url_problem(base_url), _api_key_problem(api_key)):
            if problem:
                raise ConfigError(problem)
        if timeout <= 0:
            raise ConfigError(f"the timeout must be a positive number of seconds (got {timeout})")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retry = retry if retry is not None else DEFAULT_RETRY
        self.on_retry: Callable[[RetryNotice], None] | None = None
        """Called before each wait between tries, to show that Neens is being waited for."""
        self._api_key = api_key
        self._opener = urllib.request.build_opener(_NoRedirect(), _HTTPHandler(), _HTTPSHandler())

    def __repr__(self) -> str:
        # Never show the key: reprs end up in logs and tracebacks.
        return f"Client(base_url={self.base_url!r}, timeout={self.timeout!r})"

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> Client:
        """Build a client from NEENS_BASE_URL and NEENS_API_KEY (or from `environ` if given)."""
        env = os.environ if environ is None else environ
        base_url = env.get(BASE_URL_VAR, "").strip()
        if not base_url:
            raise ConfigError(
                f"{BASE_URL_VAR} is not set; set it to the address of your Neens server, "
                f"for example: export {BASE_URL_VAR}=http://127.0.0.1:8000"
            )
        api_key = env.get(API_KEY_VAR, "").strip()
        if not api_key:
            raise ConfigError(
                f"{API_KEY_VAR} is not set; create an API key for your project "
                f"(`neens keys create` on the server) and export {API_KEY_VAR}=<the key>"
            )
        for name, problem in (
            (BASE_URL_VAR, _base_url_problem(base_url)),
            (API_KEY_VAR, _api_key_problem(api_key) or _api_key_shape_problem(api_key)),
        ):
            if problem:
                raise ConfigError(f"{name}: {problem}")
        if retry is None:
            retry = RetryPolicy.from_env(env)
        return cls(base_url, api_key, timeout, retry=retry)

    def get(self, path: str, params: Params | None = None) -> Any:
        """GET `path` (relative to the base URL, starting with "/"), with optional query params."""
        return self._request("GET", path, None, params)

    def post(self, path: str, json_body: Any) -> Any:
        """POST `json_body` as JSON to `path`."""
        return self._request("POST", path, json_body, None)

    def put(self, path: str, json_body: Any) -> Any:
        """PUT `json_body` as JSON to `path`."""
        return self._request("PUT", path, json_body, None)

    def url(self, path: str, params: Params | None = None) -> str:
        """The absolute URL for `path` and `params` (params whose value is None are left out)."""
        if not path.startswith("/"):
            raise ValueError(f"API paths start with '/': {path!r}")
        query = ""
        if params:
            pairs = [
                (key, _query_value(value)) for key, value in params.items() if value is not None
            ]
            query = "?" + urllib.parse.urlencode(pairs) if pairs else ""
        return f"{self.base_url}{path}{query}"

    def _request(self, method: str, path: str, body: Any, params: Params | None) -> Any:
        url = self.url(path, params)
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"neens-eval/{__version__}",
        }
        idempotent = method in _IDEMPOTENT_METHODS
        problem = ""
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    status: int = response.status
                    payload: bytes = response.read()
                return self._decode(status, payload, method, path)
            except urllib.error.HTTPError as exc:
                status, payload = exc.code, _read_quietly(exc)
                if status in RETRY_STATUSES:
                    problem = f"HTTP {status} {exc.reason}"
                    if not (idempotent or status == 503):
                        raise self._maybe_applied(method, path, problem) from None
                elif 300 <= status < 400:
                    raise self._redirected(status, exc.headers.get("Location")) from None
                else:
                    raise ApiError.from_body(status, str(exc.reason), payload) from None
            except _BodySendFailed as exc:
                # The server stopped reading the body and closed the connection, and sent no
                # answer that could be read. Sending the same body again would meet the same end.
                raise self._cut_off(method, path, len(data or b""), exc.problem) from None
            except urllib.error.URLError as exc:
                # urllib wraps failures that happen before the request is fully sent (DNS,
                # connect, refused, connect timeout), so the server cannot have acted on it.
                reason = exc.reason
                if isinstance(reason, ssl.SSLError):
                    raise Unreachable(
                        f"TLS with {self.base_url} failed ({reason}); check {BASE_URL_VAR} and "
                        f"the server's certificate"
                    ) from None
                if not isinstance(reason, OSError):
                    raise ConfigError(f"{BASE_URL_VAR}: cannot request {url} ({reason})") from None
                problem = _describe(reason)
            except (OSError, http.client.HTTPException) as exc:
                # Raised while waiting for or reading the answer: the request was sent.
                problem = _describe(exc)
                if not idempotent:
                    raise self._maybe_applied(method, path, problem) from None
            waited = time.monotonic() - started
            left = self.retry.window_s - waited
            if left <= 0 or (self.retry.attempts is not None and tries >= self.retry.attempts):
                break
            if self.on_retry is not None:
                self.on_retry(RetryNotice(method, path, problem, waited, self.retry.window_s))
            time.sleep(min(self.retry.delay(tries - 1), left))
        raise Unreachable(
            f"could not reach Neens at {self.base_url} after {tries} "
            f"{'attempt' if tries == 1 else 'attempts'} over "
            f"{time.monotonic() - started:.0f} s ({problem}); check {BASE_URL_VAR} and that "
            f"the server is running (retries last {self.retry.window_s:g} s, "
            f"{self.retry.window_from} changes it)"
        )

    def _decode(self, status: int, payload: bytes, method: str, path: str) -> Any:
        if not payload.strip():
            return None
        try:
            return json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ApiError(
                status,
                "invalid_response",
                f"the answer to {method} {path} is not JSON; check that {BASE_URL_VAR} "
                f"({self.base_url}) is the address of the Neens API",
            ) from None

    def _cut_off(self, method: str, path: str, size: int, problem: str) -> BodyCutOff:
        return BodyCutOff(
            f"Neens at {self.base_url} closed the connection while receiving the body of "
            f"{method} {path} ({describe_size(size)}; {problem}), possibly because it is over "
            f"the server's request size limit (NEENS_MAX_REQUEST_BYTES, 16 MiB by default); it "
            f"was not sent again",
            body_bytes=size,
        )

    def _maybe_applied(self, method: str, path: str, problem: str) -> Unreachable:
        return Unreachable(
            f"no answer from Neens at {self.base_url} to {method} {path} ({problem}); the "
            f"request may or may not have been applied, so check before running it again",
            maybe_applied=True,
        )

    def _redirected(self, status: int, location: str | None) -> ApiError:
        target = f" to {location}" if location else ""
        return ApiError(
            status,
            "redirect",
            f"Neens answered with a redirect{target}; set {BASE_URL_VAR} to the address the "
            f"server is really served at (redirects are not followed so the API key is only "
            f"ever sent to {self.base_url})",
        )


def describe_size(size: int) -> str:
    """A byte count for a person: `17.2 MB` (decimal megabytes, one decimal), or `812 bytes`."""
    if size < 1_000_000:
        return f"{size} bytes"
    return f"{size / 1_000_000:.1f} MB"


def _base_url_problem(base_url: str) -> str | None:
    """Why `base_url` cannot be used, or None. Checked up front so a typo is a usage error."""
    parts = urllib.parse.urlsplit(base_url)
    try:
        parts.port  # noqa: B018 - parsing the port is the check: it raises on a bad one
    except ValueError:
        return f"the port in {base_url!r} is not a number between 0 and 65535"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"the Neens base URL must start with http:// or https://, such as "
            f"http://127.0.0.1:8000 (got {base_url!r})"
        )
    return None


def _api_key_problem(api_key: str) -> str | None:
    if not api_key or any(char.isspace() for char in api_key):
        return "the API key is empty or contains whitespace; paste the whole key"
    return None


def _api_key_shape_problem(api_key: str) -> str | None:
    """Why `api_key` cannot be a key Neens issued, or None; never repeats the key itself."""
    if _API_KEY_SHAPE.fullmatch(api_key):
        return None
    return (
        f"this is not a Neens API key: keys look like {API_KEY_PREFIX} followed by letters, "
        f"digits, '-' and '_' (the value is not shown); paste the whole key, as "
        f"`neens keys create` printed it"
    )


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    """The body of an error answer, or b"" when even that cannot be read."""
    try:
        with error:
            return error.read()
    except (OSError, http.client.HTTPException):
        return b""


def _describe(error: BaseException) -> str:
    """A short description of a network error, such as "connection refused"."""
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, ConnectionResetError | http.client.RemoteDisconnected):
        return "connection closed by the server"
    if isinstance(error, TimeoutError):
        return "timed out"
    text = str(error) or type(error).__name__
    return " ".join(text.split())


def unexpected(what: str, expected: str) -> ApiError:
    """The error for an answer that is not what Neens answers: most likely the wrong server."""
    return ApiError(
        200,
        "unexpected_response",
        f"unexpected answer to {what}: expected {expected}; check that NEENS_BASE_URL points "
        f"at a Neens server and that neens-eval is up to date (pip install -U neens-eval)",
    )


def expect_object(answer: Any, what: str) -> dict[str, Any]:
    """`answer` when it is a JSON object, else the `unexpected` error naming `what`."""
    if not isinstance(answer, dict):
        raise unexpected(what, "a JSON object")
    return answer
