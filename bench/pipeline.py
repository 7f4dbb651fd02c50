"""The training input pipeline: padding efficiency and its cost in training speed.

Padding efficiency is real tokens / padded slots of the batches ``data.training_batches``
makes (source ids, and decoder outputs for the target), over the first ``--batches``
batches, for each corpus and each batching setting (``--batch-sizes`` sentences, and
``--batch-tokens`` token budgets). It does not depend on machine load.

Pipeline overhead (``--overhead``): training steps/s of the Trainer's compiled step fed
by the real pipeline (files -> tokenizer -> bucketing, streamed) against the same
batches taken beforehand and held in memory, at the medium size of ``keras-nmt train
--size``. The two conditions alternate in blocks (A B A B ...) so that a changing
machine load hits both alike; the ratio of their total times is the overhead.

Usage::

    python -m bench.pipeline --data data/anki-fra-eng \\
        --data data/multi30k-en-fr --overhead --json bench-pipeline.json

Prints a table; writes every figure, the configuration, the machine and the library
versions as JSON.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

from bench import _common

PROG = "pipeline"
# The streaming order the published figures were measured with.
SHUFFLE_BUFFER = 10_000


def batches(corpus: _common.Corpus, batch_size: int, batch_tokens: int = 0, seed: int = 1234):
    """The training batches of ``corpus``, as training makes them."""
    from keras_nmt.data import pipelines as data

    return data.training_batches(
        corpus.splits["train"], *corpus.encoders(), data.Batching(
            max_len=corpus.max_len, batch_size=batch_size, sort_batches=20, seed=seed,
            shuffle_buffer=SHUFFLE_BUFFER, batch_tokens=batch_tokens,
            mean_length=data.mean_pair_length(corpus.train)),
    )


def padding_efficiency(dataset, count: int) -> dict:
    import numpy as np

    real = {"source": 0, "target": 0}
    slots = {"source": 0, "target": 0}
    rows = []
    for (source, _), target_out in dataset.take(count):
        for side, ids in (("source", source), ("target", target_out)):
            ids = ids.numpy()
            real[side] += int(np.count_nonzero(ids))
            slots[side] += ids.size
        rows.append(int(source.shape[0]))
    return {
        "batches": count,
        "source": real["source"] / slots["source"],
        "target": real["target"] / slots["target"],
        "sentences_per_batch": float(np.mean(rows)),
        "target_tokens_per_batch": real["target"] / count,
    }


def pipeline_overhead(corpus: _common.Corpus, steps: int, block: int) -> dict:
    """Steps/s fed by the pipeline (A) against the same batches held in memory (B)."""
    from keras_nmt.core import config as config_lib

    source_encoder, target_encoder = corpus.encoders()
    cfg = config_lib.variant_config("search50", _common.model_size("medium")).replace(
        src_vocab_size=source_encoder.vocab_size, tgt_vocab_size=target_encoder.vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = _common.new_trainer(cfg, batches(corpus, cfg.batch_size), tmp)
        held = list(batches(corpus, cfg.batch_size).take(steps))  # the same batches, in order

        def run(batch) -> None:
            _common.train_step(trainer, batch)

        run(held[0])  # trace once, outside the timing
        run(next(trainer.iterator))
        times = {"pipeline": 0.0, "memory": 0.0}
        done = {"pipeline": 0, "memory": 0}
        for start in range(1, steps - block + 1, block):
            for condition in ("pipeline", "memory"):
                def one_block(start=start, condition=condition):
                    for i in range(start, start + block):
                        run(next(trainer.iterator) if condition == "pipeline" else held[i])

                times[condition] += _common.timed(one_block)[0]
                done[condition] += block
    rate = {c: done[c] / times[c] for c in times}
    return {
        "steps_per_condition": done["pipeline"], "block": block,
        "pipeline_steps_per_s": rate["pipeline"], "memory_steps_per_s": rate["memory"],
        "overhead": times["pipeline"] / times["memory"] - 1.0,
        "config": cfg.to_dict(),
    }


def build_parser():
    from keras_nmt.cli.common import positive_int

    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", action="append", required=True,
                help="a corpus directory (repeatable; --overhead times the first)")
    _common.add(parser, "src_lang")
    _common.add(parser, "tgt_lang")
    _common.add(parser, "max_len")
    _common.add(parser, "vocab_size")
    _common.add(parser, "batches", default=400, help="batches measured per setting (default 400)")
    _common.add(parser, "batch_sizes", default="80,64", help="batch sizes (default 80,64)")
    parser.add_argument("--batch-tokens", type=_common.int_list, default="1024,2048",
                        metavar="N,...", help="token budgets of a batch (default 1024,2048)")
    parser.add_argument("--overhead", action="store_true", help="also time the pipeline (first corpus)")
    _common.add(parser, "steps", default=201, help="timed steps per overhead condition + 1 "
                "(default 201)")
    parser.add_argument("--block", type=positive_int, default=20,
                        help="steps per A/B block (default 20)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    results = {"padding": [], "overhead": None}
    print(f"{'corpus':<20} {'batching':<18} {'src eff':>8} {'tgt eff':>8} {'sent/batch':>10} {'tgt tok/batch':>13}")
    corpora = []
    for path in map(pathlib.Path, args.data):
        corpus = _common.Corpus.scan(path, args.src, args.tgt, args.max_len, args.vocab_size)
        corpora.append(corpus)
        settings = [(f"batch_size={b}", b, 0) for b in args.batch_sizes]
        settings += [(f"batch_tokens={t}", 80, t) for t in args.batch_tokens]
        for name, batch_size, batch_tokens in settings:
            figures = padding_efficiency(batches(corpus, batch_size, batch_tokens), args.batches)
            results["padding"].append({"corpus": path.name, "batching": name, **figures,
                                       "train": corpus.train})
            print(f"{path.name:<20} {name:<18} {figures['source']:>8.3f} {figures['target']:>8.3f} "
                  f"{figures['sentences_per_batch']:>10.1f} {figures['target_tokens_per_batch']:>13.1f}",
                  flush=True)
    if args.overhead:
        overhead = pipeline_overhead(corpora[0], args.steps, args.block)
        overhead["corpus"] = corpora[0].path.name
        results["overhead"] = overhead
        print(f"\npipeline overhead on {corpora[0].path.name} (search50 256/256/256/128, batch 64, "
              f"{overhead['steps_per_condition']} steps per condition, A/B blocks of {args.block}):")
        print(f"  real pipeline {overhead['pipeline_steps_per_s']:.3f} steps/s, batches in memory "
              f"{overhead['memory_steps_per_s']:.3f} steps/s, overhead {100 * overhead['overhead']:+.1f}%")
    bench.write(results, {"max_len": args.max_len, "vocab_size": args.vocab_size,
                          "sort_batches": 20, "batches_measured": args.batches,
                          "shuffle_buffer": SHUFFLE_BUFFER})
    return 0


if __name__ == "__main__":
    sys.exit(main())
