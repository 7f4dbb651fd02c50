"""Prefix completion (interactive translation) through ``keras-nmt serve``: how long one
completion takes, a sentence at a time, as the page asks for them while a user types.

Usage::

    python -m bench.completion_latency EXPORT_DIR --sentences FILE \\
        [--tokens 20] [--count 50] [--rounds 3] [--no-int8] [--json out.json]

On an export made with ``--onnx --constrained`` (``--int8``: its int8 models, the default
when it has them), ``keras-nmt serve`` runs in a child process. From ``--sentences`` the
``--count`` lines whose source is closest to ``--tokens`` tokens long are taken (spread
through the file when several are equally close). Each is first translated without a
prefix; then, as a translator who has typed the first half of that translation, it is
asked again with that half as ``"prefix"`` (``POST /translate``, one sentence a request,
one request at a time: batches of one). Reported: the latency of the plain and the
completion requests (p50, p99, max over ``--rounds`` passes, after one warm-up pass), and
the share of completions that start with their prefix.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.request

from bench import _common
from bench.serving_load import Server

PROG = "completion_latency"


def build_parser():
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("export_dir", help="an export made with --onnx --constrained")
    _common.add(parser, "name")
    _common.add(parser, "sentences")
    _common.add(parser, "count", default=50, help="sentences (default 50)")
    parser.add_argument("--tokens", type=int, default=20, help="source length (default 20)")
    _common.add(parser, "rounds", default=3, help="timed passes (default 3)")
    parser.add_argument("--no-int8", action="store_true", help="NAME.onnx even with int8")
    return parser


def closest(lines: list[str], tokenize, tokens: int, count: int) -> list[str]:
    """The ``count`` lines whose token count is closest to ``tokens``, in file order."""
    ranked = sorted(range(len(lines)), key=lambda i: (abs(len(tokenize(lines[i])) - tokens), i))
    return [lines[i] for i in sorted(ranked[:count])]


def ask(url: str, body: dict) -> tuple[float, dict]:
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(f"{url}/translate", data=data,
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        found = json.loads(answer.read())
    return time.perf_counter() - start, found


def percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "max_ms": 1000 * ordered[-1]}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    codec = OnnxTranslator.from_export_dir(args.export_dir, args.name).source_codec
    pool = _common.sentences(args.sentences, 10**6 if args.sentences else 2000)  # all lines
    sentences = closest(pool, codec.tokenize, args.tokens, args.count)
    server = Server(args.export_dir, args.name, [] if args.no_int8 else ["--int8"])
    try:
        prefixes = []
        for sentence in sentences:
            _, found = ask(server.url, {"text": [sentence]})
            words = found["translations"][0]["text"].split()
            prefixes.append(" ".join(words[: max(1, len(words) // 2)]))
        plain, completed, starts = [], [], 0
        for round_ in range(args.rounds + 1):
            for sentence, prefix in zip(sentences, prefixes):
                seconds, _ = ask(server.url, {"text": [sentence]})
                guided_seconds, found = ask(server.url, {"text": [sentence], "prefix": [prefix]})
                if round_:  # the first pass warms the sessions up
                    plain.append(seconds)
                    completed.append(guided_seconds)
                    starts += found["translations"][0]["text"].startswith(prefix)
    finally:
        stopped = server.stop()
    results = {"sentences": len(sentences),
               "mean_source_tokens": statistics.mean(len(codec.tokenize(s)) for s in sentences),
               "plain": percentiles(plain), "completion": percentiles(completed),
               "starts_with_prefix": starts / max(1, len(completed)), **stopped}
    bench.log(f"plain p50 {results['plain']['p50_ms']:.1f} ms, completion p50 "
              f"{results['completion']['p50_ms']:.1f} ms (p99 "
              f"{results['completion']['p99_ms']:.1f}), prefix kept "
              f"{results['starts_with_prefix']:.3f}")
    bench.write(results, {"export_dir": str(args.export_dir), "name": args.name,
                          "int8": not args.no_int8, "tokens": args.tokens,
                          "count": args.count, "rounds": args.rounds,
                          "sentences_file": args.sentences})
    return 0


if __name__ == "__main__":
    sys.exit(main())
