"""Translation quality of RNNsearch against RNNencdec for the same training time.

Usage (one command; prints a table, writes Markdown, JSON and Fig. 2)::

    PYTHONPATH=. python bench/quality.py --data data/anki-fra-eng --minutes 30 \\
        [--out bench-quality] [--optimizer adam --learning-rate 2e-3] [--beam 5] \\
        [--recipe budget] [--set KEY=VALUE ...]

Trains RNNsearch-50 and then RNNencdec-50 (``--models``), one after the other, each for
``--minutes`` of training (``experiment.train`` with ``max_minutes``: its clock counts
training only, summed over resumed sessions) at the compact size E=256, H=256, n'=256,
l=128 (``--dims``), shortlists of 30,000 words per side (``--vocab-size``), batch 64.
Default optimizer: Adam, learning rate 2e-3, what the README's Anki runs use. (On the
small built-in corpus 2e-3 had not made attention work within 700 updates where 5e-3
had; at 256 units on a real corpus 2e-3 is the tried setting. Change it with
``--learning-rate``.) ``--recipe budget`` applies ``config.RECIPES["budget"]`` over those
(its optimizer and rate win over ``--optimizer`` / ``--learning-rate``), and ``--set
KEY=VALUE`` (repeatable) comes last and wins: ``--recipe budget --set dropout=0`` is the
recipe without dropout, one row of the ablation in docs/benchmarks.md.

Each model is then scored on the valid split with beam ``--beam`` (5) and the run's
alpha by ``keras_nmt.evaluation.scoring.evaluate_run`` with the weights the run reported
(the averaged checkpoints when the config averages, else the best development weights;
``--weights`` picks others): BLEU and chrF
with their sacreBLEU signatures on All sentences and on the No-UNK subset (UNK forbidden
while decoding), and BLEU by source length.

Written to ``--out``: ``runs/VARIANT/`` (the run directories), ``eval-VARIANT.json``,
``quality.md`` (the table), ``quality.json`` (every figure, the settings, the machine),
and from ``keras_nmt.evaluation.plots.write_plots``: ``fig2_bleu_by_length.png`` / ``.csv``
(both models), ``table2.md`` and ``translations_*.txt``.

Resumable: run the same command again after a kill. A run with a checkpoint is resumed
(``--resume``: the next batch, the training clock where it stopped); a finished run
(summary.json, its budget used or stopped early) is not trained again, and an evaluation
already written for the same weights, beam and sentences is reused. A larger
``--minutes`` continues finished runs up to the new budget.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402

PROG = "quality"
MODELS = {"search": ("search50", "RNNsearch-50"), "encdec": ("encdec50", "RNNencdec-50")}


def build_parser():
    from keras_nmt.cli.common import OneLineParser, positive_float, positive_int
    from keras_nmt.config import RECIPES

    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="corpus directory (train and valid splits)")
    parser.add_argument("--minutes", type=positive_float, required=True,
                        help="training minutes for each model")
    parser.add_argument("--out", default="bench-quality", help="output directory (default %(default)s)")
    parser.add_argument("--src-lang", dest="src", default="en")
    parser.add_argument("--tgt-lang", dest="tgt", default="fr")
    parser.add_argument("--models", default="search,encdec")
    parser.add_argument("--dims", default="256/256/256/128", help="E/H/N/L (default %(default)s)")
    parser.add_argument("--vocab-size", type=positive_int, default=30000, help="shortlist per side")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--optimizer", default="adam", choices=("adam", "adadelta", "sgd"))
    parser.add_argument("--learning-rate", type=positive_float, default=2e-3)
    parser.add_argument("--beam", type=positive_int, default=5)
    parser.add_argument("--count", type=positive_int, help="score only the first N valid pairs")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--recipe", choices=tuple(RECIPES),
                        help="a training recipe of config.RECIPES, applied after the options above")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config field, applied last (repeatable)")
    parser.add_argument("--weights", choices=("best", "last", "averaged"),
                        help="weights to score (default: those the run reported)")
    parser.add_argument("--note", default="", help="stored in the JSON (e.g. 'under load')")
    return parser


def overrides(args) -> dict[str, Any]:
    from keras_nmt.config import RECIPES, ConfigError, parse_overrides

    try:
        embedding, hidden, attention, maxout = (int(x) for x in args.dims.split("/"))
    except ValueError:
        raise ValueError(f"--dims: expected E/H/N/L, got {args.dims!r}") from None
    values = {"embedding": embedding, "hidden": hidden, "attention": attention, "maxout": maxout,
              "src_vocab_size": args.vocab_size, "tgt_vocab_size": args.vocab_size,
              "batch_size": args.batch_size, "optimizer": args.optimizer,
              "learning_rate": args.learning_rate, "seed": args.seed}
    if args.recipe:
        values.update(RECIPES[args.recipe])
    try:
        values.update(parse_overrides(args.overrides))
    except ConfigError as error:
        raise ValueError(str(error)) from None
    return values


def finished(run_dir: pathlib.Path, minutes: float) -> bool:
    """Whether the run's summary says it used its budget (or stopped early)."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return False
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary["stop_reason"] == "early_stopping" or summary["wall_hours"] * 60 >= minutes


