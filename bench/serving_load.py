"""Load, overload and fuzz of ``keras-nmt serve``, against offline onnxruntime.

On one export (its int8 model with the export's vocabulary selection when it has them,
else NAME.onnx), at the export's beam (the one its serving_default signature uses):

- offline: :class:`OnnxTranslator` over the sentences in batches of --batch-size (sorted
  by length, as ``keras-nmt onnx-translate``), sentences/s after one warm-up batch;
- load: ``keras-nmt serve`` in a child process (the same batch size, --max-wait-ms), and
  --clients concurrent clients in this process for --seconds, each sending TF Serving
  predict requests of --per-request sentences drawn in turn from the file, the next as
  soon as the last is answered: sentences/s answered, the ratio to offline, request
  latency (p50, p99, max), errors (anything but a well-formed 200) and the share of
  translations equal to offline's (below 1 with vocabulary selection or int8, whose
  candidate words and activation ranges are computed over a batch);
- where the gap goes, four offline passes taken in turn, round by round (the machine's
  speed drifts between passes taken apart): sorted by length in batches of --batch-size
  (as offline), sorted in batches of the server's mean batch, in the order the clients
  sent them in consecutive batches of that size, a call each (lengths mixed, rare-word
  sentences decoded apart per batch, as the server's batches are), and that again with
  the rare-word sentences taken out of their batches and translated together at the end.
  The first over the second is the cost of the batches' size, the second over the third
  their make-up, the fourth over the third what gathering the rare-word sentences would
  give, and the load phase's rate over the third what HTTP and the clients cost;
- overload: a second server with a small queue (--overload-queue sentences) and
  --overload-clients clients sending requests of --per-overload sentences for
  --overload-seconds: how many got 503 and how fast (p50, p99, max), and whether any
  other error or hang happened;
- swap: a third server on a copy of the export (its files linked, not copied) with
  --poll-seconds, answering one request, then loaded by the same clients for
  --swap-seconds; a third of the way in, a
  new version of the model appears in its directory (written beside it, then renamed in,
  as an export writes one): the seconds until the server's status lists the new version
  alone, the requests that failed during the swap (target: none), and the p99 latency
  before and after it;
- fuzz: --fuzz bad requests (invalid UTF-8, broken JSON, wrong shapes and types, bad
  beams and n-best sizes, unknown models and paths, oversize bodies, deep nesting,
  random bytes), drawn with a fixed seed, against the load server: the count of each
  status, 5xx other than 503, connection failures (a crash), and whether a correct
  translation still comes back afterwards.

Usage::

    python -m bench.serving_load EXPORT_DIR --sentences anki.en \\
        [--clients 32] [--seconds 120] [--batch-size 32] [--json out.json]

Sentences: --count lines spread through --sentences FILE (one per line; e.g. the English
side of a test split), else --count sentences of the built-in corpus generator (seed 0).
Prints a table. Only loopback traffic; every phase is bounded in time and count.
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import numpy as np

from bench import _common
from keras_nmt.core.errors import ExportError
from keras_nmt.decoding.onnx_translator import OnnxTranslator

PROG = "serving_load"
JSON_HEADERS = {"Content-Type": "application/json"}  # the server takes JSON bodies only


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]  # noqa: E731
    return {"p50_ms": 1000 * statistics.median(ordered), "p99_ms": 1000 * pick(0.99),
            "max_ms": 1000 * ordered[-1]}


def offline(translator: OnnxTranslator, sentences: list[str], beam: int,
            batch_size: int, rounds: int = 3) -> dict:
    """The sentences translated offline ``rounds`` times (after a warm-up batch): the
    median rate, the yardstick of the load phase (one pass of a few seconds moves with the
    machine's speed from one second to the next)."""
    def translate(some):
        return translator.translate(some, beam_size=beam, batch_size=batch_size)

    translate(sentences[:batch_size])
    passes = [_common.timed(lambda: translate(sentences)) for _ in range(rounds)]
    return {"sentences": len(sentences), **_rates(len(sentences), [s for s, _ in passes]),
            "texts": {s: r.text for s, r in zip(sentences, passes[0][1])}}


def _rates(count: int, passes: list[float]) -> dict:
    """The figures of ``count`` sentences translated once in each of ``passes`` (their
    seconds): the median pass, and each pass's rate."""
    seconds = statistics.median(passes)
    return {"seconds": seconds, "rounds": len(passes), "rates": [count / s for s in passes],
            "sentences_per_second": count / seconds}


def where_the_gap_goes(translator: OnnxTranslator, sentences: list[str], beam: int,
                       batch_size: int, server_batch: int, rounds: int = 5) -> dict:
    """Three offline passes over the sentences, taken in turn ``rounds`` times: sorted by
    length in batches of ``batch_size`` ("sorted", as :func:`offline`), sorted in batches
    of ``server_batch`` ("server_batch"), and in the order the load phase's clients send
    them, in consecutive batches of ``server_batch``, each batch a call of its own as a
    server batch is ("arrival_order": the lengths a batch mixes and its rare-word
    sentences decoded apart are the server's, without HTTP or clients); and the same
    with the sentences that hold a rare source word under the export's selection taken
    out of their batches and translated together in one call at the end
    ("arrival_rare_gathered": the most that holding rare-word requests back until they
    share a run could give a server)."""
    def sorted_in(size):
        return lambda: translator.translate(sentences, beam_size=beam, batch_size=size)

    def arrival(rare_gathered: bool):
        gathered = []
        for start in range(0, len(sentences), server_batch):
            batch = sentences[start:start + server_batch]
            if rare_gathered:
                gathered += [sentence for sentence in batch if sentence in rare]
                batch = [sentence for sentence in batch if sentence not in rare]
            translator.translate(batch, beam_size=beam, batch_size=server_batch)
        if gathered:
            translator.translate(gathered, beam_size=beam, batch_size=len(gathered))

    # Decoded apart under vocabulary selection (keras_nmt.decoding.translation.rare_source).
    rare = ({sentence for sentence in sentences
             if translator.rare[np.asarray(translator.source(sentence).ids)].any()}
            if translator.shortlist else set())
    passes = {"sorted": (batch_size, sorted_in(batch_size)),
              "server_batch": (server_batch, sorted_in(server_batch)),
              "arrival_order": (server_batch, lambda: arrival(False)),
              "arrival_rare_gathered": (server_batch, lambda: arrival(True))}
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(rounds):
        for name, (_, translate) in passes.items():
            seconds[name].append(_common.timed(translate)[0])
    return {"rare_word_sentences": len(rare),
            **{name: {"batch_size": size, **_rates(len(sentences), seconds[name])}
               for name, (size, _) in passes.items()}}


class Server:
    """``keras-nmt serve`` in a child process on a free loopback port."""

    def __init__(self, export_dir: str, name: str, options: list[str]):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_nmt.cli", "serve", export_dir, "--name", name,
             "--port", "0", *options],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=_common.ROOT,
        )
        line = self.process.stderr.readline()
        if " on http://" not in line:
            self.process.kill()
            raise RuntimeError(f"the server did not start: {line.strip()}")
        self.url = line.rsplit(" on ", 1)[1].strip()
        # Its log, read as it comes: a pipe nobody reads fills, and the server's next log
        # line then blocks its event loop.
        self.log: collections.deque[str] = collections.deque(maxlen=50)
        self.log_lines = 0
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self) -> None:
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))
            self.log_lines += 1

    def stop(self) -> dict:
        """SIGTERM; how it ended."""
        start = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        return {"exit_status": code, "stop_seconds": time.perf_counter() - start,
                "server_log_lines": self.log_lines, "server_log_tail": list(self.log)[-5:]}


