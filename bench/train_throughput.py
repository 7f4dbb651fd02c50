"""Training throughput of RNNsearch and RNNencdec: target tokens/s, sentences/s, ms/step,
peak memory, and the achieved FLOP/s as a fraction of this machine's matmul rate.

Usage (one command; prints a table, writes JSON)::

    PYTHONPATH=. python bench/train_throughput.py --data data/anki-fra-eng \\
        --json bench-train.json [--sizes compact,paper] [--models search,encdec] \\
        [--warmup 5] [--steps 50]

Sizes (``--sizes``, comma-separated): ``compact`` = E=256, H=256, n'=256, l=128 at batch 64
(Adam 2e-3, as the README's Anki runs); ``paper`` = 620/1000/1000/500 at batch 80
(Adadelta, the paper's); or ``E/H/N/L@B`` for any other (Adam 2e-3). Both sides use
shortlists of ``--vocab-size`` words (30,000) built from the training split like
``experiment.train`` does (smaller if the corpus has fewer types); pairs longer than
``--max-len`` (50) are dropped, as for RNNsearch-50 / RNNencdec-50.

What is timed: the Trainer's own compiled training step (``Trainer.train_step``: forward,
backward, clipping, optimizer update) on real batches of ``data.training_batches``,
taken from the pipeline beforehand and held in memory, so the figures are the model's
(the input pipeline's cost is what ``bench/pipeline.py`` measures). ``--warmup`` steps
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
fraction is achieved FLOP/s over the best time of a numpy 2048 x 2048 float32 matmul
measured in the same run (``matmul``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402

PROG = "train_throughput"
ARCHITECTURES = {"search": "search50", "encdec": "encdec50"}
SIZES = {
    "compact": {"embedding": 256, "hidden": 256, "attention": 256, "maxout": 128,
                "batch_size": 64, "optimizer": "adam", "learning_rate": 2e-3},
    "paper": {"embedding": 620, "hidden": 1000, "attention": 1000, "maxout": 500,
              "batch_size": 80, "optimizer": "adadelta", "learning_rate": 1.0},
}


def parse_size(text: str) -> dict[str, Any]:
    """``compact``, ``paper`` or ``E/H/N/L@B``."""
    if text in SIZES:
        return dict(SIZES[text])
    try:
        dims, batch = text.split("@")
        embedding, hidden, attention, maxout = (int(x) for x in dims.split("/"))
        values = {"embedding": embedding, "hidden": hidden, "attention": attention,
                  "maxout": maxout, "batch_size": int(batch)}
    except ValueError:
        raise ValueError(f"size {text!r}: expected compact, paper or E/H/N/L@B (e.g. 256/256/256/128@64)") from None
    if min(values.values()) < 1:
        raise ValueError(f"size {text!r}: every number must be positive")
    return {**values, "optimizer": "adam", "learning_rate": 2e-3}


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


def run_step(trainer, batch) -> None:
    """One training step, ended by reading its loss back (the step is asynchronous)."""
    (source, target_in), target_out = batch
    float(trainer.train_step(source, target_in, target_out)[0])


def prepare(spec: dict[str, Any], run_path: str):
    """(config, model, trainer, held batches) for ``spec``: the Trainer writes nothing
    here, but needs a run directory (``run_path``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from keras_nmt import config as config_lib
    from keras_nmt import data
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.vocab import Vocabulary
    from keras_nmt.training import Trainer

    source_encoder = WordEncoder(Vocabulary.load(spec["source_vocab"]), spec["src"])
    target_encoder = WordEncoder(Vocabulary.load(spec["target_vocab"]), spec["tgt"])
    config = config_lib.variant_config(ARCHITECTURES[spec["model"]], {
        **spec["size"], "max_len": spec["max_len"],
        "src_vocab_size": source_encoder.vocab_size, "tgt_vocab_size": target_encoder.vocab_size,
    })
    keras.utils.set_random_seed(config.seed)
    batches = data.training_batches(
        ParallelFiles(pathlib.Path(spec["train"][0]), pathlib.Path(spec["train"][1])),
        source_encoder, target_encoder, max_len=config.max_len, batch_size=config.batch_size,
        sort_batches=config.sort_batches, seed=config.seed, shuffle_buffer=config.shuffle_buffer,
    )
    held = list(batches.take(spec["warmup"] + spec["steps"]))
    model = TranslationModel(config)
    trainer = Trainer(config, model, RunDir(run_path), batches, lambda: None, 1)
    return config, model, trainer, held


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Time ``spec['steps']`` training steps of one model at one size (in this process)."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="train_throughput_") as tmp:
        config, model, trainer, held = prepare(spec, tmp)
        for batch in held[: spec["warmup"]]:
            run_step(trainer, batch)
        seconds = []
        for batch in held[spec["warmup"]:]:
            start = time.perf_counter()
            run_step(trainer, batch)
            seconds.append(time.perf_counter() - start)

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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                          stdout=subprocess.PIPE, env=env, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{PROG}: error: the {spec['model']} {spec['size_name']} measurement failed "
                         f"(exit status {done.returncode}; its messages are above)")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- command line

