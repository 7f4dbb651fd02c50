"""The output layer's pieces timed alone: the [R x l] x [l x V] product with its bias,
TensorFlow's top-k against the search's two-stage top-k, and the row normaliser.

Usage (one command; prints a table, writes JSON)::

    python -m experiments.output_layer [--rows 320] [--maxout 128] [--vocab-size 27461] \\
        [--k 8] [--rounds 20] [--json bench-output-layer.json]

Defaults: beam 5 x batch 64 hypotheses, l = 128, Anki's French shortlist, k = beam + 3
(what ``keras_nmt.search`` asks for). Each piece is a ``tf.function`` run once untimed,
then ``--rounds`` times; the mean is reported, and for the product its GFLOP/s (2 R l V
FLOPs) as a fraction of numpy's 2048 x 2048 matmul rate measured in the same run.
"""

from __future__ import annotations

import sys

from bench import _common

PROG = "experiments.output_layer"


def main(argv=None) -> int:
    from keras_nmt.cli.common import positive_int

    parser = _common.parser(PROG, __doc__)
    parser.add_argument("--rows", type=positive_int, default=320, help="R (default 320)")
    parser.add_argument("--maxout", type=positive_int, default=128, help="l (default 128)")
    _common.add(parser, "vocab_size", default=27461,
                help="V, the target shortlist (default 27461)")
    parser.rename("--vocab", "--vocab-size")
    parser.add_argument("--k", type=positive_int, default=8, help="k of the top-k (default 8)")
    _common.add(parser, "rounds", default=20, help="timed runs of each piece (default 20)")
    args = parser.parse_args(argv)
    if args.k > args.vocab_size:
        parser.error("--k must not exceed --vocab-size")
    bench = _common.Bench(PROG, args, argv)

    import numpy as np
    import tensorflow as tf

    from keras_nmt.search import top_k

    rng = np.random.default_rng(0)
    hidden = tf.constant(rng.normal(size=(args.rows, args.maxout)).astype(np.float32))
    kernel = tf.constant(rng.normal(0, 0.3, size=(args.maxout, args.vocab_size)).astype(np.float32))
    bias = tf.constant(rng.normal(size=(args.vocab_size,)).astype(np.float32))
    logits = tf.nn.bias_add(hidden @ kernel, bias)
    # The search's rows come in whole blocks of output columns, padding masked
    # (search.output_columns): the two-stage top-k takes them so.
    blocks = tf.pad(logits, [[0, 0], [0, -args.vocab_size % top_k.BLOCK]], constant_values=-1e9)
    k = tf.constant(args.k)

    pieces = {
        "product with bias": (lambda: tf.nn.bias_add(hidden @ kernel, bias)),
        "tf.math.top_k": (lambda: tf.math.top_k(logits, k=k)),
        "two-stage top-k (search)": (lambda: top_k.top_k_over_vocabulary(blocks, k)),
        "normaliser: log-sum-exp": (lambda: tf.math.log(tf.reduce_sum(
            tf.exp(logits - tf.reduce_max(logits, axis=1, keepdims=True)), axis=1))),
    }
    matmul = bench.matmul_gflops()
    rows = []
    for name, fn in pieces.items():
        compiled = tf.function(fn, autograph=False)
        [t.numpy() for t in tf.nest.flatten(compiled())]

        def run(compiled=compiled):
            for _ in range(args.rounds):
                out = compiled()
            [t.numpy() for t in tf.nest.flatten(out)]

        seconds, _ = _common.timed(run)
        rows.append({"piece": name, "ms": 1000 * seconds / args.rounds})
    product = rows[0]
    product["gflops"] = 2 * args.rows * args.maxout * args.vocab_size / (product["ms"] / 1000) / 1e9
    product["of_matmul"] = product["gflops"] / matmul
    same = bool(np.array_equal(tf.math.top_k(logits, k=k)[1].numpy(),
                               top_k.top_k_over_vocabulary(blocks, k)[1].numpy()))
    bench.write({"pieces": rows, "two_stage_same_ids": same},
                {field: getattr(args, field) for field in ("rows", "maxout", "vocab_size", "k", "rounds")})
    print(_common.table(rows, [("piece", "piece", ""), ("ms", "ms", ".2f"),
                               ("gflops", "GFLOP/s", ".1f"), ("of_matmul", "of matmul", ".3f")]))
    print(f"[{args.rows} x {args.maxout}] x [{args.maxout} x {args.vocab_size}], k={args.k}; "
          f"numpy matmul {matmul:.1f} GFLOP/s; two-stage top-k gives the same ids: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
