"""Translation quality of RNNsearch against RNNencdec for the same training time.

Usage (one command; prints a table, writes Markdown, JSON and Fig. 2)::

    python -m bench.quality --data data/anki-fra-eng --minutes 30 \\
        [--out bench-quality] [--beam 5] [--size medium | --preset budget] \\
        [--recipe budget] [--set KEY=VALUE ...] [--seed N]

Trains RNNsearch-50 and then RNNencdec-50 (``--models``), one after the other, each for
``--minutes`` of training (``keras-nmt train --max-minutes``: its clock counts
training only, summed over resumed sessions). What is trained is chosen with the
options of ``keras-nmt train`` itself, passed through to it and spelled as it spells
them: ``--size`` (default ``medium``: E=256, H=256, n'=256, l=128, Adam 2e-3, batch 64,
what the README's Anki runs use, with the default 30,000-word shortlists per side),
``--preset``, ``--recipe``, ``--set KEY=VALUE`` (repeatable, last and winning) and
``--seed``. ``--recipe budget --set dropout=0`` is the recipe without dropout, one row
of the ablation in docs/benchmarks.md; ``--set learning_rate=1e-3`` another rate.

Each model is then scored on the split its run reports on (the test split, or the
development split's reported half; the valid split only when there is neither) with beam
``--beam`` (5) and the run's alpha by ``keras_nmt.evaluation.scoring.evaluate_run`` with
the weights the run reported
(the averaged checkpoints when the config averages, else the best development weights;
``--weights`` picks others): BLEU and chrF
with their sacreBLEU signatures on All sentences and on the No-UNK subset (UNK forbidden
while decoding), and BLEU by source length.

Written to ``--out``: ``runs/VARIANT/`` (the run directories), ``eval-VARIANT.json``,
``quality.md`` (the table), ``quality.json`` (the report, unless ``--json`` puts it
elsewhere: every figure, the settings, the machine),
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

from bench import _common

PROG = "quality"
MODELS = {"search": ("search50", "RNNsearch-50"), "encdec": ("encdec50", "RNNencdec-50")}
# keras-nmt train's options that choose what is trained, passed through to it.
TRAINING_OPTIONS = ("--size", "--preset", "--recipe", "--set", "--seed")
DEFAULT_SIZE = "medium"


def build_parser():
    from keras_nmt.cli.common import positive_float

    parser = _common.parser(PROG, __doc__)
    parser.epilog = ("training options, passed to keras-nmt train as it spells them (see "
                     f"keras-nmt train --help): {', '.join(TRAINING_OPTIONS)}; default "
                     f"--size {DEFAULT_SIZE}")
    _common.add(parser, "data", required=True, help="corpus directory (train and valid splits)")
    parser.add_argument("--minutes", type=positive_float, required=True,
                        help="training minutes for each model")
    parser.add_argument("--out", default="bench-quality", help="output directory (default %(default)s)")
    _common.add(parser, "src_lang")
    _common.add(parser, "tgt_lang")
    parser.add_argument("--models", default="search,encdec")
    _common.add(parser, "beam")
    _common.add(parser, "count", help="score only the first N held-out pairs")
    _common.add(parser, "weights", default=None,
                help="weights to score (default: those the run reported)")
    return parser


def training_options(parser, extra: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The training options of ``extra``, read by keras-nmt train's own parser (its
    spellings, choices and messages): for the report, with --set's values typed, and
    --set's KEY=VALUE items as given."""
    from keras_nmt.cli import train as train_cli
    from keras_nmt.core.config import parse_overrides
    from keras_nmt.core.errors import ConfigError

    for token in extra:
        if token.startswith("-") and token.partition("=")[0] not in TRAINING_OPTIONS:
            parser.error(f"unrecognized argument: {token} (training options: "
                         f"{', '.join(TRAINING_OPTIONS)})")
    given = train_cli.build_parser(prog=f"{parser.prog} (training options)").parse_args(extra)
    try:
        overrides = parse_overrides(given.overrides)
    except ConfigError as error:
        parser.error(str(error))
    size = given.size or (None if given.preset else DEFAULT_SIZE)
    return ({"size": size, "preset": given.preset, "recipe": given.recipe, "seed": given.seed,
             "overrides": overrides}, given.overrides)


