"""``keras-nmt serve`` under attack: normal clients' latency with and without an attack
mix, the server's memory, and a fuzz of bad requests.

One server (``keras-nmt serve`` in a child process on a free loopback port, 127.0.0.1;
no other address is ever sent to) over one export, for --duration seconds in two
halves:

- without the attack: --clients normal clients as ``bench.serving_load``'s load phase
  (TF Serving predict requests of --per-request sentences on keep-alive connections, the
  next as soon as the last is answered);
- with the attack: the same normal clients, and at once, from a process of their own
  (as attackers are: their event loop never delays the measured clients' and /health's)
  - alignment bombs: ``POST /translate`` of one line of --bomb-sentences sentences with
    ``"alignment": true`` (refused: too many sentences once split);
  - sentence bombs: one line of short sentences as large as the body limit allows;
  - long-sentence bombs: one line of ``. `` as large as the body limit allows, one
    sentence that splitting and tokenizing read whole (refused: too many characters);
  - --slow connections that trickle a body a byte every half second (timed out: 408);
  - cross-site bodies: ``text/plain``, and JSON from another ``Origin`` (415, 403);
  - clients that send a large request and close the connection 50 ms later (its
    queued work is dropped: the server's ``/stats`` count it);
  - --constrained-flood clients each sending one line of 40 sentences with a phrase to
    avoid (its sentences count against the queue: admitted within it, else 503), and
    glossary bombs: one line holding every term of a 64-term glossary (the 16 that fit
    are searched, the rest reported unmet);
  - --idle connections that never send a byte, each opened again as soon as the server
    closes it (the server gives the place of the oldest to a newcomer: ``/stats``
    counts them as dropped).

Throughout, ``/health`` is asked every 50 ms. Reported: the normal clients' latency (p50,
p99, max) and sentences/s in each half, /health's latency in each, the server's peak RSS
(its VmHWM), the 5xx answers other than 503 and 504 (none expected), and for each kind of
attack how many requests got a 4xx, 503 or 504 within its deadline, how many did not
(and for those with no answer, why: a timeout, or the error that closed the connection),
and how slowly.

Then --fuzz bad requests (``bench.serving_load.bad_requests``: random bodies, keys,
types, sizes, with random headers: content types, origins, hosts, encodings): the count of
each status, 5xx other than 503, connection failures, whether the server is still alive,
and whether a correct translation comes back afterwards.

Usage::

    python -m bench.serving_attack EXPORT_DIR [--duration 120] [--clients 32] \\
        [--slow 200] [--fuzz 5000] [--json out.json]

Every loop is bounded in time (the phase's end, a deadline per request) and in count.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import multiprocessing
import random
import resource
import sys
import time
import urllib.parse

from bench import _common
from bench.serving_load import (
    JSON_HEADERS, Server, _clients, _percentiles, bad_requests, predict_bodies,
)

PROG = "serving_attack"
HOST = "127.0.0.1"
MAX_REQUESTS = 100_000  # per client and phase: every loop is bounded in count too
HEALTH_EVERY = 0.05
EVIL_ORIGIN = "http://attacker.example"


def _head(port: int, path: str, length: int, content_type: str = "application/json",
          origin: str | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {HOST}:{port}", f"Content-Type: {content_type}",
             f"Content-Length: {length}"]
    if origin:
        lines.append(f"Origin: {origin}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


async def _status(reader: asyncio.StreamReader) -> int:
    """The status of the answer on ``reader``, its body read and dropped."""
    header = await reader.readuntil(b"\r\n\r\n")
    lines = header.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            await reader.readexactly(int(value))
    return status


async def _exchange(port: int, data: bytes, deadline: float,
                    trickle: bytes = b"", every: float = 0.5) -> int | str:
    """Send ``data`` on a new connection (then ``trickle``, a byte every ``every``
    seconds) and read the answer's status within ``deadline`` seconds; without an
    answer, why: "timeout", or the name of the error that closed the exchange."""
    writer = answer = None
    try:
        async with asyncio.timeout(deadline):
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(data)
            answer = asyncio.ensure_future(_status(reader))
            for byte in trickle:
                done, _ = await asyncio.wait({answer}, timeout=every)
                if done:
                    break
                writer.write(bytes([byte]))
            return await answer
    except TimeoutError:
        return "timeout"
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
            IndexError) as error:
        return type(error).__name__
    finally:
        if answer is not None and not answer.done():
            answer.cancel()
        if writer is not None:
            writer.close()


class Attack:
    """One kind of attack: its requests' statuses, times, and those late or unanswered.
    ``served``: a 200 within the deadline is a right answer too (work within the limits,
    which the server may do or refuse with 503)."""

    def __init__(self, name: str, deadline: float, served: bool = False):
        self.name, self.deadline, self.served = name, deadline, served
        self.statuses: dict[int, int] = {}
        self.seconds: list[float] = []
        self.failed = 0  # no 4xx, 503 or 504 within the deadline
        self.unanswered: dict[str, int] = {}  # why, for those with no answer
        self.sent = 0

    async def loop(self, stop_at: float, make, trickle: bytes = b"", port: int = 0) -> None:
        for _ in range(MAX_REQUESTS):
            if time.perf_counter() >= stop_at:
                return
            start = time.perf_counter()
            status = await _exchange(port, make(), self.deadline, trickle)
            elapsed = time.perf_counter() - start
            self.sent += 1
            self.seconds.append(elapsed)
            if isinstance(status, str):
                self.unanswered[status] = self.unanswered.get(status, 0) + 1
                self.failed += 1
                continue
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if not (400 <= status < 500 or status in (503, 504)
                    or self.served and status == 200):
                self.failed += 1

    def report(self) -> dict:
        return {"requests": self.sent, "deadline_s": self.deadline,
                "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
                "not_refused_in_time": self.failed, "unanswered": self.unanswered,
                **_percentiles(self.seconds)}


async def _disconnecting(port: int, body: bytes, stop_at: float, count: list) -> None:
    """Send a whole request, close the connection 50 ms later, again until ``stop_at``."""
    for _ in range(MAX_REQUESTS):
        if time.perf_counter() >= stop_at:
            return
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)
        except (OSError, TimeoutError):
            await asyncio.sleep(0.05)
            continue
        writer.write(_head(port, "/translate", len(body)) + body)
        await asyncio.sleep(0.05)
        writer.close()
        count[0] += 1
        await asyncio.sleep(0.05)


async def _idle(port: int, stop_at: float, counts: dict) -> None:
    """Hold a connection that sends nothing until ``stop_at``; open another each time the
    server closes it."""
    for _ in range(MAX_REQUESTS):
        left = stop_at - time.perf_counter()
        if left <= 0:
            return
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)
        except (OSError, TimeoutError):
            counts["failed_to_open"] += 1
            await asyncio.sleep(0.05)
            continue
        counts["opened"] += 1
        try:
            got = await asyncio.wait_for(reader.read(1), max(0.0, stop_at - time.perf_counter()))
            counts["closed_by_server" if not got else "answered"] += 1
        except TimeoutError:
            pass
        except OSError:
            counts["closed_by_server"] += 1
        writer.close()


def _allow_files(count: int) -> None:
    """Raise this process's open-file limit to hold ``count`` sockets more, as far as the
    hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 1024
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (
            wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


async def _health(port: int, stop_at: float, latencies: list, statuses: dict) -> None:
    """GET /health every 50 ms on one keep-alive connection until ``stop_at``."""
    head = f"GET /health HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode("ascii")
    connection = None
    for _ in range(MAX_REQUESTS):
        if time.perf_counter() >= stop_at:
            break
        start = time.perf_counter()
        try:
            async with asyncio.timeout(30):
                if connection is None:
                    connection = await asyncio.open_connection(HOST, port)
                connection[1].write(head)
                status = await _status(connection[0])
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError, IndexError):
            status = None
            if connection is not None:
                connection[1].close()
            connection = None
        latencies.append(time.perf_counter() - start)
        statuses[status] = statuses.get(status, 0) + 1
        await asyncio.sleep(HEALTH_EVERY)
    if connection is not None:
        connection[1].close()


