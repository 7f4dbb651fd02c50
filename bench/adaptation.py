"""Adaptation to a new domain against training on it from scratch, for the same minutes.

Usage (one command; prints a table, writes JSON and the curve as a PNG)::

    python -m bench.adaptation --parent PARENT_RUN --data NEW_DATA --minutes 1,2,5,10 \\
        [--scratch] [--mix F] [--pull S] [--freeze PARTS] \\
        [--also-report NAME=SRC,REF] [--out bench-adaptation] [--seed N]

For each number of minutes M of ``--minutes``, one child run: ``keras-nmt train
--init-from PARENT_RUN --data NEW_DATA --max-minutes M`` (a child's defaults: the
parent's recipe without its warm-up; with ``--mix``, ``--set parent_pull``, ``--freeze``
when given), and with ``--scratch`` one run
from nothing: ``keras-nmt train --data NEW_DATA --preset budget --max-minutes M``. Each
is scored by its own report (the reported half of NEW_DATA's development split, beam 5),
and by ``--also-report`` splits (e.g. the parent's domain, to see what adaptation
forgets); the parent is scored on the same splits once. Runs are trained one after the
other, each alone, through ``keras-nmt train`` itself.

Written to ``--out``: ``runs/`` (the run directories), ``adaptation.json`` (unless
``--json`` puts it elsewhere) and ``adaptation.png`` (BLEU against minutes, adapted and
from scratch, the parent's as a line), with the share of the new test split's source
tokens outside the parent's and the child's source vocabularies. Resumable: a run with a ``summary.json`` is not
trained again.
"""

from __future__ import annotations

import json
import pathlib
import sys

from bench import _common

PROG = "adaptation"


def build_parser():
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("--parent", required=True, help="the parent run directory")
    parser.add_argument("--data", required=True, help="the new domain's data directory")
    parser.add_argument("--minutes", type=lambda t: [float(x) for x in t.split(",")],
                        default=[1.0, 2.0, 5.0, 10.0], help="training minutes (default 1,2,5,10)")
    parser.add_argument("--scratch", action="store_true", help="also train from scratch")
    parser.add_argument("--mix", help="keras-nmt train --mix for the children")
    parser.add_argument("--pull", type=float, help="--set parent_pull=S for the children")
    parser.add_argument("--freeze", help="--freeze for the children")
    parser.add_argument("--also-report", action="append", default=[], metavar="NAME=SRC,REF",
                        help="further development splits every run is scored on")
    parser.add_argument("--seed", type=int, help="keras-nmt train --seed")
    parser.add_argument("--out", default="bench-adaptation", help="output directory")
    return parser


def child_argv(args, minutes: float, out: pathlib.Path) -> list[str]:
    argv = ["--init-from", args.parent, "--data", args.data, "--out", str(out),
            "--max-minutes", f"{minutes:g}"]
    if args.mix:
        argv += ["--mix", args.mix]
    if args.pull is not None:
        argv += ["--set", f"parent_pull={args.pull:g}"]
    if args.freeze:
        argv += ["--freeze", args.freeze]
    return argv + _shared(args)


def scratch_argv(args, minutes: float, out: pathlib.Path) -> list[str]:
    return ["--data", args.data, "--out", str(out), "--preset", "budget",
            "--max-minutes", f"{minutes:g}"] + _shared(args)


def _shared(args) -> list[str]:
    argv = [item for split in args.also_report for item in ("--also-report", split)]
    return argv + (["--seed", str(args.seed)] if args.seed is not None else [])


def scores(run: pathlib.Path) -> dict:
    """BLEU of a finished run's report and of its further splits."""
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    found = {"bleu": summary["held_out"]["bleu"], "updates": summary["updates"],
             "epochs": summary.get("epochs")}
    for name, other in (summary.get("also_reported") or {}).items():
        found[f"bleu_{name}"] = other["bleu"]
    return found


def parent_scores(args, run: pathlib.Path) -> dict:
    """The parent's BLEU on the split ``run`` reported on (the new domain's test split, or
    the reported half of its development split) and on the further splits."""
    from keras_nmt.evaluation.scoring import bleu, read_parallel
    from keras_nmt.decoding.keras_translator import Translator

    translator = Translator.from_run_dir(args.parent)
    test = json.loads((run / "data.json").read_text(encoding="utf-8"))["splits"]["test"]
    splits = {"bleu": tuple(run / test[side] for side in ("source", "target"))}
    for item in args.also_report:
        name, files = item.split("=", 1)
        splits[f"bleu_{name}"] = tuple(files.split(",", 1))
    found = {}
    for key, (src, ref) in splits.items():
        sources, references = read_parallel(src, ref)
        hypotheses = [t.text for t in translator.translate(sources, beam_size=5, batch_size=64)]
        found[key] = bleu(hypotheses, references)[0]
    return found


