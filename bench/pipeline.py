"""The training input pipeline: padding efficiency and its cost in training speed.

Padding efficiency is real tokens / padded slots of the batches ``data.training_batches``
makes (source ids, and decoder outputs for the target), over the first ``--batches``
batches, for each corpus and each batching setting (``--batch-sizes`` sentences, and
``--batch-tokens`` token budgets). It does not depend on machine load.

Pipeline overhead (``--overhead``): training steps/s of the Trainer's compiled step fed
by the real pipeline (files -> tokenizer -> bucketing, streamed) against the same
batches taken beforehand and held in memory. The two conditions alternate in blocks
(A B A B ...) so that a changing machine load hits both alike; the ratio of their
total times is the overhead.

Usage::

    PYTHONPATH=. python bench/pipeline.py --corpus data/anki-fra-eng \\
        --corpus data/multi30k-en-fr --overhead --json bench-pipeline.json

Prints a table; writes every figure, the configuration, the machine and the library
versions as JSON.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from keras_nmt import config as config_lib
from keras_nmt import data
from keras_nmt.experiment import mean_pair_length
from keras_nmt.text.word_graph import WordEncoder

import _common  # bench/_common.py, beside this file
from _common import machine

# The compact real-corpus size of the README's Anki runs.
COMPACT_REAL = {"embedding": 256, "hidden": 256, "attention": 256, "maxout": 128,
                "optimizer": "adam", "learning_rate": 2e-3, "batch_size": 64}


class Corpus:
    """A corpus directory scanned once (``_common.Corpus.scan``) and its graph encoders."""

    def __init__(self, path: pathlib.Path, src: str, tgt: str, max_len: int, vocab_size: int):
        scanned = _common.Corpus.scan(path, src, tgt, max_len, vocab_size)
        self.path, self.max_len = scanned.path, max_len
        self.splits, self.train = scanned.splits, scanned.train
        self.source_encoder = WordEncoder(scanned.source_vocab, src)
        self.target_encoder = WordEncoder(scanned.target_vocab, tgt)

    def batches(self, batch_size: int, batch_tokens: int = 0, seed: int = 1234) -> tf.data.Dataset:
        return data.training_batches(
            self.splits["train"], self.source_encoder, self.target_encoder,
            max_len=self.max_len, batch_size=batch_size, sort_batches=20, seed=seed,
            batch_tokens=batch_tokens, mean_length=mean_pair_length(self.train),
            shuffle_buffer=10_000,  # the streaming order its published figures were measured with
        )


def padding_efficiency(batches: tf.data.Dataset, count: int) -> dict:
    real = {"source": 0, "target": 0}
    slots = {"source": 0, "target": 0}
    rows = []
    for (source, _), target_out in batches.take(count):
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


def pipeline_overhead(corpus: Corpus, settings: dict, steps: int, block: int) -> dict:
    """Steps/s fed by the pipeline (A) against the same batches held in memory (B)."""
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir
    from keras_nmt.training import Trainer

    cfg = config_lib.variant_config("search50", settings).replace(
        src_vocab_size=corpus.source_encoder.vocab_size, tgt_vocab_size=corpus.target_encoder.vocab_size)
    model = TranslationModel(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, model, RunDir(tmp), corpus.batches(cfg.batch_size), lambda: None, 1)
        held = list(corpus.batches(cfg.batch_size).take(steps))  # the same batches, in order

        def run(batch) -> None:
            (source, target_in), target_out = batch
            float(trainer.train_step(source, target_in, target_out)[0])

        run(held[0])  # trace once, outside the timing
        run(next(trainer.iterator))
        times = {"pipeline": 0.0, "memory": 0.0}
        done = {"pipeline": 0, "memory": 0}
        for start in range(1, steps - block + 1, block):
            for condition in ("pipeline", "memory"):
                begin = time.perf_counter()
                for i in range(start, start + block):
                    run(next(trainer.iterator) if condition == "pipeline" else held[i])
                times[condition] += time.perf_counter() - begin
                done[condition] += block
    rate = {c: done[c] / times[c] for c in times}
    return {
        "steps_per_condition": done["pipeline"], "block": block,
        "pipeline_steps_per_s": rate["pipeline"], "memory_steps_per_s": rate["memory"],
        "overhead": times["pipeline"] / times["memory"] - 1.0,
        "config": cfg.to_dict(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", required=True, type=pathlib.Path)
    parser.add_argument("--src-lang", dest="src", default="en")
    parser.add_argument("--tgt-lang", dest="tgt", default="fr")
    parser.add_argument("--max-len", type=int, default=50)
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--batches", type=int, default=400, help="batches measured per setting")
    parser.add_argument("--batch-sizes", default="80,64")
    parser.add_argument("--batch-tokens", default="1024,2048")
    parser.add_argument("--overhead", action="store_true", help="also time the pipeline (first corpus)")
    parser.add_argument("--steps", type=int, default=201, help="timed steps per overhead condition + 1")
    parser.add_argument("--block", type=int, default=20, help="steps per A/B block")
    parser.add_argument("--note", default="", help="stored in the JSON (e.g. 'under load')")
    parser.add_argument("--json", type=pathlib.Path, help="write the results here")
    args = parser.parse_args(argv)

    results = {"machine": machine(), "note": args.note, "padding": [], "overhead": None,
               "settings": {"max_len": args.max_len, "vocab_size": args.vocab_size,
                            "sort_batches": 20, "batches_measured": args.batches}}
    print(f"{'corpus':<20} {'batching':<18} {'src eff':>8} {'tgt eff':>8} {'sent/batch':>10} {'tgt tok/batch':>13}")
    corpora = []
    for path in args.corpus:
        corpus = Corpus(path, args.src, args.tgt, args.max_len, args.vocab_size)
        corpora.append(corpus)
        settings = [(f"batch_size={b}", int(b), 0) for b in args.batch_sizes.split(",") if b]
        settings += [(f"batch_tokens={t}", 80, int(t)) for t in args.batch_tokens.split(",") if t]
        for name, batch_size, batch_tokens in settings:
            figures = padding_efficiency(corpus.batches(batch_size, batch_tokens), args.batches)
            results["padding"].append({"corpus": path.name, "batching": name, **figures,
                                       "train": corpus.train})
            print(f"{path.name:<20} {name:<18} {figures['source']:>8.3f} {figures['target']:>8.3f} "
                  f"{figures['sentences_per_batch']:>10.1f} {figures['target_tokens_per_batch']:>13.1f}",
                  flush=True)
    if args.overhead:
        overhead = pipeline_overhead(corpora[0], COMPACT_REAL, args.steps, args.block)
        overhead["corpus"] = corpora[0].path.name
        results["overhead"] = overhead
        print(f"\npipeline overhead on {corpora[0].path.name} (search50 256/256/256/128, batch 64, "
              f"{overhead['steps_per_condition']} steps per condition, A/B blocks of {args.block}):")
        print(f"  real pipeline {overhead['pipeline_steps_per_s']:.3f} steps/s, batches in memory "
              f"{overhead['memory_steps_per_s']:.3f} steps/s, overhead {100 * overhead['overhead']:+.1f}%")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
