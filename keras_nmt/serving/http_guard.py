"""What the server checks before a handler reads a request, and the limits on what
clients can hold: the ``Host`` of a server on loopback, the ``Origin`` of a browser's
request, the ``Content-Type`` of a body, the body read within a time limit and a memory
budget shared by all requests, and the number of open connections.

Why each: a web page a user visits may post to a server on the user's own machine
(``text/plain`` needs no CORS preflight), or reach it under the page's own name by DNS
rebinding; a server on loopback answers only to its own names, and a POST only from its
own origin, as JSON. A server that listens beyond loopback answers only to the names
``--allowed-hosts`` gives it. A slow client holds a connection and a buffer for as long as the
server lets it: each request must arrive within a time limit, the bodies being read
share one budget of bytes, and connections beyond a cap are closed at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import urllib.parse

from aiohttp import web

from keras_nmt.core.errors import RequestError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# A request whose body was refused part-read.
REFUSED_BODY = web.RequestKey("keras_nmt.refused_body", bool)
JSON_TYPE = "application/json"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to listen on) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


ANY_HOST = "*"


def check_allowed_hosts(host: str, allowed: tuple[str, ...]) -> None:
    """ValueError (one line) for a server that listens beyond loopback on ``host`` with no
    ``allowed`` names: any web page could then reach it under its own name."""
    if not allowed and not is_loopback(host):
        raise ValueError(f"--host {host} listens beyond this machine: name the hosts its "
                         "clients use with --allowed-hosts NAME[,NAME...] (or '*' for any "
                         "Host, behind a proxy that checks it)")
    if ANY_HOST in allowed and len(allowed) > 1:
        raise ValueError("--allowed-hosts '*' allows every host: give it alone")


def host_name(header: str) -> str:
    """The name of a ``Host`` header, its port left out, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class RequestGuard:
    """The checks of one server: built once it listens (its port is known then).

    ``Host`` (DNS rebinding): the loopback names with the server's port, and the names of
    ``allowed_hosts`` with any port; any at all for ``*``."""

    def __init__(self, host: str, port: int, allowed_hosts: tuple[str, ...] = ()):
        self.port = port
        self.allowed = tuple(name.lower() for name in allowed_hosts)
        names = {*LOOPBACK_NAMES, _bracketed(host)}
        # A browser leaves the port out of Host when it is the scheme's default.
        self.hosts = {f"{name}:{port}" for name in names} | (names if port == 80 else set())

    def check_host(self, request: web.Request) -> None:
        """421 for a request that reached the server under a name it does not answer to."""
        host = request.headers.get("Host", "")
        if ANY_HOST in self.allowed or host.lower() in self.hosts:
            return
        if host_name(host) not in self.allowed:
            named = f"{', '.join(self.allowed)} (--allowed-hosts), " if self.allowed else ""
            raise RequestError(421, f"this server answers only to {named}localhost, 127.0.0.1 "
                                    f"or [::1] on port {self.port}, not to Host {host[:100]!r}")

    def check_post(self, request: web.Request) -> None:
        """403 for a POST from a web page of another origin; 415 for a body that is not
        declared JSON, or is compressed."""
        origin = request.headers.get("Origin")
        if origin is not None:
            parts = urllib.parse.urlsplit(origin)
            host = request.headers.get("Host", "")
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                raise RequestError(403, f"cross-origin request from {origin[:100]!r} refused: "
                                        "this server answers its own page only")
        if request.content_type != JSON_TYPE:
            got = request.headers.get("Content-Type", "none")
            raise RequestError(415, f"the request body must be JSON sent with Content-Type: "
                                    f"{JSON_TYPE} (got {got[:100]!r})")
        charset = request.charset
        if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
            raise RequestError(415, "the request body must be UTF-8 (got charset "
                                    f"{charset[:40]!r})")
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise RequestError(415, "compressed request bodies are not accepted "
                                    f"(Content-Encoding: {encoding[:40]!r})")

    def refuses_body(self, request: web.Request, max_bytes: int) -> bool:
        """Whether the request is refused before any of its body is read: its Host,
        Origin or Content-Type, or a declared size over ``max_bytes``."""
        try:
            self.check_host(request)
            self.check_post(request)
        except RequestError:
            return True
        return declared_over(request, max_bytes)


class BodyBudget:
    """Bytes of request bodies held at once, all requests together: a request whose
    body would take it past ``limit`` gets 503. A client that trickles its body holds
    only the bytes it has sent."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    async def read(self, request: web.Request, max_bytes: int, timeout: float) -> bytes:
        """The body of ``request``: 413 beyond ``max_bytes``, 408 when it has not all
        arrived within ``timeout`` seconds, 503 when the budget is spent. The bytes stay
        counted until the caller calls :meth:`release` with the body's length."""
        if declared_over(request, max_bytes):
            raise too_large(max_bytes)
        chunks, size = [], 0
        request[REFUSED_BODY] = True  # until it has all been read: close after the answer
        try:
            async with asyncio.timeout(timeout):
                while True:
                    chunk = await request.content.readany()
                    if not chunk:
                        break
                    size += len(chunk)
                    self.held += len(chunk)
                    if size > max_bytes:
                        raise too_large(max_bytes)
                    if self.held > self.limit:
                        raise RequestError(503, "the server holds too many request bodies "
                                                "now: try again later")
                    chunks.append(chunk)
        except TimeoutError:
            self.release(size)
            raise RequestError(408, f"the request body did not arrive within {timeout:g} s "
                                    "(--read-timeout)") from None
        except BaseException:
            self.release(size)
            raise
        request[REFUSED_BODY] = False
        return b"".join(chunks)

    def release(self, size: int) -> None:
        self.held -= size


def must_close(request: web.Request) -> bool:
    """Whether the connection must close after the answer: the request's body was
    refused before it had all been read (the rest is not a next request)."""
    return request.get(REFUSED_BODY, False) or not request.content.is_eof()


def declared_over(request: web.Request, max_bytes: int) -> bool:
    """Whether the request declares a body longer than ``max_bytes`` (Content-Length)."""
    return request.content_length is not None and request.content_length > max_bytes


def too_large(max_bytes: int) -> RequestError:
    return RequestError(413, f"the request body is larger than {max_bytes} bytes "
                             "(--max-body-bytes)")


class _Refusal(asyncio.Protocol):
    """A connection over the cap: a 503 answer, then closed, without reading."""

    def __init__(self, reason: str):
        body = json.dumps({"error": reason}).encode("utf-8")
        self.answer = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                       b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    def connection_made(self, transport) -> None:
        transport.write(self.answer)
        transport.close()


class LimitedSite(web.BaseSite):
    """A TCP site (as aiohttp's ``TCPSite``) that holds at most ``max_connections``
    connections open: one more is answered 503 and closed at once."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int,
                 backlog: int = 128):
        super().__init__(runner, backlog=backlog)
        self._host, self._port = host, port
        self.max_connections = max_connections
        self.refused = 0  # connections closed at once, over the cap

    @property
    def name(self) -> str:
        return f"http://{_bracketed(self._host)}:{self._port}"

    def open_connections(self) -> int:
        server = self._runner.server
        return 0 if server is None else len(server.connections)

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        reason = (f"too many open connections (--max-connections {self.max_connections}): "
                  "try again later")

        def protocol():
            if len(server.connections) >= self.max_connections:
                self.refused += 1
                return _Refusal(reason)
            return server()

        self._server = await asyncio.get_running_loop().create_server(
            protocol, self._host, self._port, backlog=self._backlog, reuse_address=True)