async def _exchange(reader, writer, head: bytes, body: bytes) -> tuple[int, bytes, bool]:
    """One request on a keep-alive connection: (status, body, whether the server closes)."""
    writer.write(head % len(body) + body)
    header = await reader.readuntil(b"\r\n\r\n")
    lines = header.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip().lower()
    if b"content-length" in fields:
        answer = await reader.readexactly(int(fields[b"content-length"]))
    else:  # aiohttp answers with a length; anything else is read to the end
        answer = await reader.read()
    return status, answer, fields.get(b"connection") == b"close" or b"content-length" not in fields


async def _clients(url: str, bodies, count: int, seconds: float, check=None,
                   ends: list | None = None) -> dict:
    """``count`` clients posting ``bodies()`` to ``url`` for ``seconds``, each on its own
    keep-alive connection, the next request as soon as the last is answered.

    Plain asyncio streams with the request head written once: a request costs the
    client tens of microseconds, where an HTTP client library costs about ten times
    that. The clients share the machine's cores with the server they load, so what they
    spend is taken from it. ``ends``: a list that gets each answer's perf_counter time,
    in the order of the latencies."""
    parts = urllib.parse.urlsplit(url)
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n").encode("ascii")
    if parts.path.count("%"):
        raise ValueError(f"{url}: a path with '%' is not supported here")
    latencies, statuses, failures, sentences = [], {}, [], [0]
    stop_at = time.perf_counter() + seconds

    async def client(number):
        connection = None
        while time.perf_counter() < stop_at:
            lines, body = bodies(number)
            start = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection(parts.hostname, parts.port)
                status, answer, closing = await asyncio.wait_for(
                    _exchange(*connection, head, body.encode("utf-8")), 60)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    asyncio.TimeoutError, ValueError, IndexError) as error:
                failures.append(type(error).__name__)
                closing, status = True, None
            if closing and connection is not None:
                connection[1].close()
                connection = None
            if status is None:
                continue
            latencies.append((status, time.perf_counter() - start))
            if ends is not None:
                ends.append(time.perf_counter())
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                sentences[0] += len(lines)
                if check is not None and not check(lines, answer):
                    failures.append("wrong answer")
        if connection is not None:
            connection[1].close()

    start = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(count)))
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "failures": len(failures), "failure_kinds": sorted(set(failures)),
            "sentences": sentences[0], "latencies": latencies}


