"""Where Neens may send requests: agent connections, LLM judges and notification sinks.

The policy, by address (IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry):

- **always refused**: link-local addresses (169.254.0.0/16, fe80::/10), cloud metadata
  services (169.254.169.254, fd00:ec2::254, 100.100.100.200, `metadata.google.internal`…),
  unspecified, multicast and reserved addresses. A request there can read cloud credentials.
- **loopback and private** (127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16, fc00::/7,
  100.64/10, `localhost`): allowed while `NEENS_ALLOW_PRIVATE_DESTINATIONS` is on (the default,
  so an agent on the same machine works); a shared server turns it off.
- everything else (public addresses): allowed.

A URL is checked twice. When it is saved, an address or name written in it is checked (422
naming the field). When a call is made, the name is resolved, every address it resolves to is
checked, and a plain-HTTP request goes to the checked address itself, so a name that resolves
elsewhere a moment later (DNS rebinding) changes nothing; over HTTPS such a name would also need
a certificate for it, which the metadata and internal services it could point at do not hold.
Redirects are never followed, since a redirect is a new destination.

A destination's URL may carry credentials (`https://user:password@host/`, `?api_key=…`), and
errors and reasons that name it are read by people who may not hold them: they name it as
`shown_url` renders it, without userinfo, query or fragment.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import ipaddress
import re
import socket
from typing import Any, Literal

import httpx

from neens.errors import Unprocessable

Verdict = Literal["refused", "private", "public"]
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
"""AWS (IMDS, ECS task credentials, IPv6 IMDS), GCP and Azure (169.254.169.254), Alibaba."""
METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
    }
)
SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")


class DestinationRefused(httpx.TransportError):
    """The destination is not allowed by the policy; the request was not sent."""


def classify(ip: IpAddress) -> Verdict:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
        return "refused"
    if ip.is_loopback:  # before `is_reserved`, which ::1 also is
        return "private"
    if ip.is_reserved:
        return "refused"
    if ip.is_private or ip in SHARED_ADDRESS_SPACE:
        return "private"
    return "public"


def _host_verdict(host: str) -> tuple[Verdict, str] | None:
    """The verdict on a host as written (an address or a well-known name), or None when only
    resolving it can tell."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        if name in METADATA_NAMES:
            return "refused", f"{name} is a cloud metadata service"
        if name == "localhost" or name.endswith(".localhost"):
            return "private", f"{name} is a loopback name"
        return None
    return classify(ip), _describe(ip)


def _describe(ip: IpAddress) -> str:
    verdict = classify(ip)
    if verdict == "refused":
        return f"{ip} is a link-local, cloud metadata or reserved address"
    if verdict == "private":
        return f"{ip} is a loopback or private address"
    return f"{ip} is a public address"


def _refusal(reason: str, verdict: Verdict) -> str:
    if verdict == "refused":
        return f"{reason}; Neens never sends requests there"
    return (
        f"{reason}, and this server does not send requests to loopback or private addresses "
        "(NEENS_ALLOW_PRIVATE_DESTINATIONS is off)"
    )


def check_url(url: str, *, allow_private: bool, field: str) -> None:
    """Refuse, with 422 naming `field`, a URL whose host as written is not allowed."""
    host = httpx.URL(url).host
    found = _host_verdict(host)
    if found is None:
        return
    verdict, reason = found
    if verdict == "refused" or (verdict == "private" and not allow_private):
        raise Unprocessable(f"{field}: {_refusal(reason, verdict)}", field=field)


def check_destination(url: str, *, allow_private: bool) -> None:
    """Refuse (`DestinationRefused`, nothing sent) a URL whose host is an address the policy
    does not allow, or a name it always refuses; any other name is checked as it resolves."""
    refusal = _written_host_refusal(url, allow_private)
    if refusal is not None:
        raise DestinationRefused(refusal)


@functools.lru_cache(maxsize=1024)
def _written_host_refusal(url: str, allow_private: bool) -> str | None:
    """Why the host written in `url` is refused, or None (the policy is fixed, so a run's
    thousands of calls to one URL parse it once)."""
    host = httpx.URL(url).host
    found = _host_verdict(host)
    if found is None:
        return None
    verdict, reason = found
    if verdict == "refused" or (verdict == "private" and not allow_private and _is_ip(host)):
        return _refusal(reason, verdict)
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