def train(args, variant: str, run_dir: pathlib.Path, values: dict[str, Any]) -> None:
    from keras_nmt import experiment
    from keras_nmt.rundir import RunDir

    if finished(run_dir, args.minutes):
        print(f"{PROG}: {variant}: already trained ({run_dir / 'summary.json'})", file=sys.stderr)
        return
    resume = RunDir(run_dir).has_checkpoint()
    if resume:
        # The shortlists were cut to the corpus's vocabulary when the run was made.
        values = {k: v for k, v in values.items() if k not in ("src_vocab_size", "tgt_vocab_size")}
    print(f"{PROG}: {variant}: {'resuming' if resume else 'training'} {run_dir} "
          f"({args.minutes:g} minutes of training)", file=sys.stderr, flush=True)
    experiment.train(experiment.TrainOptions(
        variant=variant, data=args.data, src=args.src, tgt=args.tgt, out=str(run_dir),
        max_minutes=args.minutes, overrides=values, resume=resume,
    ))


def evaluate(args, label: str, run_dir: pathlib.Path, out: pathlib.Path) -> dict[str, Any]:
    """evaluate_run on the valid split, or the stored result for the same weights."""
    from keras_nmt.evaluation import scoring
    from keras_nmt.progress import Progress
    from keras_nmt.rundir import RunDir
    from keras_nmt.translator import Translator

    run = RunDir(run_dir)
    info, config = run.load_data_info(), run.load_config()
    valid = run.split_files("valid", info, needed_for=PROG)
    if valid is None:
        raise ValueError(f"{args.data} has no valid split")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    weights = args.weights or summary.get("report_weights", "best")
    key = {"beam": args.beam, "count": args.count, "weights_step": summary.get("best_weights_step"),
           "updates": summary["updates"], "weights": weights}
    cache = out / f"eval-{config.variant}.json"
    if cache.is_file():
        stored = json.loads(cache.read_text(encoding="utf-8"))
        if stored.get("key") == key:
            print(f"{PROG}: {label}: evaluation reused ({cache})", file=sys.stderr)
            return stored["result"]
    sources, references = scoring.read_parallel(valid.source, valid.target)
    if args.count:
        sources, references = sources[: args.count], references[: args.count]
    result = scoring.evaluate_run(
        Translator.from_run_dir(run_dir, weights=weights), sources, references, beam_size=args.beam,
        alpha=config.length_alpha, progress=Progress(), label=label,
    )
    result.update(label=label, run_dir=str(run_dir), src_lang=info["src"], tgt_lang=info["tgt"],
                  weights=weights)
    _common.write_report(cache, {"key": key, "result": scoring.public(result)})
    return result


COLUMNS = [
    ("model", "model", ""), ("updates", "updates", "d"), ("epochs", "epochs", ".2f"),
    ("minutes", "minutes", ".1f"), ("bleu", "BLEU All", ".2f"), ("chrf", "chrF All", ".2f"),
    ("bleu_no_unk", "BLEU No-UNK", ".2f"), ("chrf_no_unk", "chrF No-UNK", ".2f"),
    ("no_unk_sentences", "No-UNK sent.", "d"), ("dev_nll", "dev NLL", ".2f"),
]


def markdown(rows: list[dict[str, Any]], results: list[dict[str, Any]], args) -> str:
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join("-" if row.get(k) is None else format(row[k], f)
                                       for k, _, f in COLUMNS) + " |")
    first = results[0]
    lines += ["", f"{first['sentences']} valid sentences, beam {args.beam}, alpha {first['alpha']:g}; "
              f"{args.minutes:g} minutes of training each.",
              f"BLEU: `{first['signatures']['bleu']}`; chrF: `{first['signatures']['chrf']}`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    if not models or any(m not in MODELS for m in models):
        parser.error(f"--models: expected search and/or encdec, got {args.models!r}")
    try:
        values = overrides(args)
    except ValueError as error:
        parser.error(str(error))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_nmt.evaluation import plots, scoring
    from keras_nmt.config import ConfigError
    from keras_nmt.corpus.readers import CorpusError
    from keras_nmt.rundir import RunDirError, write_text_atomic

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, rows = [], []
    for name in models:
        variant, label = MODELS[name]
        run_dir = out / "runs" / variant
        try:
            train(args, variant, run_dir, values)
            result = evaluate(args, label, run_dir, out)
        except (ConfigError, CorpusError, RunDirError, ValueError, OSError) as error:
            parser.error(f"{variant}: {error}")
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        results.append(result)
        rows.append({"model": label, "updates": summary["updates"], "epochs": summary["epochs"],
                     "minutes": summary["wall_hours"] * 60, "bleu": result["bleu"],
                     "chrf": result["chrf"], "bleu_no_unk": result["no_unk"]["bleu"],
                     "chrf_no_unk": result["no_unk"]["chrf"],
                     "no_unk_sentences": result["no_unk"]["sentences"], "dev_nll": summary["dev_nll"],
                     "weights": result["weights"],
                     "target_tokens_per_second": summary["target_tokens_per_second"],
                     "run_dir": str(run_dir)})
    table2 = [scoring.table2_row(r["label"], r, scoring.run_summary(r["run_dir"])) for r in results]
    files = plots.write_plots(results, out, table2)
    write_text_atomic(out / "quality.md", markdown(rows, results, args))
    report = {
        "benchmark": "quality", "note": args.note, "machine": _common.machine(),
        "settings": {"data": args.data, "minutes": args.minutes, "beam": args.beam, "count": args.count,
                     "recipe": args.recipe, "overrides": values},
        "models": rows, "evaluations": [scoring.public(r) for r in results],
        "files": {"markdown": str(out / "quality.md"), **files},
    }
    _common.write_report(out / "quality.json", report)
    print(_common.table(rows, COLUMNS))
    print(f"written: {out / 'quality.md'}, {out / 'quality.json'}, {files['fig2']['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
