"""What a whole-corpus permutation per epoch costs against a streaming shuffle buffer.

For each ``--repeat`` factor R (a copy of the corpus whose training files hold it R times
over, as bench/stream_memory.py writes it) and each order (``permuted``: shuffle_buffer=0,
the default; ``streamed``: a 10,000-pair buffer), a fresh process builds the training
pipeline of ``keras_nmt.data`` and takes ``--batches`` batches. Reported: seconds to the
first batch (start-up: reading the corpus into memory, or filling the buffer), seconds
for the rest, the process's peak RSS, and the size of a checkpoint of the pipeline.

    python bench/shuffle_cost.py --corpus data/anki-fra-eng --repeat 1,10 \\
        --json shuffle-cost.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402
from bench.stream_memory import copy_corpus  # noqa: E402

ORDERS = {"permuted": 0, "streamed": 10_000}


def child(corpus: str, order: str, batches: int) -> int:
    """Build the pipeline, time the first and the next batches, checkpoint it, report."""
    import tensorflow as tf

    from keras_nmt import data
    from keras_nmt.constants import RESERVED
    from keras_nmt.corpus.readers import find_corpus
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.vocab import Vocabulary

    files = find_corpus(pathlib.Path(corpus), "en", "fr")["train"]
    encoder = WordEncoder(Vocabulary(list(RESERVED)), "en")  # the order is what is timed
    start = time.perf_counter()
    iterator = iter(data.training_batches(
        files, encoder, encoder, max_len=50, batch_size=64, sort_batches=20, seed=1,
        shuffle_buffer=ORDERS[order],
    ))
    next(iterator)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(batches - 1):
        next(iterator)
    rest = time.perf_counter() - start
    directory = pathlib.Path(tempfile.mkdtemp())
    tf.train.Checkpoint(iterator=iterator).write(str(directory / "ckpt"))
    checkpoint = sum(p.stat().st_size for p in directory.iterdir())
    shutil.rmtree(directory)
    print(json.dumps({"first_batch_seconds": first, "next_batches_seconds": rest,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "checkpoint_bytes": checkpoint}))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2], int(argv[3]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=pathlib.Path, required=True)
    parser.add_argument("--repeat", default="1,10")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/keras-nmt-shuffle-cost"))
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    rows = []
    try:
        for repeat in (int(r) for r in args.repeat.split(",")):
            corpus = args.tmp / f"x{repeat}"
            size = copy_corpus(args.corpus, corpus, repeat, 10, ("en", "fr"))
            for order in ORDERS:
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(corpus), order, str(args.batches)],
                    capture_output=True, text=True, cwd=ROOT,
                    env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                )
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    return 1
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append({"repeat": repeat, "train_bytes": size, "order": order, **figures})
                print(f"x{repeat} {order}: {figures}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)
    print(_common.table(rows, [
        ("repeat", "repeat", "d"), ("order", "order", "s"), ("train_bytes", "train bytes", ",d"),
        ("first_batch_seconds", "first batch s", ".1f"), ("next_batches_seconds", "next batches s", ".1f"),
        ("peak_rss_mib", "peak RSS MiB", ",.0f"), ("checkpoint_bytes", "checkpoint bytes", ",d"),
    ]))
    if args.json:
        args.json.write_text(json.dumps({"machine": _common.machine(), "corpus": str(args.corpus),
                                         "batches": args.batches, "results": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
