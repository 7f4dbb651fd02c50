"""The output layer's pieces timed alone: the [R x l] x [l x V] product with its bias,
TensorFlow's top-k against the search's two-stage top-k, and the row normaliser.

Usage (one command; prints a table, writes JSON)::

    PYTHONPATH=. python bench/output_layer.py [--rows 320] [--maxout 128] [--vocab 27461] \\
        [--k 8] [--repeats 20] [--json bench-output-layer.json]

Defaults: beam 5 x batch 64 hypotheses, l = 128, Anki's French shortlist, k = beam + 3
(what ``keras_nmt.search`` asks for). Each piece is a ``tf.function`` run once untimed,
then ``--repeats`` times; the mean is reported, and for the product its GFLOP/s (2 R l V
FLOPs) as a fraction of numpy's 2048 x 2048 matmul rate measured in the same run.
"""

from __future__ import annotations

import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402

PROG = "output_layer"


def main(argv=None) -> int:
    from keras_nmt.cli.common import OneLineParser, positive_int

    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=positive_int, default=320)
    parser.add_argument("--maxout", type=positive_int, default=128)
    parser.add_argument("--vocab", type=positive_int, default=27461)
    parser.add_argument("--k", type=positive_int, default=8)
    parser.add_argument("--repeats", type=positive_int, default=20)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    if args.k > args.vocab:
        parser.error("--k must not exceed --vocab")

    import numpy as np
    import tensorflow as tf

    from keras_nmt import search

    rng = np.random.default_rng(0)
    hidden = tf.constant(rng.normal(size=(args.rows, args.maxout)).astype(np.float32))
    kernel = tf.constant(rng.normal(0, 0.3, size=(args.maxout, args.vocab)).astype(np.float32))
    bias = tf.constant(rng.normal(size=(args.vocab,)).astype(np.float32))
    logits = tf.nn.bias_add(hidden @ kernel, bias)
    # The search's rows come in whole blocks of output columns, padding masked
    # (search.output_columns): the two-stage top-k takes them so.
    blocks = tf.pad(logits, [[0, 0], [0, -args.vocab % search._BLOCK]], constant_values=-1e9)
    k = tf.constant(args.k)

    pieces = {
        "product with bias": (lambda: tf.nn.bias_add(hidden @ kernel, bias)),
        "tf.math.top_k": (lambda: tf.math.top_k(logits, k=k)),
        "two-stage top-k (search)": (lambda: search._top_k_over_vocabulary(blocks, k)),
        "normaliser: log-sum-exp": (lambda: tf.math.log(tf.reduce_sum(
            tf.exp(logits - tf.reduce_max(logits, axis=1, keepdims=True)), axis=1))),
    }
    matmul = _common.matmul_flops()
    rows = []
    for name, fn in pieces.items():
        compiled = tf.function(fn, autograph=False)
        [t.numpy() for t in tf.nest.flatten(compiled())]
        start = time.perf_counter()
        for _ in range(args.repeats):
            out = compiled()
        [t.numpy() for t in tf.nest.flatten(out)]
        rows.append({"piece": name, "ms": 1000 * (time.perf_counter() - start) / args.repeats})
    product = rows[0]
    product["gflops"] = 2 * args.rows * args.maxout * args.vocab / (product["ms"] / 1000) / 1e9
    product["of_matmul"] = product["gflops"] * 1e9 / matmul["flops_per_second"]
    same = bool(np.array_equal(tf.math.top_k(logits, k=k)[1].numpy(),
                               search._top_k_over_vocabulary(blocks, k)[1].numpy()))
    report = {"benchmark": PROG, "machine": _common.machine(), "settings": vars(args),
              "matmul": matmul, "pieces": rows, "two_stage_same_ids": same}
    _common.write_report(args.json, report)
    print(_common.table(rows, [("piece", "piece", ""), ("ms", "ms", ".2f"),
                               ("gflops", "GFLOP/s", ".1f"), ("of_matmul", "of matmul", ".3f")]))
    print(f"[{args.rows} x {args.maxout}] x [{args.maxout} x {args.vocab}], k={args.k}; numpy matmul "
          f"{matmul['flops_per_second'] / 1e9:.1f} GFLOP/s; two-stage top-k gives the same ids: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