def predict_bodies(sentences: list[str], per_request: int):
    """``bodies(client) -> (lines, a predict request's JSON body)``: ``per_request``
    sentences a request, taken in turn from ``sentences`` (round and round)."""
    order = [0]

    def bodies(_):
        start = order[0]
        order[0] += per_request
        lines = [sentences[(start + i) % len(sentences)] for i in range(per_request)]
        return lines, json.dumps({"instances": lines})

    return bodies


def load_phase(server: Server, name: str, sentences: list[str], expected: dict, args) -> dict:
    url = f"{server.url}/v1/models/{name}:predict"
    bodies = predict_bodies(sentences, args.per_request)

    same = [0]

    def check(lines, answer):
        """A well-formed answer; counts those equal to the offline translations (not all
        need be: vocabulary selection and int8 activations are computed over a batch, so
        a sentence's translation may change with its batch companions)."""
        got = _translations(lines, answer)
        if got is None:
            return False
        same[0] += sum(text == expected[line] for text, line in zip(got, lines))
        return True

    result = asyncio.run(_clients(url, bodies, args.clients, args.seconds, check))
    result.update(batch_figures(server))
    ok = [seconds for status, seconds in result.pop("latencies") if status == 200]
    errors = result["failures"] + sum(v for k, v in result["statuses"].items() if k != "200")
    return {**result, "errors": errors,
            "sentences_per_second": result["sentences"] / result["seconds"],
            "same_as_offline": same[0] / max(1, result["sentences"]), **_percentiles(ok)}


def batch_figures(server: Server) -> dict:
    """The batches the server ran so far (its Prometheus metrics): how many, and their
    mean size in sentences: what a server's throughput depends on most."""
    import urllib.request

    with urllib.request.urlopen(f"{server.url}/monitoring/prometheus/metrics", timeout=30) as r:
        text = r.read().decode("utf-8")
    found = {}
    for line in text.splitlines():
        for key in ("sum", "count"):
            if line.startswith(f"keras_nmt_serve_batch_sentences_{key} "):
                found[key] = float(line.split()[-1])
    count = found.get("count", 0.0)
    return {"batches": int(count), "mean_batch": found.get("sum", 0.0) / count if count else None}


