"""The server's listening socket, bound before anything else starts, so that a port in use
is one clear line and a usage exit instead of a traceback after startup work."""

from __future__ import annotations

import errno
import socket


class CannotListen(Exception):
    """The server cannot listen where asked; the message says what to change."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) for the server, or CannotListen saying what to change."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise CannotListen(f"--host {host!r} is not an address to bind: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CannotListen(
                f"port {port} on {host} is already in use (another server, or a demo still "
                f"running?): stop it, or pick another port with --port"
            ) from None
        raise CannotListen(
            f"cannot serve on {host} port {port}: {exc.strerror}; pick another --port or --host"
        ) from None
    return sock