def source_oov(run: pathlib.Path, test_run: pathlib.Path) -> float:
    """The share of source tokens of the split ``test_run`` reported on that ``run``'s
    source vocabulary lacks."""
    from keras_nmt.evaluation.scoring import read_parallel
    from keras_nmt.rundir.run_directory import RunDir

    codec = RunDir(run).inspect("last").source_codec
    test = json.loads((test_run / "data.json").read_text(encoding="utf-8"))["splits"]["test"]
    sources, _ = read_parallel(test_run / test["source"], test_run / test["target"])
    tokens = [token for line in sources for token in codec.tokenize(line)]
    return sum(token not in codec.vocabulary for token in tokens) / max(len(tokens), 1)


def draw(rows: list[dict], parent: dict, path: pathlib.Path) -> None:
    """BLEU against minutes: on the new domain, adapted and from scratch, the parent's as
    a line; beside it, with --also-report, each further split's BLEU of the adapted runs
    against the parent's (what adaptation forgets of the parent's domain)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({key[len("bleu_"):] for row in rows for key in row
                    if key.startswith("bleu_")})
    figure, panels = plt.subplots(1, 2 if names else 1, figsize=(11 if names else 6, 4),
                                  squeeze=False)
    axes = panels[0][0]
    for kind, marker in (("adapted", "o"), ("scratch", "s")):
        points = sorted((r["minutes"], r["bleu"]) for r in rows if r["kind"] == kind)
        if points:
            axes.plot(*zip(*points), marker=marker, label=f"{kind}")
    axes.axhline(parent["bleu"], color="gray", linestyle=":", label="parent, not adapted")
    axes.set_xlabel("training minutes")
    axes.set_ylabel("BLEU, new domain (reported half)")
    axes.legend()
    axes.grid(alpha=0.3)
    if names:
        axes = panels[0][1]
        for i, name in enumerate(names):
            color = f"C{i + 2}"
            points = sorted((r["minutes"], r[f"bleu_{name}"]) for r in rows
                            if r["kind"] == "adapted" and f"bleu_{name}" in r)
            axes.plot(*zip(*points), marker="o", color=color, label=f"{name}, adapted")
            if f"bleu_{name}" in parent:
                axes.axhline(parent[f"bleu_{name}"], color=color, linestyle=":",
                             label=f"{name}, parent")
        axes.set_xlabel("training minutes")
        axes.set_ylabel("BLEU, further splits (--also-report)")
        axes.legend()
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    from keras_nmt.cli import train

    out = pathlib.Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    rows = []
    kinds = [("adapted", child_argv)] + ([("scratch", scratch_argv)] if args.scratch else [])
    for minutes in args.minutes:
        for kind, make in kinds:
            run = out / "runs" / f"{kind}-{minutes:g}min"
            if not (run / "summary.json").is_file():
                argv = make(args, minutes, run)
                bench.log("keras-nmt train " + " ".join(argv))
                if train.main(argv) != 0:
                    raise SystemExit(f"{PROG}: error: training {run} failed")
            rows.append({"kind": kind, "minutes": minutes, **scores(run)})
            bench.log(f"{kind} {minutes:g} min: {rows[-1]}")
    first = out / "runs" / f"adapted-{args.minutes[0]:g}min"
    parent = parent_scores(args, first)
    oov = {"parent": source_oov(pathlib.Path(args.parent), first),
           "child": source_oov(first, first)}
    bench.log(f"parent: {parent}; source OOV rate of the new domain's test split: {oov}")
    draw(rows, parent, out / "adaptation.png")
    keys = sorted({k for r in rows for k in r if k.startswith("bleu")})
    print(_common.table(rows, [("kind", "run", ""), ("minutes", "minutes", "g")]
                        + [(k, k.replace("bleu_", "BLEU ") if k != "bleu" else "BLEU", ".2f")
                           for k in keys]))
    bench.write({"parent": parent, "source_oov": oov, "runs": rows},
                {"parent": args.parent, "data": args.data, "minutes": args.minutes,
                 "mix": args.mix, "pull": args.pull, "freeze": args.freeze,
                 "also_report": args.also_report, "seed": args.seed},
                path=args.json or out / "adaptation.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
