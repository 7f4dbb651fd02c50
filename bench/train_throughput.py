"""Training throughput of RNNsearch and RNNencdec: target tokens/s, sentences/s, ms/step,
peak memory, and the achieved FLOP/s as a fraction of this machine's matmul rate.

Usage (one command; prints a table, writes JSON)::

    python -m bench.train_throughput --data data/anki-fra-eng \\
        --json bench-train.json [--sizes medium,paper] [--models search,encdec] \\
        [--warmup 5] [--steps 50]

Sizes (``--sizes``, comma-separated), those of ``keras-nmt train --size``: ``medium`` =
E=256, H=256, n'=256, l=128 at batch 64 (Adam 2e-3, as the README's Anki runs); ``paper``
= 620/1000/1000/500 at batch 80 (Adadelta, the paper's); ``compact`` = 96/128/128/64 at
batch 64 (Adam 5e-3); or ``E/H/N/L@B`` for any other (Adam 2e-3). Both sides use
shortlists of ``--vocab-size`` words (30,000) built from the training split like
``experiment.train`` does (smaller if the corpus has fewer types); pairs longer than
``--max-len`` (50) are dropped, as for RNNsearch-50 / RNNencdec-50.

What is timed: the Trainer's own compiled training step (``Trainer.train_step``: forward,
backward, clipping, optimizer update) on real batches of ``data.training_batches``,
taken from the pipeline beforehand and held in memory, so the figures are the model's
(the input pipeline's cost is what ``bench.pipeline`` measures). ``--warmup`` steps
(tracing included) are run first and not timed; then ``--steps`` steps are timed one by
one, each ended by reading its loss back. Every model and size runs in a fresh child
process (unless ``--in-process``), so that its peak RSS (``ru_maxrss``) is its own.

FLOP count (analytic, per sentence, multiply-add = 2 FLOPs; only matrix products,
the attention's per-position work and the output softmax are counted, other
elementwise work is O(n) per token and left out). With E = m (embedding), n (GRU units),
n' (alignment units), l (maxout units), V (target shortlist), d encoder directions
(2 for RNNsearch, 1 for RNNencdec), C context size (2n for RNNsearch, n for RNNencdec),
Tx source tokens and Ty target tokens (EOS included on both sides: the tokens the
encoder reads and the decoder predicts):

    encoder, per source token:    d * 2 * 3n * (m + n)          (GRU: input and recurrent kernels, 3 gates)
    attention keys U_a h_j:       2 * C * n'                    (per source token; RNNsearch only)
    once per sentence:            2 * n * n                     (s_0 = tanh(W_s h))
                                + 2 * C * 3n                    (RNNencdec: C c, the fixed context's projection)
    per target step:
      decoder GRU                 2 * 3n * (m + n)              (previous word + recurrent)
                                + 2 * C * 3n                    (context; RNNsearch only, RNNencdec's is fixed)
      attention (RNNsearch)       2 * n * n'                    (W_a s_(i-1))
                                + Tx * (3 * n' + 2 * C + 5)     (add, tanh, v_a dot, over Tx; softmax; c_i = sum alpha h)
      deep output                 2 * 2l * (n + m + C) + l      (U_o s + V_o E y + C_o c, maxout over pairs)
      softmax layer               2 * l * V + 3 * V             (W_o t, then exp, sum, divide over the shortlist)

    forward(Tx, Ty) = Tx * (encoder + keys) + once + Ty * (per target step)
    training step   = 3 * forward (the backward pass costs about twice the forward)

summed over the sentences of every timed batch with their real (unpadded) lengths, and
divided by the timed seconds: the achieved FLOP/s. The padded positions the step also
computes are not counted (``padded_flops_per_second`` counts them, for comparison). The
fraction is achieved FLOP/s over the rate of a numpy 2048 x 2048 float32 matmul
measured in the same run (the report's ``matmul_gflops``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
from typing import Any

from bench import _common

PROG = "train_throughput"
ARCHITECTURES = {"search": "search50", "encdec": "encdec50"}


# ---------------------------------------------------------------------------- FLOPs
def forward_flops(config, source_len, target_len):
    """Forward FLOPs of one sentence pair (the formula of the module docstring).
    ``source_len``/``target_len`` may be numpy arrays (one value per sentence)."""
    m, n, a, l, V = config.embedding, config.hidden, config.attention, config.maxout, config.tgt_vocab_size
    search = config.uses_attention
    d, C = (2, 2 * n) if search else (1, n)
    per_source = d * 2 * 3 * n * (m + n) + (2 * C * a if search else 0)
    once = 2 * n * n + (0 if search else 2 * C * 3 * n)
    per_target = 2 * 3 * n * (m + n) + 2 * 2 * l * (n + m + C) + l + 2 * l * V + 3 * V
    if search:
        per_target += 2 * C * 3 * n + 2 * n * a + source_len * (3 * a + 2 * C + 5)
    return source_len * per_source + once + target_len * per_target


def training_flops(config, source_len, target_len):
    return 3 * forward_flops(config, source_len, target_len)


# ---------------------------------------------------------------------------- one measurement

def corpus_spec(corpus, directory: str, src: str, tgt: str, max_len: int) -> dict[str, Any]:
    """The fields of a measurement's spec that come from the corpus: its training files
    and its shortlists, saved into ``directory`` for the child process to load."""
    vocab = {}
    for side, vocabulary in (("source", corpus.source_vocab), ("target", corpus.target_vocab)):
        vocab[side] = str(pathlib.Path(directory) / f"vocab.{side}.txt")
        vocabulary.save(vocab[side])
    return {"max_len": max_len, "src": src, "tgt": tgt,
            "train": [str(corpus.splits["train"].source), str(corpus.splits["train"].target)],
            "source_vocab": vocab["source"], "target_vocab": vocab["target"]}


def prepare(spec: dict[str, Any], run_path: str):
    """(config, model, trainer, held batches) for ``spec``: the Trainer writes nothing
    here, but needs a run directory (``run_path``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_nmt.core import config as config_lib
    from keras_nmt.data import pipelines as data
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.text.vocab import Vocabulary

    source_encoder = WordEncoder(Vocabulary.load(spec["source_vocab"]), spec["src"])
    target_encoder = WordEncoder(Vocabulary.load(spec["target_vocab"]), spec["tgt"])
    config = config_lib.variant_config(ARCHITECTURES[spec["model"]], {
        **spec["size"], "max_len": spec["max_len"],
        "src_vocab_size": source_encoder.vocab_size, "tgt_vocab_size": target_encoder.vocab_size,
    })
    batches = data.training_batches(
        ParallelFiles(pathlib.Path(spec["train"][0]), pathlib.Path(spec["train"][1])),
        source_encoder, target_encoder, data.Batching.from_config(config),
    )
    held = list(batches.take(spec["warmup"] + spec["steps"]))
    trainer = _common.new_trainer(config, batches, run_path)
    return config, trainer.model, trainer, held


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Time ``spec['steps']`` training steps of one model at one size (in this process)."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="train_throughput_") as tmp:
        config, model, trainer, held = prepare(spec, tmp)
        for batch in held[: spec["warmup"]]:
            _common.train_step(trainer, batch)
        seconds = [_common.timed(lambda b=batch: _common.train_step(trainer, b))[0]
                   for batch in held[spec["warmup"]:]]

    useful = padded = 0.0
    sentences = tokens = source_tokens = 0
    for (source, _), target_out in held[spec["warmup"]:]:
        source, target_out = source.numpy(), target_out.numpy()
        source_len = np.count_nonzero(source, axis=1)
        target_len = np.count_nonzero(target_out, axis=1)
        useful += float(np.sum(training_flops(config, source_len, target_len)))
        padded += len(source) * float(training_flops(config, source.shape[1], target_out.shape[1]))
        sentences += len(source)
        tokens += int(target_len.sum())
        source_tokens += int(source_len.sum())
    total = sum(seconds)
    return {
        "model": spec["model"], "size_name": spec["size_name"], "variant": config.variant,
        "config": config.to_dict(),
        "parameters": int(sum(int(np.prod(w.shape)) for w in model.trainable_weights)),
        "warmup_steps": spec["warmup"], "timed_steps": len(seconds), "timed_seconds": total,
        "ms_per_step": 1000 * total / len(seconds),
        "ms_per_step_median": 1000 * float(np.median(seconds)),
        "target_tokens_per_second": tokens / total,
        "sentences_per_second": sentences / total,
        "mean_source_tokens": source_tokens / sentences,
        "mean_target_tokens": tokens / sentences,
        "flops_per_target_token": useful / tokens,
        "flops_per_second": useful / total,
        "padded_flops_per_second": padded / total,
        "peak_rss_mib": _common.peak_rss_mib(),
    }


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter, so its peak RSS is its own."""
    try:
        return _common.run_child(PROG, "--child", json.dumps(spec))
    except _common.ChildFailed as error:
        raise SystemExit(f"{PROG}: error: the {spec['model']} {spec['size_name']} "
                         f"measurement failed: {error}") from None


# ---------------------------------------------------------------------------- command line

COLUMNS = [
    ("model", "model", ""), ("size_name", "size", ""), ("batch", "batch", "d"),
    ("target_tokens_per_second", "tgt tok/s", ",.0f"), ("sentences_per_second", "sent/s", ",.1f"),
    ("ms_per_step", "ms/step", ".1f"), ("peak_rss_mib", "peak RSS MiB", ",.0f"),
    ("gflop_per_token", "GFLOP/tok", ".4f"), ("gflops", "GFLOP/s", ".2f"),
    ("fraction_of_matmul", "of matmul", ".3f"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", help="corpus directory with train.SRC/train.TGT (required)")
    _common.add(parser, "src_lang")
    _common.add(parser, "tgt_lang")
    parser.add_argument("--models", default="search,encdec", help="search and/or encdec")
    _common.add(parser, "sizes", default="medium,paper")
    _common.add(parser, "vocab_size")
    _common.add(parser, "max_len")
    _common.add(parser, "warmup", default=5, help="untimed steps first (tracing; default 5)")
    _common.add(parser, "steps", default=50, help="timed steps (default 50)")
    parser.add_argument("--in-process", action="store_true",
                        help="measure in this process (faster; peak RSS is then the process's so far)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:  # a measurement's whole spec is in the argument; no corpus is read again
        print(json.dumps(measure(json.loads(args.child))))
        return 0
    if not args.data:
        parser.error("--data is required")
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in ARCHITECTURES]
    if not models or unknown:
        parser.error(f"--models: expected search and/or encdec, got {args.models!r}")
    bench = _common.Bench(PROG, args, argv, libraries=() if args.in_process else ("tensorflow", "keras"))

    from keras_nmt.core.errors import CorpusError

    try:
        corpus = _common.Corpus.scan(args.data, args.src, args.tgt, args.max_len, args.vocab_size)
    except (CorpusError, OSError) as error:
        parser.error(str(error))
    matmul = bench.matmul_gflops() * 1e9
    results = []
    with tempfile.TemporaryDirectory(prefix="train_throughput_") as tmp:
        base = corpus_spec(corpus, tmp, args.src, args.tgt, args.max_len)
        for size_name, size in args.sizes:
            for model in models:
                spec = {**base, "model": model, "size_name": size_name, "size": size,
                        "warmup": args.warmup, "steps": args.steps}
                bench.log(f"{model} {size_name}: {args.warmup} warm-up + {args.steps} timed steps")
                result = measure(spec) if args.in_process else _child(spec)
                result["fraction_of_matmul"] = result["flops_per_second"] / matmul
                results.append(result)
    settings = {"data": str(corpus.path), "src": args.src, "tgt": args.tgt,
                "vocab_size": args.vocab_size, "max_len": args.max_len,
                "warmup_steps": args.warmup, "timed_steps": args.steps,
                "in_process": args.in_process, "train": corpus.train,
                "flops": "analytic, 3 x forward, real lengths; see the module docstring"}
    rows = [{**r, "batch": r["config"]["batch_size"], "gflop_per_token": r["flops_per_target_token"] / 1e9,
             "gflops": r["flops_per_second"] / 1e9} for r in results]
    print(_common.table(rows, COLUMNS))
    print(f"matmul: {matmul / 1e9:.1f} GFLOP/s; {_common.cpu_model()}, "
          f"{os.cpu_count()} cores" + (f"; {args.note}" if args.note else ""))
    bench.write(results, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