def overload_phase(export_dir: str, name: str, sentences: list[str], common: list[str],
                   args) -> dict:
    # The server counts sentences after splitting: a line may hold several, so a
    # request's may be up to the whole queue.
    server = Server(export_dir, name, common + [
        "--queue-size", str(args.overload_queue), "--max-sentences", str(args.overload_queue)])
    try:
        url = f"{server.url}/v1/models/{name}:predict"
        rng = random.Random(1)

        def bodies(_):
            lines = rng.sample(sentences, min(args.per_overload, len(sentences)))
            return lines, json.dumps({"instances": lines})

        result = asyncio.run(_clients(url, bodies, args.overload_clients,
                                      args.overload_seconds))
    finally:
        stopped = server.stop()
    busy = [seconds for status, seconds in result.pop("latencies") if status == 503]
    other = result["failures"] + sum(v for k, v in result["statuses"].items()
                                     if k not in ("200", "503"))
    return {**result, "queue_sentences": args.overload_queue, "rejected": len(busy),
            "other_errors": other, "time_to_503": _percentiles(busy), **stopped}


def swap_phase(export_dir: str, name: str, sentences: list[str], common: list[str],
               args) -> dict:
    """Clients as in the load phase while a new version of the model is written into a
    copy of the export (hard links: 0 bytes copied when the file system allows them)."""
    import urllib.request

    beside = os.path.dirname(os.path.abspath(export_dir))  # links need the same file system
    with tempfile.TemporaryDirectory(
            prefix="swap-", dir=beside if os.access(beside, os.W_OK) else None) as work:
        model_dir = os.path.join(work, name)
        versions = sorted(int(v) for v in os.listdir(os.path.join(export_dir, name))
                          if v.isdigit())
        old, new = versions[-1], versions[-1] + 1
        link = lambda source, target: _link_or_copy(source, target)  # noqa: E731
        shutil.copytree(os.path.join(export_dir, name, str(old)),
                        os.path.join(model_dir, str(old)), copy_function=link)
        server = Server(work, name, common + ["--poll-seconds", str(args.poll_seconds)])
        found: dict = {}
        ends: list[float] = []

        def swap():
            time.sleep(args.swap_seconds / 3)
            staging = os.path.join(work, f".staging-{new}")
            shutil.copytree(os.path.join(model_dir, str(old)), staging, copy_function=link)
            found["written_at"] = time.perf_counter()
            os.rename(staging, os.path.join(model_dir, str(new)))
            deadline = found["written_at"] + args.poll_seconds + 60
            while time.perf_counter() < deadline:
                with urllib.request.urlopen(f"{server.url}/v1/models/{name}", timeout=30) as r:
                    served = [int(v["version"])
                              for v in json.loads(r.read())["model_version_status"]]
                if served == [new]:
                    found["served_at"] = time.perf_counter()
                    return
                time.sleep(0.05)

        swapper = threading.Thread(target=swap)
        try:
            url = f"{server.url}/v1/models/{name}:predict"
            # One answer first: the old version has answered (and warmed up) before the
            # clock of the swap starts, so some answers come before the new version.
            _, body = predict_bodies(sentences, args.per_request)(0)
            with urllib.request.urlopen(urllib.request.Request(
                    url, body.encode("utf-8"), {"Content-Type": "application/json"}),
                    timeout=120) as answer:
                answer.read()
            swapper.start()
            result = asyncio.run(_clients(url, predict_bodies(sentences, args.per_request),
                                          args.clients, args.swap_seconds, _well_formed, ends))
            swapper.join(args.poll_seconds + 60)
        finally:
            stopped = server.stop()
    written = found.get("written_at", math.inf)
    latencies = result.pop("latencies")
    before = [s for (status, s), end in zip(latencies, ends) if status == 200 and end < written]
    after = [s for (status, s), end in zip(latencies, ends) if status == 200 and end >= written]
    errors = result["failures"] + sum(v for k, v in result["statuses"].items() if k != "200")
    return {**result, "errors": errors, "poll_seconds": args.poll_seconds,
            "old_version": old, "new_version": new,
            "seconds_to_serve": found["served_at"] - written if "served_at" in found else None,
            "before": _percentiles(before), "after": _percentiles(after),
            "exit_status": stopped["exit_status"]}


