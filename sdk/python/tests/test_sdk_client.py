"""`neens_eval.client`: request shape, retries, and how answers map onto the error tree.

The HTTP side runs against `fake_neens` (conftest.py), a loopback server standing in for
the Neens server's documented wire contract; end-to-end tests against the real server are
written separately.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from neens.demo.endpoints import Reply, Scripted, serve

import neens_eval
from neens_eval.client import Client, RetryNotice, RetryPolicy
from neens_eval.errors import (
    ApiError,
    AuthError,
    BodyCutOff,
    ConfigError,
    NeensClientError,
    Unreachable,
)

FAST = RetryPolicy(attempts=3, backoff=0.0)


def make_client(fake: Scripted, timeout: float = 5.0) -> Client:
    return Client(fake.url, "nk_live_secret", timeout, retry=FAST)


def test_get_sends_key_version_and_query(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/datasets", Reply(200, {"datasets": []}))

    answer = make_client(fake_neens).get(
        "/datasets", {"name": "support & golden", "limit": 5, "golden": True, "cursor": None}
    )

    assert answer == {"datasets": []}
    [request] = fake_neens.calls
    assert request.query == {"name": ["support & golden"], "limit": ["5"], "golden": ["true"]}
    assert request.headers["authorization"] == "Bearer nk_live_secret"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == f"neens-eval/{neens_eval.__version__}"
    assert request.body is None


@pytest.mark.parametrize("method", ["post", "put"])
def test_post_and_put_send_the_body_as_utf8_json(fake_neens: Scripted, method: str) -> None:
    fake_neens.reply(method.upper(), "/things/1", Reply(201, {"id": "t_1"}))
    body = {"input": "Où est ma commande ?", "n": [1, 2.5, None]}

    answer = getattr(make_client(fake_neens), method)("/things/1", body)

    assert answer == {"id": "t_1"}
    [request] = fake_neens.calls
    assert (request.method, request.path, request.body) == (method.upper(), "/things/1", body)
    assert request.headers["authorization"] == "Bearer nk_live_secret"


def test_base_url_path_prefix_and_trailing_slash_are_kept(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/api/datasets", Reply(200, {"ok": True}))
    client = Client(fake_neens.url + "/api/", "k", retry=FAST)
    assert client.get("/datasets") == {"ok": True}


def test_empty_answer_is_none(fake_neens: Scripted) -> None:
    fake_neens.reply("PUT", "/x", Reply(204))
    assert make_client(fake_neens).put("/x", {}) is None


def test_gateway_errors_are_retried_until_an_answer(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(503), Reply(502), Reply(200, {"ok": True}))

    assert make_client(fake_neens).get("/x") == {"ok": True}
    assert len(fake_neens.calls) == 3


def test_persistent_gateway_errors_become_unreachable(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(504))

    with pytest.raises(Unreachable) as caught:
        make_client(fake_neens).get("/x")

    assert len(fake_neens.calls) == FAST.attempts
    assert caught.value.exit_code == 3
    assert "after 3 attempts over 0 s (HTTP 504" in str(caught.value)


def test_post_is_retried_on_503_which_means_it_was_not_processed(fake_neens: Scripted) -> None:
    fake_neens.reply("POST", "/x", Reply(503), Reply(201, {"id": "x_1"}))

    assert make_client(fake_neens).post("/x", {}) == {"id": "x_1"}
    assert len(fake_neens.calls) == 2


@pytest.mark.parametrize("status", [502, 504])
def test_post_is_not_retried_when_it_may_have_been_applied(
    fake_neens: Scripted, status: int
) -> None:
    fake_neens.reply("POST", "/x", Reply(status), Reply(201, {"id": "x_1"}))

    with pytest.raises(Unreachable, match="may or may not have been applied"):
        make_client(fake_neens).post("/x", {})
    assert len(fake_neens.calls) == 1


def test_get_is_retried_after_a_timeout(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/slow", Reply(200, {"late": True}, delay_s=1.0), Reply(200, {"ok": 1}))

    assert make_client(fake_neens, timeout=0.2).get("/slow") == {"ok": 1}
    assert len(fake_neens.calls) == 2


def test_post_is_not_retried_after_a_timeout(fake_neens: Scripted) -> None:
    fake_neens.reply("POST", "/slow", Reply(201, {"late": True}, delay_s=1.0), Reply(201, {}))

    with pytest.raises(Unreachable, match=r"POST /slow \(timed out\).*may or may not"):
        make_client(fake_neens, timeout=0.2).post("/slow", {})
    assert len(fake_neens.calls) == 1


@pytest.mark.parametrize("method", ["get", "post"])
def test_refused_connection_is_retried_then_unreachable(closed_port: int, method: str) -> None:
    calls = {"get": lambda c: c.get("/x"), "post": lambda c: c.post("/x", {})}
    client = Client(f"http://127.0.0.1:{closed_port}", "k", retry=FAST)

    with pytest.raises(Unreachable) as caught:
        calls[method](client)

    message = str(caught.value)
    assert "after 3 attempts over 0 s (connection refused)" in message
    assert "check NEENS_BASE_URL" in message


def test_401_is_an_auth_error_saying_what_to_check(fake_neens: Scripted) -> None:
    body = {"error": {"code": "not_authenticated", "message": "Unknown API key."}}
    fake_neens.reply("GET", "/x", Reply(401, body))

    with pytest.raises(AuthError) as caught:
        make_client(fake_neens).get("/x")

    error = caught.value
    assert (error.status, error.code, error.message, error.field) == (
        401,
        "not_authenticated",
        "Unknown API key.",
        None,
    )
    assert error.exit_code == 2
    assert str(error) == "Unknown API key. [HTTP 401 not_authenticated]; check NEENS_API_KEY"
    assert len(fake_neens.calls) == 1


def test_403_is_an_auth_error_about_the_role(fake_neens: Scripted) -> None:
    body = {"error": {"code": "forbidden", "message": "This key may only read."}}
    fake_neens.reply("POST", "/x", Reply(403, body))

    with pytest.raises(AuthError, match="role"):
        make_client(fake_neens).post("/x", {})


def test_422_names_the_field_on_one_line(fake_neens: Scripted) -> None:
    body = {
        "error": {
            "code": "unprocessable",
            "message": "must not be empty\n(see docs)",
            "field": "items[0].input",
        }
    }
    fake_neens.reply("POST", "/x", Reply(422, body))

    with pytest.raises(ApiError) as caught:
        make_client(fake_neens).post("/x", {})

    assert type(caught.value) is ApiError
    assert caught.value.exit_code == 2
    assert str(caught.value) == (
        "must not be empty (see docs) (field items[0].input) [HTTP 422 unprocessable]"
    )


def test_500_is_not_retried_and_exits_3(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(500, body=b"<html>Internal Server Error</html>"))

    with pytest.raises(ApiError) as caught:
        make_client(fake_neens).get("/x")

    assert len(fake_neens.calls) == 1
    assert (caught.value.status, caught.value.code, caught.value.exit_code) == (500, "http_500", 3)
    assert "Internal Server Error" in str(caught.value)  # the status line's reason


def test_redirects_are_not_followed(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(301, headers={"Location": "https://elsewhere.test/x"}))

    with pytest.raises(ApiError) as caught:
        make_client(fake_neens).get("/x")

    assert caught.value.code == "redirect"
    assert "https://elsewhere.test/x" in str(caught.value)
    assert "NEENS_BASE_URL" in str(caught.value)
    assert len(fake_neens.calls) == 1


def test_a_non_json_success_means_the_wrong_server(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(200, body=b"<html>hello</html>"))

    with pytest.raises(ApiError, match="not JSON; check that NEENS_BASE_URL") as caught:
        make_client(fake_neens).get("/x")
    assert caught.value.code == "invalid_response"


def test_from_env_reads_both_variables(fake_neens: Scripted) -> None:
    fake_neens.reply("GET", "/x", Reply(200, {"ok": True}))
    client = Client.from_env({"NEENS_BASE_URL": fake_neens.url, "NEENS_API_KEY": " nk_live_1\n"})

    assert client.get("/x") == {"ok": True}
    assert fake_neens.calls[0].headers["authorization"] == "Bearer nk_live_1"


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({}, "NEENS_BASE_URL"),
        ({"NEENS_API_KEY": "k"}, "NEENS_BASE_URL"),
        ({"NEENS_BASE_URL": "http://127.0.0.1:8000"}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "http://127.0.0.1:8000", "NEENS_API_KEY": "  "}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "127.0.0.1:8000", "NEENS_API_KEY": "k"}, "NEENS_BASE_URL"),
        ({"NEENS_BASE_URL": "http://127.0.0.1:80x", "NEENS_API_KEY": "k"}, "NEENS_BASE_URL"),
        ({"NEENS_BASE_URL": "http://h", "NEENS_API_KEY": "two words"}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "http://h", "NEENS_API_KEY": "wrong"}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "http://h", "NEENS_API_KEY": "nk_live_"}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "http://h", "NEENS_API_KEY": "nk_live_…"}, "NEENS_API_KEY"),
        ({"NEENS_BASE_URL": "http://h", "NEENS_API_KEY": "sk-proj-abc"}, "NEENS_API_KEY"),
    ],
)
def test_from_env_names_the_variable_to_fix(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Client.from_env(environ)
    assert str(caught.value).startswith(variable)
    assert caught.value.exit_code == 2


def test_the_key_never_appears_in_the_repr() -> None:
    client = Client("http://127.0.0.1:8000", "nk_live_secret")
    assert "nk_live_secret" not in repr(client)


def test_retry_delays_double_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=6, backoff=0.5, max_backoff=3.0)
    assert [policy.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="at least 1"):
        RetryPolicy(attempts=0)


def test_error_tree() -> None:
    assert issubclass(AuthError, ApiError)
    for error in (ConfigError, ApiError, Unreachable):
        assert issubclass(error, NeensClientError)
    assert ConfigError("x").exit_code == 2
    assert Unreachable("x").exit_code == 3
    assert ApiError(404, "not_found", "x").exit_code == 2
    assert ApiError(503, "x", "x").exit_code == 3


def test_error_body_of_another_shape_falls_back_to_the_status_line() -> None:
    error = ApiError.from_body(403, "Forbidden", b'{"detail": "nope"}')
    assert isinstance(error, AuthError)
    assert (error.code, error.message, error.field) == ("http_403", "Forbidden", None)


def test_a_server_that_comes_back_within_the_retry_window_is_reached(closed_port: int) -> None:
    """A restart: nothing listens for a while, then the server answers on the same port."""
    fake = Scripted()
    fake.reply("GET", "/x", Reply(200, {"back": True}))
    client = Client(
        f"http://127.0.0.1:{closed_port}",
        "k",
        retry=RetryPolicy(window_s=20.0, backoff=0.05, max_backoff=0.2),
    )
    notices: list[RetryNotice] = []
    client.on_retry = notices.append

    def restart() -> None:
        time.sleep(1.0)
        with serve(fake, port=closed_port):
            time.sleep(5.0)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    answer = client.get("/x")
    thread.join()

    assert answer == {"back": True}
    assert len(notices) >= 3
    assert {n.problem for n in notices} == {"connection refused"}
    assert all(n.window_s == 20.0 and n.waited_s < 20.0 for n in notices)


def test_retries_stop_at_the_end_of_the_window(closed_port: int) -> None:
    client = Client(
        f"http://127.0.0.1:{closed_port}",
        "k",
        retry=RetryPolicy(window_s=1.0, backoff=0.05, max_backoff=0.2),
    )
    started = time.monotonic()

    with pytest.raises(Unreachable) as caught:
        client.get("/x")

    assert 1.0 <= time.monotonic() - started < 3.0
    assert "(retries last 1 s, NEENS_RETRY_WINDOW changes it)" in str(caught.value)


def test_the_retry_window_is_60_s_by_default_and_read_from_neens_retry_window() -> None:
    env = {"NEENS_BASE_URL": "http://127.0.0.1:8000", "NEENS_API_KEY": "nk_live_x"}

    assert RetryPolicy().window_s == 60.0
    assert Client.from_env({**env, "NEENS_RETRY_WINDOW": "7.5"}).retry.window_s == 7.5
    assert Client.from_env({**env, "NEENS_RETRY_WINDOW": "0"}).retry.window_s == 0.0
    with pytest.raises(ConfigError, match=r"^NEENS_RETRY_WINDOW: 'soon' is not a number"):
        Client.from_env({**env, "NEENS_RETRY_WINDOW": "soon"})


@pytest.mark.parametrize(
    "key", ["wrong", "nk_test_abc", "nk_live_…", "nk_live_abc=", "nk_live_a.b"]
)
def test_a_key_not_shaped_like_a_neens_key_is_refused_without_being_shown(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Client.from_env({"NEENS_BASE_URL": "http://127.0.0.1:1", "NEENS_API_KEY": key})

    message = str(caught.value)
    assert message.startswith("NEENS_API_KEY: this is not a Neens API key: keys look like nk_live_")
    assert key not in message
    assert caught.value.exit_code == 2


def test_the_retry_message_names_the_flag_that_set_the_window(closed_port: int) -> None:
    policy = FAST.with_window(0.0, "--retry-window")
    client = Client(f"http://127.0.0.1:{closed_port}", "nk_live_x", retry=policy)

    with pytest.raises(Unreachable, match=r"\(retries last 0 s, --retry-window changes it\)"):
        client.get("/x")
    client.retry = FAST
    with pytest.raises(Unreachable, match=r"\(retries last 60 s, NEENS_RETRY_WINDOW changes it\)"):
        client.get("/x")


def _server_that_drops_the_body(answer: bytes) -> tuple[int, list[int], threading.Thread]:
    """A loopback server that reads only the headers of each request, writes `answer` (maybe
    nothing) and resets the connection, as a server refusing an oversized body does."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(5)
    connections: list[int] = []

    def serve() -> None:
        with listener:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                connections.append(1)
                with conn:
                    received = b""
                    while b"\r\n\r\n" not in received:
                        received += conn.recv(65536)
                    conn.sendall(answer)
                    # Close with unread data: the kernel resets the connection.
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], connections, thread