def _server_memory(pid: int) -> dict:
    """The server's resident set now and at its peak (MiB; Linux's /proc)."""
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return {"rss_mib": found.get("VmRSS"), "peak_rss_mib": found.get("VmHWM")}


def _stats(port: int) -> dict:
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.request("GET", "/stats")
        return json.loads(connection.getresponse().read())
    except (OSError, ValueError, http.client.HTTPException):
        return {}
    finally:
        connection.close()


def _attacks(args) -> dict[str, Attack]:
    return {
        "alignment_bomb": Attack("alignment_bomb", args.bomb_deadline),
        "sentence_bomb": Attack("sentence_bomb", args.bomb_deadline),
        "long_sentence_bomb": Attack("long_sentence_bomb", args.bomb_deadline),
        "slow_body": Attack("slow_body", args.read_timeout + args.slow_margin),
        "text_plain": Attack("text_plain", args.refusal_deadline),
        "cross_origin": Attack("cross_origin", args.refusal_deadline),
        "constrained_flood": Attack("constrained_flood", args.request_timeout + 5, served=True),
        "glossary_bomb": Attack("glossary_bomb", args.request_timeout + 5, served=True),
    }


async def _attack_mix(port: int, sentences: list[str], stop_at: float, args,
                      attacks: dict[str, Attack], left: list, idle: dict) -> None:
    """Every kind of attack at once until ``stop_at`` (a ``time.perf_counter`` time)."""
    bomb_line = " ".join(["Tom is here."] * args.bomb_sentences)
    alignment_bomb = json.dumps({"text": [bomb_line], "alignment": True}).encode()
    sentence_bomb, long_sentence_bomb = (_filled(args.max_body_bytes, piece)
                                         for piece in ("Tom is here. ", ". "))
    plain = json.dumps({"text": sentences[:2]}).encode()
    leaving = json.dumps({"text": sentences[: min(len(sentences), 64)],
                          "alignment": True}).encode()
    slow_body = json.dumps({"text": sentences[:1]}).encode()
    slow_head = _head(port, "/translate", len(slow_body) + 1000)
    tasks = [asyncio.ensure_future(attacks["alignment_bomb"].loop(
        stop_at, lambda: _head(port, "/translate", len(alignment_bomb)) + alignment_bomb,
        port=port)) for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(attacks["sentence_bomb"].loop(
        stop_at, lambda: _head(port, "/translate", len(sentence_bomb)) + sentence_bomb,
        port=port)) for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(attacks["long_sentence_bomb"].loop(
        stop_at, lambda: _head(port, "/translate", len(long_sentence_bomb))
        + long_sentence_bomb, port=port)) for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(attacks["slow_body"].loop(
        stop_at, lambda: slow_head + slow_body, trickle=b" " * 1000, port=port))
        for _ in range(args.slow)]
    tasks += [asyncio.ensure_future(attacks["text_plain"].loop(
        stop_at, lambda: _head(port, "/translate", len(plain), "text/plain") + plain,
        port=port)) for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(attacks["cross_origin"].loop(
        stop_at, lambda: _head(port, "/translate", len(plain), origin=EVIL_ORIGIN)
        + plain, port=port)) for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(_disconnecting(port, leaving, stop_at, left))
              for _ in range(args.bombers)]
    # One line of 40 sentences with a phrase to avoid: 40 rows of the constrained search.
    flood = json.dumps({"text": [" ".join(["Tom is here."] * 40)],
                        "avoid": [["zzz"]]}).encode()
    tasks += [asyncio.ensure_future(attacks["constrained_flood"].loop(
        stop_at, lambda: _head(port, "/translate", len(flood)) + flood, port=port))
        for _ in range(args.constrained_flood)]
    # One line that holds every term of the largest glossary a request may carry.
    glossary = json.dumps({"text": ["Tom " * 64 + "is here."],
                           "glossary": [["Tom", f"Tom{i}"] for i in range(64)]}).encode()
    tasks += [asyncio.ensure_future(attacks["glossary_bomb"].loop(
        stop_at, lambda: _head(port, "/translate", len(glossary)) + glossary, port=port))
        for _ in range(args.bombers)]
    tasks += [asyncio.ensure_future(_idle(port, stop_at, idle)) for _ in range(args.idle)]
    # The loops end with the phase; a request under way ends by its deadline.
    await asyncio.gather(*tasks)