def _link_or_copy(source: str, target: str) -> str:
    try:
        os.link(source, target)
        return target
    except OSError:  # another file system, or one without links
        return shutil.copy2(source, target)


def _translations(lines: list[str], answer: bytes) -> list[str] | None:
    """The translations of a predict answer for ``lines``; None: not well formed."""
    try:
        got = [p["translations"] for p in json.loads(answer)["predictions"]]
    except (ValueError, KeyError, TypeError):
        return None
    if len(got) != len(lines) or not all(isinstance(text, str) for text in got):
        return None
    return got


def _well_formed(lines: list[str], answer: bytes) -> bool:
    return _translations(lines, answer) is not None


def bad_requests(name: str, count: int, seed: int = 0) -> list[tuple[str, str, bytes]]:
    """``count`` (method, path, body) of bad requests, drawn with ``seed``."""
    rng = random.Random(seed)
    predict = f"/v1/models/{name}:predict"

    def junk_text():
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(0, 12)))

    def junk_value(depth=0):
        kinds = [lambda: None, lambda: rng.random() < 0.5, lambda: rng.randrange(-10**6, 10**6),
                 lambda: rng.uniform(-1e6, 1e6), junk_text]
        if depth < 3:
            kinds += [lambda: [junk_value(depth + 1) for _ in range(rng.randrange(4))],
                      lambda: {junk_text(): junk_value(depth + 1) for _ in range(rng.randrange(3))}]
        return rng.choice(kinds)()

    def body(value):
        return json.dumps(value).encode("utf-8")

    makers = [
        lambda: ("POST", "/translate", b"\xff\xfe\xfd" + bytes(rng.randrange(256) for _ in range(8))),
        lambda: ("POST", predict, body({"instances": ["a b c"]})[: rng.randrange(1, 20)]),
        lambda: ("POST", "/translate", b"[" * 50_000 + b"]" * 50_000),
        lambda: ("POST", "/translate", b"x" * ((1 << 20) + rng.randrange(1, 1000))),
        lambda: ("POST", "/translate", body({"text": ["a"], "beam": rng.choice(
            [0, -1, -(10**9), 10**9, 10**40, 2.5, True, "5", None])})),
        lambda: ("POST", "/translate", body({"text": ["a"], "beam": 1, "nbest": rng.randrange(2, 50)})),
        lambda: ("POST", "/translate", body({"text": ["a"], "alpha": rng.choice(
            [-1, 1e300, "x", [1]])})),
        lambda: ("POST", "/translate", body({"text": ["a"] * rng.randrange(257, 400)})),
        lambda: ("POST", "/translate", body({"text": junk_value()})),
        lambda: ("POST", "/translate", body(junk_value())),
        lambda: ("POST", predict, body(junk_value())),
        lambda: ("POST", predict, body({"instances": junk_value()})),
        lambda: ("POST", predict, body({"inputs": {"sentences": ["a"], "beam_size": junk_value()}})),
        lambda: ("POST", predict, body({"signature_name": junk_text(), "instances": ["a"]})),
        lambda: ("POST", predict, body({"instances": [{"b64": junk_text()}]})),
        lambda: ("POST", f"/v1/models/{junk_text() or 'x'}:predict", body({"instances": ["a"]})),
        lambda: ("POST", f"/v1/models/{name}/versions/{rng.randrange(2, 10**6)}:predict",
                 body({"instances": ["a"]})),
        lambda: (rng.choice(["GET", "PUT", "DELETE", "PATCH"]), predict, b""),
        lambda: ("GET", rng.choice(["/static/", "/v1/models/", "/"]) + "a" * rng.randrange(1, 5000), b""),
        lambda: (rng.choice(["GET", "POST"]), "/" + junk_text(), bytes(
            rng.randrange(256) for _ in range(rng.randrange(64)))),
    ]
    return [makers[i % len(makers)]() for i in (rng.randrange(len(makers)) for _ in range(count))]