BIG = {"items": [{"input": "x" * 1_000_000}] * 40}  # 40 MB: more than the socket buffers hold


@pytest.mark.parametrize("method", ["post", "put"])
def test_a_body_the_server_stops_reading_is_not_sent_again(method: str) -> None:
    port, connections, _ = _server_that_drops_the_body(b"")
    client = Client(f"http://127.0.0.1:{port}", "nk_live_x", retry=FAST)

    with pytest.raises(BodyCutOff) as caught:
        getattr(client, method)("/datasets/ds_1/versions", BIG)

    assert len(connections) == 1
    message = str(caught.value)
    assert "closed the connection while receiving the body of" in message
    assert "(40.0 MB;" in message
    assert "NEENS_MAX_REQUEST_BYTES" in message
    assert caught.value.exit_code == 3


def test_an_answer_sent_before_the_body_was_read_is_reported() -> None:
    body = b'{"error": {"code": "payload_too_large", "message": "request body is over the limit"}}'
    answer = (
        b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
    )
    port, connections, _ = _server_that_drops_the_body(answer)
    client = Client(f"http://127.0.0.1:{port}", "nk_live_x", retry=FAST)

    with pytest.raises(ApiError) as caught:
        client.post("/datasets/ds_1/versions", BIG)

    assert (caught.value.status, caught.value.code) == (413, "payload_too_large")
    assert caught.value.exit_code == 2
    assert len(connections) == 1