COLUMNS = [
    ("model", "model", ""), ("size_name", "size", ""), ("batch", "batch", "d"),
    ("target_tokens_per_second", "tgt tok/s", ",.0f"), ("sentences_per_second", "sent/s", ",.1f"),
    ("ms_per_step", "ms/step", ".1f"), ("peak_rss_mib", "peak RSS MiB", ",.0f"),
    ("gflop_per_token", "GFLOP/tok", ".4f"), ("gflops", "GFLOP/s", ".2f"),
    ("fraction_of_matmul", "of matmul", ".3f"),
]


def build_parser() -> argparse.ArgumentParser:
    from keras_nmt.cli.common import OneLineParser, positive_int

    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="corpus directory with train.SRC/train.TGT (required)")
    parser.add_argument("--src-lang", dest="src", default="en")
    parser.add_argument("--tgt-lang", dest="tgt", default="fr")
    parser.add_argument("--models", default="search,encdec", help="search and/or encdec")
    parser.add_argument("--sizes", default="compact,paper", help="compact, paper or E/H/N/L@B, comma-separated")
    parser.add_argument("--vocab-size", type=positive_int, default=30000, help="shortlist per side")
    parser.add_argument("--max-len", type=positive_int, default=50)
    parser.add_argument("--warmup", type=positive_int, default=5, help="untimed steps first (tracing)")
    parser.add_argument("--steps", type=positive_int, default=50, help="timed steps")
    parser.add_argument("--matmul-repeats", type=positive_int, default=5)
    parser.add_argument("--in-process", action="store_true",
                        help="measure in this process (faster; peak RSS is then the process's so far)")
    parser.add_argument("--note", default="", help="stored in the JSON (e.g. 'under load')")
    parser.add_argument("--json", metavar="FILE", help="write the report here")
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
    try:
        sizes = [(name, parse_size(name)) for name in args.sizes.split(",") if name]
    except ValueError as error:
        parser.error(f"--sizes: {error}")
    if not sizes:
        parser.error("--sizes: give at least one size")

    from keras_nmt.corpus.readers import CorpusError

    try:
        corpus = _common.Corpus.scan(args.data, args.src, args.tgt, args.max_len, args.vocab_size)
    except (CorpusError, OSError) as error:
        parser.error(str(error))
    matmul = _common.matmul_flops(repeats=args.matmul_repeats)
    print(f"{PROG}: numpy float32 2048x2048 matmul: {matmul['flops_per_second'] / 1e9:.1f} GFLOP/s "
          f"(best of {args.matmul_repeats})", file=sys.stderr, flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="train_throughput_") as tmp:
        base = corpus_spec(corpus, tmp, args.src, args.tgt, args.max_len)
        for size_name, size in sizes:
            for model in models:
                spec = {**base, "model": model, "size_name": size_name, "size": size,
                        "warmup": args.warmup, "steps": args.steps}
                print(f"{PROG}: {model} {size_name}: {args.warmup} warm-up + {args.steps} timed steps",
                      file=sys.stderr, flush=True)
                result = measure(spec) if args.in_process else _child(spec)
                result["fraction_of_matmul"] = result["flops_per_second"] / matmul["flops_per_second"]
                results.append(result)
    report = {
        "benchmark": "train_throughput", "note": args.note, "machine": _common.machine(),
        "settings": {"data": str(corpus.path), "src": args.src, "tgt": args.tgt,
                     "vocab_size": args.vocab_size, "max_len": args.max_len,
                     "warmup_steps": args.warmup, "timed_steps": args.steps,
                     "in_process": args.in_process, "train": corpus.train,
                     "flops": "analytic, 3 x forward, real lengths; see the module docstring"},
        "matmul": matmul, "results": results,
    }
    rows = [{**r, "batch": r["config"]["batch_size"], "gflop_per_token": r["flops_per_target_token"] / 1e9,
             "gflops": r["flops_per_second"] / 1e9} for r in results]
    print(_common.table(rows, COLUMNS))
    print(f"matmul: {matmul['flops_per_second'] / 1e9:.1f} GFLOP/s; {_common.cpu_model()}, "
          f"{os.cpu_count()} cores" + (f"; {args.note}" if args.note else ""))
    _common.write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