async def resolve_allowed(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for `host`, after checking every address it resolves to."""
    found = _host_verdict(host)
    if found is not None and found[0] == "refused":
        raise DestinationRefused(_refusal(found[1], "refused"))
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as exc:  # gaierror, or a name IDNA cannot encode
        raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for ip in addresses:
        verdict = classify(ip)
        if verdict == "refused" or (verdict == "private" and not allow_private):
            raise DestinationRefused(_refusal(f"{host} resolves to {_describe(ip)}", verdict))
    return str(addresses[0])


async def reroute(
    url: Any, extensions: dict[str, Any], *, allow_private: bool
) -> tuple[Any, dict[str, Any]]:
    """Check the request's destination; an `http` request is pointed at the checked address
    itself. Works on `httpx` and `httpx2` URLs alike.

    An `https` request keeps its host name (connections are pooled by address, and one TLS
    session must not carry requests for several names); there, a name re-pointed after the
    check reaches a server that cannot present a certificate for it, and the call fails."""
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await resolve_allowed(url.host, port, allow_private=allow_private)
    if url.scheme == "https" or address == url.host:
        return url, extensions
    return url.copy_with(host=address), extensions


@functools.cache
def tls_context(package: str = "httpx") -> Any:
    """The TLS settings of outbound calls (the CA bundle, and `SSL_CERT_FILE` or `SSL_CERT_DIR`
    when set), built once per process by `package` (httpx, or the httpx-like package the `openai`
    client uses). A transport left to build its own loads the CA bundle again: 20 to 50 ms of CPU
    each time, paid per judge call, and per start of a worker."""
    return importlib.import_module(package).create_ssl_context()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends each request only to an address the policy allows."""

    def __init__(self, *, allow_private: bool, **transport_options: Any) -> None:
        self.allow_private = allow_private
        transport_options.setdefault("verify", tls_context())
        self._inner = httpx.AsyncHTTPTransport(**transport_options)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url, request.extensions = await reroute(
            request.url, request.extensions, allow_private=self.allow_private
        )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedAnyTransport:
    """The same guard around a transport of another httpx-like package (the `openai` client
    may use `httpx2`), which has the same transport interface."""

    def __init__(self, inner: Any, *, allow_private: bool) -> None:
        self.allow_private = allow_private
        self._inner = inner

    async def handle_async_request(self, request: Any) -> Any:
        request.url, request.extensions = await reroute(
            request.url, request.extensions, allow_private=self.allow_private
        )
        return await self._inner.handle_async_request(request)

    async def __aenter__(self) -> GuardedAnyTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(*, allow_private: bool, **client_options: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` that obeys the destination policy and never follows redirects."""
    limits = client_options.pop("limits", None)
    transport_options = {} if limits is None else {"limits": limits}
    return httpx.AsyncClient(
        transport=GuardedTransport(allow_private=allow_private, **transport_options),
        follow_redirects=False,
        **client_options,
    )


def shown_url(url: str) -> str:
    """`url` as an error, a log line or a reader without the right to edit it may see it:
    `scheme://host[:port]/path`, without userinfo, query string or fragment, where
    credentials are usually put. Never raises, whatever the text."""
    head = re.split(r"[?#]", url, maxsplit=1)[0]
    scheme, sep, rest = head.partition("://")
    if not sep:
        return head.rpartition("@")[2]
    authority, slash, path = rest.partition("/")
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{path}"


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def without_url_secrets(text: str) -> str:
    """`text` with every URL in it rendered by `shown_url`: for an HTTP client's error message,
    which may quote the URL it was given (aiohttp does)."""
    return _URL_IN_TEXT.sub(lambda found: shown_url(found.group()), text)


MAX_EXCERPT_CHARS = 500


def excerpt(text: str | bytes, limit: int = MAX_EXCERPT_CHARS) -> str:
    """Text copied from a reply into an error a person reads: at most `limit` characters,
    control characters replaced by spaces, and marked when cut. A reply is the remote side's
    to choose; an error must not become a channel for pages of it, or for terminal escapes."""
    if isinstance(text, bytes):
        text = text[: limit * 4].decode("utf-8", errors="replace")
    cut = len(text) > limit
    kept = "".join(
        " " if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) else c for c in text[:limit]
    ).strip()
    return f"{kept}… (truncated)" if cut else kept
