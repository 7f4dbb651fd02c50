"""Peak memory of a short training run as the corpus grows: the corpus is streamed.

For each ``--copies`` factor R, a copy of the corpus whose training files hold the
original R times over is written under ``--tmp`` (R=1 links the original files), with
the first ``--valid-lines`` lines of its valid files, and ``keras-nmt train`` runs
``--steps`` updates on it in a fresh process (vocabulary scan, training, held-out
translation of the valid lines) at the medium size (``--size medium``: 256/256/256/128,
Adam 2e-3, batch 64) with 30,000-word shortlists. The process reports its own peak
resident set size (ru_maxrss).

Usage::

    python -m experiments.stream_memory --data data/anki-fra-eng --copies 1,10 \\
        --json bench-memory.json

Prints a table and writes JSON (machine, versions, command, every figure). Nothing is
written into the repository; the copies are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

from bench import _common

PROG = "experiments.stream_memory"
TRAIN_ARGS = [
    "--variant", "search50", "--quiet", "--size", "medium",
    "--set", "eval_every=100000", "--set", "checkpoint_every=100000",
]


def copy_corpus(source: pathlib.Path, target: pathlib.Path, copies: int, valid_lines: int,
                langs: tuple[str, str]) -> int:
    """Write the corpus with its training files ``copies`` times over; returns the size
    of the training files in bytes."""
    target.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        train = source / f"train.{lang}"
        out = target / f"train.{lang}"
        out.unlink(missing_ok=True)
        if copies == 1:
            out.symlink_to(train.resolve())
        else:
            with open(out, "wb") as f:
                for _ in range(copies):
                    with open(train, "rb") as g:
                        shutil.copyfileobj(g, f, 1 << 20)
        with open(source / f"valid.{lang}", encoding="utf-8") as f:
            lines = [line for _, line in zip(range(valid_lines), f)]
        (target / f"valid.{lang}").write_text("".join(lines), encoding="utf-8")
    return sum((target / f"train.{lang}").stat().st_size for lang in langs)


def child(argv: list[str]) -> int:
    """Run keras-nmt train in this process, then print this process's peak RSS."""
    from keras_nmt.cli import train as train_cli

    seconds, status = _common.timed(lambda: train_cli.main(argv))
    print(json.dumps({"status": status, "peak_rss_mib": _common.peak_rss_mib(),
                      "seconds": seconds}))
    return status


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", required=True, type=pathlib.Path)
    _common.add(parser, "copies")
    _common.add(parser, "steps", default=200, help="training updates (default 200)")
    parser.add_argument("--valid-lines", type=int, default=200,
                        help="valid lines of each copy (default 200)")
    parser.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/keras-nmt-stream-memory"),
                        help="where the copies and runs go (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the copies and runs")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv, libraries=("tensorflow", "keras"))

    rows = []
    print(f"{'copies':>6} {'train pairs':>12} {'train MB':>9} {'peak RSS MiB':>13} {'seconds':>8}")
    try:
        for copies in args.copies:
            corpus = args.tmp / f"x{copies}"
            size = copy_corpus(args.data, corpus, copies, args.valid_lines, ("en", "fr"))
            with open(corpus / "train.en", "rb") as f:
                pairs = sum(1 for _ in f)
            run_dir = args.tmp / f"run-x{copies}"
            shutil.rmtree(run_dir, ignore_errors=True)
            train_args = [*TRAIN_ARGS, "--data", str(corpus), "--out", str(run_dir),
                          "--max-steps", str(args.steps)]
            try:
                figures = _common.run_child(PROG, "--child", *train_args)
            except _common.ChildFailed as error:
                print(error, file=sys.stderr)
                return 1
            rows.append({"copies": copies, "train_pairs": pairs, "train_bytes": size, **figures,
                         "command": f"keras-nmt train {' '.join(train_args)}"})
            print(f"{copies:>6} {pairs:>12,} {size / 1e6:>9.1f} {figures['peak_rss_mib']:>13.0f} "
                  f"{figures['seconds']:>8.0f}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.tmp, ignore_errors=True)
    bench.write(rows, {"data": str(args.data), "steps": args.steps, "train_args": TRAIN_ARGS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
