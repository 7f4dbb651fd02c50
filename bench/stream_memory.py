"""Peak memory of a short training run as the corpus grows: the corpus is streamed.

For each ``--repeat`` factor R, a copy of the corpus whose training files hold the
original R times over is written under ``--tmp`` (R=1 links the original files), with
the first ``--valid-lines`` lines of its valid files, and ``train.py`` runs ``--steps``
updates on it in a fresh process (vocabulary scan, training, held-out translation of
the valid lines). The process reports its own peak resident set size (ru_maxrss).

Usage::

    PYTHONPATH=. python bench/stream_memory.py --corpus data/anki-fra-eng \\
        --repeat 1,10 --json bench-memory.json

Prints a table and writes JSON (machine, versions, command, every figure). Nothing is
written into the repository; the copies are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The README's real-corpus compact size, 30,000-word shortlists (the default), batch 64.
TRAIN_ARGS = [
    "--variant", "search50", "--quiet",
    "--set", "embedding=256", "--set", "hidden=256", "--set", "attention=256", "--set", "maxout=128",
    "--set", "optimizer=adam", "--set", "learning_rate=2e-3", "--set", "batch_size=64",
    "--set", "eval_every=100000", "--set", "checkpoint_every=100000",
]


def copy_corpus(source: pathlib.Path, target: pathlib.Path, repeat: int, valid_lines: int,
                langs: tuple[str, str]) -> int:
    """Write the R-times corpus; returns the size of one training file copy in bytes."""
    target.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        train = source / f"train.{lang}"
        out = target / f"train.{lang}"
        out.unlink(missing_ok=True)
        if repeat == 1:
            out.symlink_to(train.resolve())
        else:
            with open(out, "wb") as f:
                for _ in range(repeat):
                    with open(train, "rb") as g:
                        shutil.copyfileobj(g, f, 1 << 20)
        with open(source / f"valid.{lang}", encoding="utf-8") as f:
            lines = [line for _, line in zip(range(valid_lines), f)]
        (target / f"valid.{lang}").write_text("".join(lines), encoding="utf-8")
    return sum((target / f"train.{lang}").stat().st_size for lang in langs)


def child(argv: list[str]) -> int:
    """Run train.py's main in this process, then print this process's peak RSS."""
    sys.path.insert(0, str(ROOT))
    from keras_nmt.cli import train as train_cli

    start = time.monotonic()
    status = train_cli.main(argv)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"status": status, "peak_rss_mib": peak_kib / 1024,
                      "seconds": time.monotonic() - start}))
    return status


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=pathlib.Path, required=True)
    parser.add_argument("--repeat", default="1,10")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--valid-lines", type=int, default=200)
    parser.add_argument("--tmp", type=pathlib.Path, default=pathlib.Path("/tmp/keras-nmt-stream-memory"))
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)

    from _common import machine  # bench/_common.py, beside this file

    results = {"machine": machine(),
               "corpus": str(args.corpus), "steps": args.steps, "train_args": TRAIN_ARGS, "runs": []}
    print(f"{'repeat':>6} {'train pairs':>12} {'train MB':>9} {'peak RSS MiB':>13} {'seconds':>8}")
    try:
        for repeat in (int(r) for r in args.repeat.split(",")):
            corpus = args.tmp / f"x{repeat}"
            size = copy_corpus(args.corpus, corpus, repeat, args.valid_lines, ("en", "fr"))
            with open(corpus / "train.en", "rb") as f:
                pairs = sum(1 for _ in f)
            run_dir = args.tmp / f"run-x{repeat}"
            shutil.rmtree(run_dir, ignore_errors=True)
            train_args = [*TRAIN_ARGS, "--data", str(corpus), "--out", str(run_dir),
                          "--max-steps", str(args.steps)]
            done = subprocess.run(
                [sys.executable, __file__, "--child", *train_args],
                capture_output=True, text=True, cwd=ROOT,
            )
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            row = {"repeat": repeat, "train_pairs": pairs, "train_bytes": size, **figures,
                   "command": f"python train.py {' '.join(train_args)}"}
            results["runs"].append(row)
            print(f"{repeat:>6} {pairs:>12,} {size / 1e6:>9.1f} {figures['peak_rss_mib']:>13.0f} "
                  f"{figures['seconds']:>8.0f}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
