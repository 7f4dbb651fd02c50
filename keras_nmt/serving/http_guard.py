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
import time
import urllib.parse
import weakref

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


class Requests:
    """Which open connections hold a request: from its whole head (seen by
    :class:`_Counted`) through the handlers (the middleware) to ``grace`` seconds after
    its answer, while that is written. Any other connection waits for a request head (a
    new one, a slow one, one kept alive after its answer), and may be closed for a
    newcomer."""

    def __init__(self, grace: float = 1.0):
        self.grace = grace
        self.busy: dict[object, int] = {}  # transport -> requests in a handler
        self.answered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # -> time

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        transport = request.transport
        self.busy[transport] = self.busy.get(transport, 0) + 1
        try:
            return await handler(request)
        finally:
            left = self.busy.pop(transport) - 1
            if left:
                self.busy[transport] = left
            self.answered[transport] = time.monotonic()

    def answered_since(self, transport, when: float) -> bool:
        """Whether a request of ``transport`` was answered at or after ``when``."""
        return self.answered.get(transport, -1.0) >= when

    def holds_request(self, transport, head_at: float | None) -> bool:
        """Whether the connection of ``transport``, whose last whole head came at
        ``head_at`` (None: none yet), holds a request now."""
        if transport in self.busy:
            return True
        answered = self.answered.get(transport)
        if answered is not None and answered > time.monotonic() - self.grace:
            return True
        return head_at is not None and (answered is None or answered < head_at)


class _Refusal(asyncio.Protocol):
    """A connection over the cap: a 503 answer, then closed, without reading."""

    def __init__(self, reason: str):
        body = json.dumps({"error": reason}).encode("utf-8")
        self.answer = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                       b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    def connection_made(self, transport) -> None:
        transport.write(self.answer)
        transport.close()


class _Counted(asyncio.Protocol):
    """aiohttp's handler of one connection as the event loop sees it: every call is passed
    on, and the site counts the connection from its accept to its loss (aiohttp's own list
    holds it only from ``connection_made``, so a burst of accepts outran the cap)."""

    def __init__(self, handler, site: "LimitedSite"):
        self.handler, self.site = handler, site
        self.accepted = time.monotonic()
        self.made = False
        self.transport = None
        self.head_at: float | None = None  # when its last whole request head arrived
        self._tail = b""  # the last bytes of a head still arriving
        site.open[self] = None

    def connection_made(self, transport) -> None:
        self.made, self.transport = True, transport
        self.handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.head_at is None or self.site.requests.answered_since(self.transport, self.head_at):
            seen = self._tail + data  # a head arriving: only its bytes are scanned
            if b"\r\n\r\n" in seen:
                self.head_at, self._tail = time.monotonic(), b""
            else:
                self._tail = seen[-3:]
        self.handler.data_received(data)

    def eof_received(self):
        return self.handler.eof_received()

    def connection_lost(self, exc) -> None:
        self.site.open.pop(self, None)
        if self.made:
            self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def may_close(self, now: float) -> bool:
        """Whether it may be closed for a newcomer: it holds no request, and had
        :attr:`LimitedSite.HEAD_SECONDS` to send one."""
        return (self.made and now - self.accepted >= self.site.HEAD_SECONDS
                and not self.site.requests.holds_request(self.transport, self.head_at))


class LimitedSite(web.BaseSite):
    """A TCP site (as aiohttp's ``TCPSite``) that holds at most ``max_connections``
    connections open. At the cap, a newcomer takes the place of the oldest connection
    that holds no request (``requests``: idle, or still sending its head) and has had
    :attr:`HEAD_SECONDS` to send one, which is closed; when there is none, the newcomer is
    answered 503 and closed at once. So connections that never send a request cannot
    lock clients out, and a client always has that long to send its head. Cost: a scan of
    the open connections for each newcomer at the cap."""

    HEAD_SECONDS = 0.5  # at the cap, a connection's time to send its head (read_timeout else)
    # An accept whose transport never came up leaves no connection_lost: forgotten then.
    UNMADE_SECONDS = 10.0

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int,
                 requests: Requests | None = None, backlog: int = 128):
        super().__init__(runner, backlog=backlog)
        self._host, self._port = host, port
        self.max_connections = max_connections
        self.requests = requests or Requests()
        self.refused = 0  # connections closed at once, over the cap
        self.dropped = 0  # connections without a request closed for a newcomer
        self.open: dict[_Counted, None] = {}  # oldest first

    @property
    def name(self) -> str:
        return f"http://{_bracketed(self._host)}:{self._port}"

    def open_connections(self) -> int:
        return len(self.open)

    def _make_room(self) -> bool:
        """At the cap: close the oldest connection without a request; False if none."""
        now = time.monotonic()
        forgotten = now - self.UNMADE_SECONDS
        for counted in [c for c in self.open if not c.made and c.accepted < forgotten]:
            del self.open[counted]
        if len(self.open) < self.max_connections:
            return True
        gone = next((c for c in self.open if c.may_close(now)), None)
        if gone is None:
            return False
        del self.open[gone]  # its connection_lost comes later
        gone.handler.force_close()
        self.dropped += 1
        return True

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        reason = (f"too many open connections (--max-connections {self.max_connections}): "
                  "try again later")

        def protocol():
            if len(self.open) >= self.max_connections and not self._make_room():
                self.refused += 1
                return _Refusal(reason)
            return _Counted(server(), self)

        self._server = await asyncio.get_running_loop().create_server(
            protocol, self._host, self._port, backlog=self._backlog, reuse_address=True)
