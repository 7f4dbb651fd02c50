"""``keras-nmt serve EXPORT_DIR``: an HTTP translation server on onnxruntime, without
TensorFlow (:mod:`keras_nmt.serving.server`). It speaks TF Serving's REST API, so TF
Serving clients work against it, and a plain JSON API (``POST /translate``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from typing import Iterator, Sequence, TextIO

from keras_nmt.cli.common import (
    Console, OneLineParser, non_negative_float, non_negative_int, positive_float, positive_int,
    run_main,
)
from keras_nmt.core.errors import UsageError

PROG = "keras-nmt serve"
# The event loop waits for the GIL whenever another thread holds it (a large body parsed off
# the loop, the Python of a batch between onnxruntime's calls), and Python hands it over
# once a switch interval, 5 ms by default: under attack that added some 20-30 ms to
# /health's p99 (docs/export-serving.md, "Under attack").
SWITCH_INTERVAL = 0.0005


@contextlib.contextmanager
def switching_often(seconds: float = SWITCH_INTERVAL) -> Iterator[None]:
    """The interpreter's thread switch interval set to ``seconds`` inside, then restored
    (the command may run inside another program's process)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from keras_nmt.serving.options import ServerOptions

    d = ServerOptions()
    parser = OneLineParser(
        prog=prog,
        description="Serve the ONNX models of an export over HTTP with onnxruntime (no "
        "TensorFlow): TF Serving's REST API (POST /v1/models/NAME:predict, GET "
        "/v1/models/NAME[/metadata]), POST /translate {\"text\": [...]}, GET /health, "
        "/models and /stats, Prometheus metrics at /monitoring/prometheus/metrics, and a "
        "page to try the models at /. Serves the models of EXPORT_DIR/models.config (their "
        "version policies and labels; base paths under /models are read under EXPORT_DIR), "
        "or with --name, or without a models.config, the newest version of one model, and "
        "picks up new versions as they appear. Requests that arrive together are "
        "translated in one batch. SIGTERM or Ctrl-C: stop listening, answer the requests "
        "held for at most --shutdown-timeout seconds, exit 0.",
    )
    parser.add_argument("export_dir", metavar="EXPORT_DIR")
    parser.add_argument("--name", help="serve only this model of EXPORT_DIR, its newest "
                        "version (default: the models of models.config, else nmt)")
    parser.add_argument("--model-config-file", metavar="FILE",
                        help="a models.config elsewhere than EXPORT_DIR/models.config")
    parser.add_argument("--host", default=d.host,
                        help=f"address to listen on (default {d.host}: this machine only)")
    parser.add_argument("--allowed-hosts", metavar="NAME[,NAME...]", default="",
                        help="the Host names clients reach the server by (any port), beside "
                             "localhost, 127.0.0.1 and [::1] with its port; '*': any. Required "
                             "with a --host beyond loopback")
    parser.add_argument("--port", type=non_negative_int, default=d.port,
                        help=f"port (default {d.port}, TF Serving's REST port; 0: any free "
                             "port, printed when listening)")
    parser.add_argument("--int8", action="store_true",
                        help="run each model's NAME.int8.onnx (exported with --int8)")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="onnxruntime intra-op threads (default: onnxruntime's choice)")
    parser.add_argument("--no-spin", dest="spin", action="store_false",
                        help="onnxruntime's idle threads sleep instead of spinning: less "
                        "throughput, but the CPU goes to HTTP work sooner, for a server whose "
                        "cores are shared or under attack")
    parser.add_argument("--work-niceness", type=non_negative_int, default=d.work_niceness,
                        metavar="N", help="run the threads that decode, parse large bodies and "
                        "load new versions N nice levels below the event loop (Linux), so that "
                        "requests are read and /health answered first when decoding keeps the "
                        f"cores busy; 0: one priority for all (default {d.work_niceness})")
    parser.add_argument("--batch-size", type=positive_int, default=d.batch_size, metavar="B",
                        help=f"sentences in one onnxruntime run, at most (default {d.batch_size})")
    parser.add_argument("--max-wait-ms", type=non_negative_float, default=d.max_wait * 1000,
                        metavar="MS", help="how long the oldest request waits for others to "
                        f"join its batch (default {d.max_wait * 1000:g})")
    parser.add_argument("--batch-gap-ms", type=non_negative_float, default=d.batch_gap * 1000,
                        metavar="MS", help="a batch runs once no request has arrived for MS "
                        "(clients answered together send their next requests together), or "
                        "at --max-wait-ms; a request on a server that has held one request "
                        "at a time for the last second runs at once; 0: always wait "
                        f"--max-wait-ms (default {d.batch_gap * 1000:g})")
    parser.add_argument("--queue-size", type=positive_int, default=d.queue_size, metavar="N",
                        help="sentences waiting, at most; a request beyond gets 503 at once "
                             f"(default {d.queue_size})")
    parser.add_argument("--batch-threads", type=positive_int, default=d.batch_threads,
                        metavar="N", help=f"batches run at once (default {d.batch_threads})")
    parser.add_argument("--max-chars", type=positive_int, default=d.max_chars, metavar="N",
                        help="characters of text a request, at most, before its lines are "
                        f"split (default {d.max_chars:,})")
    parser.add_argument("--max-sentences", type=positive_int, default=d.max_sentences,
                        metavar="N", help="sentences a request, at most, once its lines are "
                        f"split into sentences (default {d.max_sentences})")
    parser.add_argument("--max-tokens", type=positive_int, default=d.max_tokens, metavar="N",
                        help="source tokens a request, at most, as the model reads them (cut "
                        f"to its maximum source length) (default {d.max_tokens})")
    parser.add_argument("--max-alignment-cells", type=positive_int,
                        default=d.max_alignment_cells, metavar="N",
                        help="cells the alignments of a request may hold, at most, counted at "
                        "the longest translation the search allows (default "
                        f"{d.max_alignment_cells})")
    parser.add_argument("--max-search-cells", type=positive_int, default=d.max_search_cells,
                        metavar="N", help="the largest tensor a step of a request's "
                        "constrained search may build: its rows (up to a batch) x beam x "
                        "(beam + phrases) x the phrases' tokens (default "
                        f"{d.max_search_cells:,})")
    parser.add_argument("--max-body-bytes", type=positive_int, default=d.max_body_bytes,
                        metavar="N", help=f"request body size, at most (default {d.max_body_bytes})")
    parser.add_argument("--max-body-memory", type=positive_int, default=d.max_body_memory,
                        metavar="N", help="bytes of request bodies held at once, all requests "
                        f"together; beyond: 503 (default {d.max_body_memory})")
    parser.add_argument("--max-beam", type=positive_int, default=d.max_beam, metavar="K",
                        help="the largest beam a request may ask for; every model's own beam "
                        f"must be within it (default {d.max_beam})")
    parser.add_argument("--max-connections", type=positive_int, default=d.max_connections,
                        metavar="N", help="connections open at once; one more takes the place "
                        "of the oldest that holds no request and had 0.5 s to send one, else is "
                        f"answered 503 (default {d.max_connections})")
    parser.add_argument("--request-timeout", type=positive_float, default=d.request_timeout,
                        metavar="S", help="seconds a request may take from its head to its "
                        f"answer; then 504 and its queued work is dropped (default "
                        f"{d.request_timeout:g})")
    parser.add_argument("--read-timeout", type=positive_float, default=d.read_timeout,
                        metavar="S", help="seconds a client gets to send a request's head, and "
                        "then its body (408); an idle connection is closed after it (default "
                        f"{d.read_timeout:g})")
    parser.add_argument("--poll-seconds", type=non_negative_float, default=d.poll_seconds,
                        metavar="S", help="how often the model directories are read for new "
                        "versions, as TF Serving polls them; 0: never (default "
                        f"{d.poll_seconds:g})")
    parser.add_argument("--shutdown-timeout", type=non_negative_float, default=d.shutdown_timeout,
                        metavar="S", help="seconds the requests held at shutdown get to finish; "
                        f"what is still queued then gets 503 (default {d.shutdown_timeout:g})")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, prog: str = PROG) -> int:
    return run_main(build_parser(prog), _serve, argv, stdin, stdout, stderr,
                    interrupted="stopped")


