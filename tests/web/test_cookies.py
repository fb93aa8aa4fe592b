"""The session cookie alone: signed, expiring, rotating with the secret keys."""

from __future__ import annotations

import pytest

from neens.secrets import box_from_keys, generate_key
from neens.web import cookies
from neens.web.cookies import PageSession
from neens.web.guard import HOME, safe_next

NOW = 1_800_000_000.0


def test_a_cookie_reads_back_what_was_signed() -> None:
    key = b"k" * 32
    session = cookies.new_session("key_1", NOW)
    assert cookies.decode(cookies.encode(session, key), [key], NOW + 60) == session


def test_a_cookie_is_refused_when_altered_expired_from_the_future_or_signed_elsewhere() -> None:
    key, other = b"k" * 32, b"o" * 32
    value = cookies.encode(PageSession("key_1", "token", int(NOW)), key)
    payload, signature = value.split(".")
    assert cookies.decode(value, [other], NOW) is None
    assert cookies.decode(payload + "." + signature[:-1] + "A", [key], NOW) is None
    assert cookies.decode(payload[:-1] + "." + signature, [key], NOW) is None
    assert cookies.decode(value, [key], NOW + cookies.LIFETIME_S) is None
    assert cookies.decode(value, [key], NOW - cookies.CLOCK_SKEW_S - 1) is None
    assert cookies.decode(value, [key], NOW + cookies.LIFETIME_S - 1) is not None
    for junk in (None, "", ".", "a.b", "é.é", "x" * 2000):
        assert cookies.decode(junk, [key], NOW) is None


def test_a_well_signed_cookie_of_the_wrong_shape_is_refused() -> None:
    key = b"k" * 32
    for body in ('["k"]', '{"k": 1, "c": "t", "t": 1}', '{"k": null, "c": "", "t": 1}'):
        payload = cookies._b64(body.encode())
        assert cookies.decode(f"{payload}.{cookies._sign(key, payload)}", [key], 1.0) is None
    ok = cookies._b64(b'{"k": null, "c": "t", "t": 1}')
    assert cookies.decode(f"{ok}.{cookies._sign(key, ok)}", [key], 1.0) == PageSession(None, "t", 1)


def test_signing_keys_follow_the_secret_keys_and_their_rotation() -> None:
    old, new = generate_key(), generate_key()
    before = box_from_keys([old]).derived_keys(cookies.PURPOSE)
    rotated = box_from_keys([new, old]).derived_keys(cookies.PURPOSE)
    assert rotated[1] == before[0] and rotated[0] != before[0]
    value = cookies.encode(cookies.new_session("key_1", NOW), before[0])
    assert cookies.decode(value, rotated, NOW) is not None
    assert cookies.decode(value, box_from_keys([new]).derived_keys(cookies.PURPOSE), NOW) is None
    assert box_from_keys([old]).derived_keys("another purpose") != before


@pytest.mark.parametrize(
    ("target", "goes_to"),
    [
        ("/ui/datasets", "/ui/datasets"),
        ("/ui/preprod-evals/ppr_1?cursor=abc", "/ui/preprod-evals/ppr_1?cursor=abc"),
        (None, HOME),
        ("", HOME),
        ("/ui", HOME),
        ("/ui/sign-in", HOME),
        ("https://evil.example/ui/x", HOME),
        ("//evil.example/ui/x", HOME),
        ("///evil.example/ui/x", HOME),
        ("/\\evil.example/ui/x", HOME),
        ("/ui/\\\\evil", HOME),
        ("/ui/x\r\nSet-Cookie: a=b", HOME),
        ("javascript:alert(1)", HOME),
        ("/datasets", HOME),
    ],
)
def test_next_is_a_path_of_the_pages_or_home(target: str | None, goes_to: str) -> None:
    assert safe_next(target) == goes_to


ESCAPES = [
    "/ui/..//evil.example",
    "/ui/../evil",
    "/ui/x/../../evil",
    "/ui/./../..//evil.example",
    "/ui/%2e%2e/%2e%2e//evil.example",
    "/ui/%2E%2E//evil.example",
    "/ui/.%2e//evil.example",
    "/ui/%252e%252e//evil.example",
    "/ui/%25252e%25252e//evil.example",
    "/ui/..%2f%2fevil.example",
    "/ui/..%2F..%2Fevil",
    "/ui/a%2fb/../../evil",
    "/ui/..%5c..%5cevil.example",
    "/ui/%5C%5Cevil.example",
    "/ui/..\\evil.example",
    "/ui/%00",
    "/ui/x%0d%0aSet-Cookie:%20a=b",
    "/ui/\x85evil",
    "/ui/datasets/../sign-in",
    "/ui/%73ign-in/../..//evil.example",
]
"""`next` values that leave `/ui/` once a browser (or a server that decodes `%2f`) resolves
their dot segments, or that hide a backslash or control character behind percent-encoding."""


@pytest.mark.parametrize("target", ESCAPES)
def test_next_never_leaves_the_pages_through_dot_segments_or_encoding(target: str) -> None:
    assert safe_next(target) == HOME


@pytest.mark.parametrize(
    "target",
    [
        "/ui/sweeps/msw-01JB2X?x=1",
        "/ui/sweeps/msw-01JB2X/compare?bar=0.9&baselineArm=msa-1",
        "/ui/datasets/../sweeps",
        "/ui/preprod-evals/ppr_1?cursor=a%2Fb%2e",
        "/ui/",
    ],
)
def test_an_ordinary_page_path_is_followed_as_it_is(target: str) -> None:
    assert safe_next(target) == target