def fuzz_phase(server: Server, name: str, count: int, probe: str, expected: str) -> dict:
    import http.client
    import urllib.parse

    port = urllib.parse.urlsplit(server.url).port
    statuses, failures = {}, 0
    for method, path, body in bad_requests(name, count):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request(method, urllib.parse.quote(path, safe="/:"), body,
                               JSON_HEADERS if body else {})
            status = connection.getresponse().status
            statuses[status] = statuses.get(status, 0) + 1
        except (OSError, http.client.HTTPException):
            failures += 1
        finally:
            connection.close()
    server_5xx = sum(v for k, v in statuses.items() if k >= 500 and k != 503)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", f"/v1/models/{name}:predict", json.dumps({"instances": [probe]}),
                           JSON_HEADERS)
        answer = json.loads(connection.getresponse().read())
        correct = answer["predictions"][0]["translations"] == expected
    except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
        correct = False
    finally:
        connection.close()
    return {"requests": count, "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "5xx_not_503": server_5xx, "connection_failures": failures,
            "alive": server.process.poll() is None, "correct_afterwards": correct}


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir", help="an export made with --onnx (--int8, --shortlist)")
    _common.add(parser, "name")
    _common.add(parser, "sentences")
    _common.add(parser, "count", default=2000, help="sentences used (default 2000)")
    parser.add_argument("--no-int8", action="store_true", help="NAME.onnx even with an int8 model")
    _common.add(parser, "batch_size", default=32, help="sentences a batch (default 32)")
    parser.add_argument("--max-wait-ms", type=float,
                        help="the server's --max-wait-ms (default: the server's default)")
    parser.add_argument("--batch-gap-ms", type=float,
                        help="the server's --batch-gap-ms (default: the server's default)")
    parser.add_argument("--threads", type=int, help="onnxruntime intra-op threads")
    _common.add(parser, "no_spin")
    _common.add(parser, "work_niceness")
    parser.add_argument("--batch-threads", type=int, default=1,
                        help="batches the server runs at once (default 1)")
    _common.add(parser, "clients")
    parser.add_argument("--seconds", type=float, default=120.0)
    _common.add(parser, "per_request")
    parser.add_argument("--overload-clients", type=int, default=64)
    parser.add_argument("--overload-seconds", type=float, default=10.0)
    parser.add_argument("--overload-queue", type=int, default=64, help="its queue, sentences")
    parser.add_argument("--per-overload", type=int, default=16, help="sentences a request")
    parser.add_argument("--fuzz", type=int, default=2000, help="bad requests (default 2000)")
    parser.add_argument("--swap-seconds", type=float, default=30.0,
                        help="the swap phase's length; 0: no swap phase (default 30)")
    parser.add_argument("--poll-seconds", type=float, default=1.0,
                        help="the swap server's --poll-seconds (default 1)")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)

    sentences = _common.sentences(args.sentences, args.count, parser=parser)
    int8 = not args.no_int8
    try:
        translator = OnnxTranslator.from_export_dir(args.export_dir, args.name, args.threads,
                                                    int8=int8)
    except ExportError:  # no int8 model in the export
        int8 = False
        translator = OnnxTranslator.from_export_dir(args.export_dir, args.name, args.threads)
    beam = translator.beam_size  # serving_default's, so offline decodes at it too
    from keras_nmt.serving.options import ServerOptions

    defaults = ServerOptions()
    if args.max_wait_ms is None:
        args.max_wait_ms = defaults.max_wait * 1000
    if args.batch_gap_ms is None:
        args.batch_gap_ms = defaults.batch_gap * 1000
    common = ["--batch-size", str(args.batch_size), "--max-wait-ms", str(args.max_wait_ms),
              "--batch-gap-ms", str(args.batch_gap_ms)]
    common += ["--int8"] if int8 else []
    common += ["--threads", str(args.threads)] if args.threads else []
    common += ["--batch-threads", str(args.batch_threads)]
    common += [] if args.spin else ["--no-spin"]
    common += ["--work-niceness", str(args.work_niceness)] if args.work_niceness else []

    off = offline(translator, sentences, beam, args.batch_size)
    expected = off.pop("texts")
    server = Server(args.export_dir, args.name, common)
    try:
        load = load_phase(server, args.name, sentences, expected, args)
        # Alone in its batch, as translated here alone.
        probe = translator.translate(sentences[:1], beam_size=beam)[0].text
        fuzz = fuzz_phase(server, args.name, args.fuzz, sentences[0], probe)
    finally:
        stopped = server.stop()
    gap = where_the_gap_goes(translator, sentences, beam, args.batch_size,
                             max(1, round(load["mean_batch"] or args.batch_size)))
    arrival = gap["arrival_order"]
    overload = overload_phase(args.export_dir, args.name, sentences, common, args)
    swapped = (swap_phase(args.export_dir, args.name, sentences, common, args)
               if args.swap_seconds > 0 else None)
    model = {"export_dir": str(args.export_dir), "name": args.name, "int8": int8,
             "shortlist": list(translator.shortlist) if translator.shortlist else None,
             "beam": beam, "alpha": translator.alpha}
    settings = {"model": model, "batch_size": args.batch_size, "max_wait_ms": args.max_wait_ms,
                "batch_gap_ms": args.batch_gap_ms,
                "batch_threads": args.batch_threads, "threads": args.threads,
                "spin": args.spin, "work_niceness": args.work_niceness,
                "clients": args.clients, "seconds": args.seconds,
                "per_request": args.per_request, "sentences": len(sentences)}
    results = {
        "offline": off,
        "where_the_gap_goes": {
            **gap, "size": gap["sorted"]["sentences_per_second"]
            / gap["server_batch"]["sentences_per_second"],
            "make_up": gap["server_batch"]["sentences_per_second"]
            / arrival["sentences_per_second"],
            "rare_gathered": gap["arrival_rare_gathered"]["sentences_per_second"]
            / arrival["sentences_per_second"]},
        "load": {**load, "ratio_to_offline": load["sentences_per_second"] / off["sentences_per_second"],
                 "ratio_to_arrival_order": (load["sentences_per_second"]
                                            / arrival["sentences_per_second"]),
                 **stopped},
        "overload": overload,
        "fuzz": fuzz,
        "swap": swapped,
    }
    rows = [
        {"phase": "offline", "rate": off["sentences_per_second"]},
        *({"phase": f"offline in turn: {name.replace('_', ' ')}",
           "rate": gap[name]["sentences_per_second"], "batch": gap[name]["batch_size"]}
          for name in ("sorted", "server_batch", "arrival_order", "arrival_rare_gathered")),
        {"phase": "load", "rate": load["sentences_per_second"], "p50": load["p50_ms"],
         "p99": load["p99_ms"], "errors": load["errors"], "batch": load["mean_batch"]},
        {"phase": "overload 503", "p50": overload["time_to_503"]["p50_ms"],
         "p99": overload["time_to_503"]["p99_ms"], "errors": overload["other_errors"]},
        {"phase": "fuzz", "errors": fuzz["5xx_not_503"] + fuzz["connection_failures"]},
    ]
    if swapped is not None:
        rows.append({"phase": f"swap (served in {swapped['seconds_to_serve']:.2f} s)"
                     if swapped["seconds_to_serve"] is not None else "swap (never served)",
                     "rate": swapped["sentences"] / swapped["seconds"],
                     "p50": swapped["after"]["p50_ms"], "p99": swapped["after"]["p99_ms"],
                     "errors": swapped["errors"]})
    print(_common.table(rows, [("phase", "phase", ""), ("rate", "sentences/s", ".1f"),
                               ("p50", "p50 ms", ".1f"), ("p99", "p99 ms", ".1f"),
                               ("errors", "errors", ""), ("batch", "mean batch", ".1f")]))
    bench.write(results, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
