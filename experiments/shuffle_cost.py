"""What a whole-corpus permutation per epoch costs against a streaming shuffle buffer.

For each ``--copies`` factor R (a copy of the corpus whose training files hold it R
times over, as experiments.stream_memory writes it) and each order (``permuted``:
shuffle_buffer=0, the default; ``streamed``: a 10,000-pair buffer), a fresh process
builds the training pipeline of ``keras_nmt.data.pipelines`` and takes ``--batches`` batches.
Reported: seconds to the first batch (start-up: reading the corpus into memory, or
filling the buffer), seconds for the rest, the process's peak RSS, and the size of a
checkpoint of the pipeline.

    python -m experiments.shuffle_cost --data data/anki-fra-eng --copies 1,10 \\
        --json shuffle-cost.json
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile

from bench import _common
from experiments.stream_memory import copy_corpus

PROG = "experiments.shuffle_cost"
ORDERS = {"permuted": 0, "streamed": 10_000}


def child(corpus: str, order: str, batches: int) -> int:
    """Build the pipeline, time the first and the next batches, checkpoint it, report."""
    import tensorflow as tf

    from keras_nmt.data import pipelines as data
    from keras_nmt.core.constants import RESERVED
    from keras_nmt.corpus.readers import find_corpus
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.text.vocab import Vocabulary

    files = find_corpus(pathlib.Path(corpus), "en", "fr")["train"]
    encoder = WordEncoder(Vocabulary(list(RESERVED)), "en")  # the order is what is timed
    first, iterator = _common.timed(lambda: iter(data.training_batches(
        files, encoder, encoder, data.Batching(max_len=50, batch_size=64, sort_batches=20,
                                               seed=1, shuffle_buffer=ORDERS[order]),
    )))
    first += _common.timed(lambda: next(iterator))[0]
    rest, _ = _common.timed(lambda: [next(iterator) for _ in range(batches - 1)])
    directory = pathlib.Path(tempfile.mkdtemp())
    tf.train.Checkpoint(iterator=iterator).write(str(directory / "ckpt"))
    checkpoint = sum(p.stat().st_size for p in directory.iterdir())
    shutil.rmtree(directory)
    print(json.dumps({"first_batch_seconds": first, "next_batches_seconds": rest,
                      "peak_rss_mib": _common.peak_rss_mib(), "checkpoint_bytes": checkpoint}))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2], int(argv[3]))
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", required=True, type=pathlib.Path)
    _common.add(parser, "copies")
    _common.add(parser, "batches", default=200, help="batches taken (default 200)")
    parser.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/keras-nmt-shuffle-cost"),
                        help="where the copies go (default %(default)s)")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv, libraries=("tensorflow",))
    rows = []
    try:
        for copies in args.copies:
            corpus = args.tmp / f"x{copies}"
            size = copy_corpus(args.data, corpus, copies, 10, ("en", "fr"))
            for order in ORDERS:
                try:
                    figures = _common.run_child(PROG, "--child", str(corpus), order,
                                                str(args.batches), TF_CPP_MIN_LOG_LEVEL="3")
                except _common.ChildFailed as error:
                    print(error, file=sys.stderr)
                    return 1
                rows.append({"copies": copies, "train_bytes": size, "order": order, **figures})
                bench.log(f"x{copies} {order}: {figures}")
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)
    print(_common.table(rows, [
        ("copies", "copies", "d"), ("order", "order", "s"), ("train_bytes", "train bytes", ",d"),
        ("first_batch_seconds", "first batch s", ".1f"), ("next_batches_seconds", "next batches s", ".1f"),
        ("peak_rss_mib", "peak RSS MiB", ",.0f"), ("checkpoint_bytes", "checkpoint bytes", ",d"),
    ]))
    bench.write(rows, {"data": str(args.data), "batches": args.batches})
    return 0


if __name__ == "__main__":
    sys.exit(main())