def _serve(args, console: Console) -> int:
    from keras_nmt.serving import priority
    from keras_nmt.serving.registry import Registry
    from keras_nmt.serving.options import ServerOptions
    from keras_nmt.serving.server import TranslationServer

    if args.name and args.model_config_file:
        raise UsageError("--name and --model-config-file exclude each other")
    options = ServerOptions(
        host=args.host, port=args.port, batch_size=args.batch_size,
        allowed_hosts=tuple(filter(None, (n.strip() for n in args.allowed_hosts.split(",")))),
        max_wait=args.max_wait_ms / 1000, batch_gap=args.batch_gap_ms / 1000,
        queue_size=args.queue_size,
        max_chars=args.max_chars, max_sentences=args.max_sentences, max_tokens=args.max_tokens,
        max_alignment_cells=args.max_alignment_cells, max_search_cells=args.max_search_cells,
        max_body_bytes=args.max_body_bytes,
        max_body_memory=args.max_body_memory, max_beam=args.max_beam,
        batch_threads=args.batch_threads, max_connections=args.max_connections,
        request_timeout=args.request_timeout, read_timeout=args.read_timeout,
        poll_seconds=args.poll_seconds, shutdown_timeout=args.shutdown_timeout,
        work_niceness=args.work_niceness,
    )
    try:
        options.check()
    except ValueError as error:
        raise UsageError(str(error)) from None
    registry = Registry.from_export_dir(args.export_dir, args.name, args.model_config_file,
                                        int8=args.int8, threads=args.threads, spin=args.spin)
    if options.work_niceness:
        # onnxruntime's pool threads, made while the models loaded: this thread runs the
        # event loop, the server lowers the threads it starts itself.
        priority.lower_others(priority.nice_of() + options.work_niceness)
    served = ", ".join(f"{s.name} (version {s.version}{', int8' if s.int8 else ''})"
                       for s in registry.servables())
    server = TranslationServer(registry, options, log=console.stderr, prog=console.prog)

    def ready(url: str) -> None:
        print(f"{console.prog}: serving {served} on {url}", file=console.stderr, flush=True)

    try:
        with switching_often():
            asyncio.run(server.run(ready))
    except OSError as error:  # the address is taken or cannot be bound
        raise UsageError(f"cannot listen on {args.host}:{args.port}: "
                         f"{error.strerror or error}") from None
    print(f"{console.prog}: stopped", file=console.stderr, flush=True)
    if server.busy():
        # A batch (or a model load) left running at the shutdown timeout is inside
        # onnxruntime: finalizing the interpreter under it would abort the process, and
        # waiting for it would outlast the timeout. Nothing is left to write.
        console.stdout.flush()
        os._exit(0)
    return 0