def finished(run_dir: pathlib.Path, minutes: float) -> bool:
    """Whether the run's summary says it used its budget (or stopped early)."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return False
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary["stop_reason"] == "early_stopping" or summary["wall_hours"] * 60 >= minutes


def train(args, variant: str, run_dir: pathlib.Path, options: dict[str, Any],
          sets: list[str]) -> int:
    """``keras-nmt train`` of ``variant`` into ``run_dir`` (resumed where it has a
    checkpoint) for --minutes in all; its exit status."""
    from keras_nmt.cli import train as train_cli
    from keras_nmt.rundir.run_directory import RunDir

    if finished(run_dir, args.minutes):
        print(f"{PROG}: {variant}: already trained ({run_dir / 'summary.json'})", file=sys.stderr)
        return 0
    resume = RunDir(run_dir).has_checkpoint()
    if resume:
        # The shortlists were cut to the corpus's vocabulary when the run was made.
        sets = [item for item in sets
                if item.partition("=")[0].strip() not in ("src_vocab_size", "tgt_vocab_size")]
    print(f"{PROG}: {variant}: {'resuming' if resume else 'training'} {run_dir} "
          f"({args.minutes:g} minutes of training)", file=sys.stderr, flush=True)
    argv = ["--variant", variant, "--data", args.data, "--src-lang", args.src,
            "--tgt-lang", args.tgt, "--out", str(run_dir), "--max-minutes", str(args.minutes)]
    for option in ("size", "preset", "recipe", "seed"):
        if options[option] is not None:
            argv += [f"--{option}", str(options[option])]
    argv += [f"--set={item}" for item in sets] + (["--resume"] if resume else [])
    return train_cli.main(argv, prog=f"{PROG} ({variant})")


def evaluate(args, label: str, run_dir: pathlib.Path, out: pathlib.Path) -> dict[str, Any]:
    """evaluate_run on the held-out split the run reports on, or the stored result for
    the same weights."""
    from keras_nmt.evaluation import scoring
    from keras_nmt.core.progress import Progress
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.decoding.keras_translator import Translator

    run = RunDir(run_dir)
    info, config = run.load_data_info(), run.load_config()
    # The split the run's own report scores: the test split, or the reported half of a
    # development split cut in two; the development split only when neither exists.
    split, held_out = "test", run.split_files("test", info, needed_for=PROG)
    if held_out is None:
        split, held_out = "valid", run.split_files("valid", info, needed_for=PROG)
    if held_out is None:
        raise ValueError(f"{args.data} has no valid split")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    weights = args.weights or summary.get("report_weights", "best")
    key = {"beam": args.beam, "count": args.count, "weights_step": summary.get("best_weights_step"),
           "updates": summary["updates"], "weights": weights, "split": split}
    cache = out / f"eval-{config.variant}.json"
    if cache.is_file():
        stored = json.loads(cache.read_text(encoding="utf-8"))
        if stored.get("key") == key:
            print(f"{PROG}: {label}: evaluation reused ({cache})", file=sys.stderr)
            return stored["result"]
    sources, references = scoring.read_parallel(held_out.source, held_out.target)
    if args.count:
        sources, references = sources[: args.count], references[: args.count]
    result = scoring.evaluate_run(
        Translator.from_run_dir(run_dir, weights=weights), sources, references, beam_size=args.beam,
        alpha=config.length_alpha, progress=Progress(), label=label,
    )
    result.update(label=label, run_dir=str(run_dir), src_lang=info["src"], tgt_lang=info["tgt"],
                  weights=weights, split=split, split_source=str(held_out.source))
    _common.write_json(cache, {"key": key, "result": scoring.public(result)})
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
    lines += ["", f"{first['sentences']} sentences of the {first['split']} split "
              f"({first['split_source']}), beam {args.beam}, alpha {first['alpha']:g}; "
              f"{args.minutes:g} minutes of training each.",
              f"BLEU: `{first['signatures']['bleu']}`; chrF: `{first['signatures']['chrf']}`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    models = [m for m in args.models.split(",") if m]
    if not models or any(m not in MODELS for m in models):
        parser.error(f"--models: expected search and/or encdec, got {args.models!r}")
    options, sets = training_options(parser, extra)
    bench = _common.Bench(PROG, args, argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_nmt.core.errors import ConfigError, CorpusError, RunDirError
    from keras_nmt.evaluation import plots, scoring
    from keras_nmt.core.atomic import write_text_atomic

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, rows = [], []
    for name in models:
        variant, label = MODELS[name]
        run_dir = out / "runs" / variant
        try:
            status = train(args, variant, run_dir, options, sets)
            if status != 0:
                return status  # keras-nmt train has said why
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
    report_path = pathlib.Path(args.json) if args.json else out / "quality.json"
    bench.write({"models": rows, "evaluations": [scoring.public(r) for r in results],
                 "files": {"markdown": str(out / "quality.md"), **files}},
                {"data": args.data, "minutes": args.minutes, "beam": args.beam,
                 "count": args.count, "training": options}, path=report_path)
    print(_common.table(rows, COLUMNS))
    print(f"written: {out / 'quality.md'}, {report_path}, {files['fig2']['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