def _filled(max_body_bytes: int, piece: str) -> bytes:
    """A /translate body of one line of ``piece`` repeated, as large as the body limit
    allows."""
    body = json.dumps({"text": [piece * (max_body_bytes // len(piece))]}).encode()
    body = body[:max_body_bytes]
    if not body.endswith(b'"]}'):  # cut to the limit: close the JSON again
        body = body[: max_body_bytes - 4].rsplit(b" ", 1)[0] + b'"]}'
    return body


def _attacker(port: int, sentences: list[str], args, seconds: float, channel) -> None:
    """The attack mix in a process of its own: says it is ready, takes the wall-clock
    time to start at, attacks for ``seconds``, and sends back each attack's counts."""
    attacks, left = _attacks(args), [0]
    idle = dict.fromkeys(("opened", "closed_by_server", "answered", "failed_to_open"), 0)
    _allow_files(args.idle + args.slow + args.constrained_flood + 10 * args.bombers)
    channel.send("ready")
    start_at = channel.recv()
    time.sleep(max(0.0, start_at - time.time()))
    stop_at = time.perf_counter() + seconds
    asyncio.run(_attack_mix(port, sentences, stop_at, args, attacks, left, idle))
    channel.send(({name: kind.report() for name, kind in attacks.items()}, left[0], idle))


def phase(server: Server, name: str, sentences: list[str], seconds: float, args,
          attack: bool) -> dict:
    """The normal clients and /health for ``seconds``, with the attack mix or not. The
    attackers run in a process of their own, as attackers do: their event loop's work
    never delays the measured clients' (both still share the machine's cores)."""
    port = urllib.parse.urlsplit(server.url).port
    url = f"{server.url}/v1/models/{name}:predict"
    bodies = predict_bodies(sentences, args.per_request)

    def well_formed(lines, answer) -> bool:
        try:
            got = json.loads(answer)["predictions"]
        except (ValueError, KeyError, TypeError):
            return False
        return len(got) == len(lines)

    health: list[float] = []
    health_statuses: dict = {}
    attacker = channel = None
    if attack:
        context = multiprocessing.get_context("spawn")
        channel, theirs = context.Pipe()
        attacker = context.Process(target=_attacker, daemon=True,
                                   args=(port, sentences, args, seconds, theirs))
        attacker.start()
        if not channel.poll(60) or channel.recv() != "ready":
            attacker.kill()
            raise RuntimeError("the attacking process did not start")

    async def run() -> dict:
        stop_at = time.perf_counter() + seconds
        tasks = [asyncio.ensure_future(_health(port, stop_at, health, health_statuses))]
        normal = await _clients(url, bodies, args.clients, seconds, well_formed)
        await asyncio.gather(*tasks)
        return normal

    before = _stats(port)
    if attack:
        start_at = time.time() + 0.1
        channel.send(start_at)
        time.sleep(max(0.0, start_at - time.time()))
    normal = asyncio.run(run())
    attacks, left, idle = {}, 0, {}
    if attack:
        # Past the phase, a request under way ends by its deadline.
        deadline = max(args.bomb_deadline, args.read_timeout + args.slow_margin) + 30
        if not channel.poll(deadline):
            attacker.kill()
            raise RuntimeError("the attacking process did not finish")
        attacks, left, idle = channel.recv()
        attacker.join(10)
    after = _stats(port)
    latencies = normal.pop("latencies")
    ok = [s for status, s in latencies if status == 200]
    other_5xx = sum(v for k, v in normal["statuses"].items()
                    if int(k) >= 500 and int(k) not in (503, 504))
    for report in attacks.values():
        other_5xx += sum(v for k, v in report["statuses"].items()
                         if int(k) >= 500 and int(k) not in (503, 504))
    other_5xx += sum(v for k, v in health_statuses.items()
                     if k is not None and k >= 500 and k not in (503, 504))
    result = {
        "seconds": seconds,
        "normal": {**normal, "sentences_per_second": normal["sentences"] / normal["seconds"],
                   **_percentiles(ok)},
        "health": {"requests": len(health),
                   "statuses": {str(k): v for k, v in sorted(health_statuses.items(),
                                                              key=lambda kv: str(kv[0]))},
                   **_percentiles(health)},
        "5xx_not_503_504": other_5xx,
        **_server_memory(server.process.pid),
    }
    if attack:
        result["attacks"] = dict(attacks)
        result["all_refused_in_time"] = all(
            report["not_refused_in_time"] == 0 for report in attacks.values())
        result["attacks"]["disconnect"] = {
            "requests": left,
            "sentences_dropped": after.get("dropped", 0) - before.get("dropped", 0)}
        result["attacks"]["idle_sockets"] = {
            "held": args.idle, **idle,
            "dropped_by_server": (after.get("dropped_connections", 0)
                                  - before.get("dropped_connections", 0)),
            "refused_by_server": (after.get("refused_connections", 0)
                                  - before.get("refused_connections", 0))}
    return result


HEADER_CHOICES = [
    {}, {"Content-Type": "text/plain"}, {"Content-Type": "application/json; charset=latin-1"},
    {"Content-Type": "multipart/form-data; boundary=x"}, {"Origin": EVIL_ORIGIN},
    {"Origin": "null"}, {"Host": "attacker.example"}, {"Host": f"{HOST}:1"},
    {"Content-Encoding": "gzip"}, {"Content-Type": "application/json", "X-Junk": "\x7f" * 3},
]


def fuzz_phase(server: Server, name: str, count: int, probe: str, seed: int = 0) -> dict:
    """``count`` bad requests (bodies, paths and methods of ``bad_requests``, headers
    drawn from :data:`HEADER_CHOICES` or JSON's), one connection each; then ``probe``."""
    port = urllib.parse.urlsplit(server.url).port
    rng = random.Random(seed)
    statuses, failures, failed_headers = {}, 0, {}
    for method, path, body in bad_requests(name, count, seed):
        headers = dict(JSON_HEADERS) if rng.random() < 0.5 else {}
        headers.update(rng.choice(HEADER_CHOICES))
        connection = http.client.HTTPConnection(HOST, port, timeout=60)
        try:
            connection.request(method, urllib.parse.quote(path, safe="/:"), body, headers)
            response = connection.getresponse()
            response.read()
            statuses[response.status] = statuses.get(response.status, 0) + 1
        except (OSError, http.client.HTTPException):
            failures += 1
            # Which headers it carried: a header the HTTP parser rejects ends the
            # connection with a 400 that a client still sending its body may never read.
            for header in sorted(headers):
                failed_headers[header] = failed_headers.get(header, 0) + 1
        finally:
            connection.close()
    connection = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        connection.request("POST", f"/v1/models/{name}:predict",
                           json.dumps({"instances": [probe]}), JSON_HEADERS)
        response = connection.getresponse()
        answer = json.loads(response.read())
        correct = response.status == 200 and isinstance(
            answer["predictions"][0]["translations"], str)
    except (OSError, ValueError, KeyError, TypeError, IndexError, http.client.HTTPException):
        correct = False
    finally:
        connection.close()
    return {"requests": count, "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "5xx_not_503": sum(v for k, v in statuses.items() if k >= 500 and k != 503),
            "connection_failures": failures, "connection_failure_headers": failed_headers,
            "alive": server.process.poll() is None,
            "correct_afterwards": correct}


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir", help="an export made with --onnx")
    _common.add(parser, "name")
    _common.add(parser, "sentences")
    _common.add(parser, "count", default=500, help="sentences the normal clients send "
                "(default 500)")
    parser.add_argument("--int8", action="store_true", help="serve NAME.int8.onnx")
    _common.add(parser, "no_spin")
    _common.add(parser, "work_niceness")
    _common.add(parser, "batch_size", default=32, help="sentences a batch (default 32)")
    parser.add_argument("--duration", type=float, default=120.0,
                        help="seconds in all: half without the attack, half with (default 120)")
    _common.add(parser, "clients", help="normal clients (default %(default)s)")
    _common.add(parser, "per_request", help="sentences a normal request (default %(default)s)")
    parser.add_argument("--slow", type=int, default=200,
                        help="connections trickling a body (default 200)")
    parser.add_argument("--idle", type=int, default=2000,
                        help="connections that send nothing, held open (default 2000)")
    parser.add_argument("--bombers", type=int, default=2,
                        help="clients of each other kind of attack (default 2)")
    parser.add_argument("--constrained-flood", type=int, default=100,
                        help="clients each sending one line of 40 sentences with a phrase to "
                        "avoid, the next as soon as the last is answered (default 100)")
    parser.add_argument("--bomb-sentences", type=int, default=3000,
                        help="sentences in an alignment bomb's one line (default 3000)")
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20,
                        help="the server's body limit; sentence bombs fill it (default 1 MiB)")
    parser.add_argument("--read-timeout", type=float, default=10.0,
                        help="the server's --read-timeout (default 10)")
    parser.add_argument("--request-timeout", type=float, default=30.0,
                        help="the server's --request-timeout (default 30)")
    parser.add_argument("--bomb-deadline", type=float, default=10.0,
                        help="seconds a bomb may take to be refused (default 10)")
    parser.add_argument("--refusal-deadline", type=float, default=2.0,
                        help="seconds a cross-site body may take to be refused (default 2)")
    parser.add_argument("--slow-margin", type=float, default=5.0,
                        help="seconds past --read-timeout a slow body may take (default 5)")
    parser.add_argument("--fuzz", type=int, default=5000, help="bad requests (default 5000)")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)

    sentences = _common.sentences(args.sentences, args.count, parser=parser)
    options = ["--batch-size", str(args.batch_size), "--max-body-bytes",
               str(args.max_body_bytes), "--read-timeout", str(args.read_timeout),
               "--request-timeout", str(args.request_timeout), "--poll-seconds", "0"]
    options += ["--int8"] if args.int8 else []
    options += [] if args.spin else ["--no-spin"]
    options += ["--work-niceness", str(args.work_niceness)] if args.work_niceness else []
    server = Server(args.export_dir, args.name, options)
    try:
        quiet = phase(server, args.name, sentences, args.duration / 2, args, attack=False)
        attacked = phase(server, args.name, sentences, args.duration / 2, args, attack=True)
        fuzz = fuzz_phase(server, args.name, args.fuzz, sentences[0])
        memory = _server_memory(server.process.pid)
    finally:
        stopped = server.stop()
    settings = {"export_dir": str(args.export_dir), "name": args.name, "int8": args.int8,
                "spin": args.spin, "work_niceness": args.work_niceness,
                "batch_size": args.batch_size, "clients": args.clients,
                "per_request": args.per_request, "slow": args.slow, "idle": args.idle,
                "bombers": args.bombers, "constrained_flood": args.constrained_flood,
                "bomb_sentences": args.bomb_sentences, "max_body_bytes": args.max_body_bytes,
                "read_timeout": args.read_timeout, "request_timeout": args.request_timeout,
                "duration": args.duration, "sentences": len(sentences)}
    results = {"without_attack": quiet, "with_attack": attacked, "fuzz": fuzz,
               "server_peak_rss_mib": memory["peak_rss_mib"], **stopped}
    rows = [
        {"phase": label, "p50": r["normal"]["p50_ms"], "p99": r["normal"]["p99_ms"],
         "rate": r["normal"]["sentences_per_second"], "health": r["health"]["p99_ms"],
         "errors": r["5xx_not_503_504"]}
        for label, r in (("without attack", quiet), ("with attack", attacked))
    ]
    print(_common.table(rows, [("phase", "phase", ""), ("rate", "sentences/s", ".1f"),
                               ("p50", "p50 ms", ".1f"), ("p99", "p99 ms", ".1f"),
                               ("health", "/health p99 ms", ".1f"),
                               ("errors", "5xx not 503/504", "")]))
    bench.write(results, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
