"""``keras-nmt evaluate``: the paper's evaluation of trained runs.

    keras-nmt evaluate RUN_DIR [RUN_DIR ...] (--src test.en --ref test.fr | --half select|report)
        [--beam K] [--alpha A] [--plots DIR] [--json] [--gold-align FILE]
        [--heatmaps N | --sentences I,J,K] [--batch-size B] [--ensemble]

BLEU / chrF on all sentences and on the No-UNK subset
(:mod:`keras_nmt.evaluation.scoring`), BLEU by sentence length (Fig. 2), attention heat
maps (Fig. 3), Table 2 (:mod:`keras_nmt.evaluation.plots`), and the alignment error rate
when gold alignments are at hand (:mod:`keras_nmt.evaluation.alignment`).
"""

from __future__ import annotations

import argparse
import dataclasses
import filecmp
import io
import pathlib
from typing import Any, Sequence

from keras_nmt.core.atomic import json_text
from keras_nmt.cli.common import (
    Console, OneLineParser, add_beam_search_arguments, add_quiet_argument,
    add_shortlist_argument, add_split_sentences_argument, add_unk_replace_arguments,
    add_weights_argument, non_negative_float, non_negative_int, positive_int, quiet_tensorflow,
    run_main, unk_replacement,
)
from keras_nmt.core.config import check_attention
from keras_nmt.corpus import heldout
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.decoding.ensemble import check_compatible
from keras_nmt.core.errors import EvaluationError
from keras_nmt.lexicon.table import shortlist_inputs
from keras_nmt.evaluation import plots
from keras_nmt.evaluation.alignment import default_alignment_path, read_gold
from keras_nmt.evaluation.plots import (
    HEATMAP_MAX_TOKENS, HEATMAP_MIN_TOKENS, choose_heatmap_sentences, write_plots,
)
from keras_nmt.evaluation.tuning import DEFAULT_ALPHAS, DEFAULT_BEAMS
from keras_nmt.evaluation.scoring import (
    TABLE2_FIELDS, evaluate_run, format_report, public, read_parallel, run_labels, run_summary,
    table2_row,
)
from keras_nmt.core.progress import Progress
from keras_nmt.rundir.run_directory import RunDir

PROG = "keras-nmt evaluate"
DEFAULT_HEATMAPS = 4


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Evaluate trained runs as in Bahdanau et al. (2015): BLEU and chrF on all "
        "sentences and on the No-UNK subset, BLEU by sentence length (Fig. 2), attention heat "
        "maps (Fig. 3), Table 2, and AER when gold alignments are available.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories to evaluate and compare")
    parser.add_argument("--src", metavar="FILE", help="source sentences, one per line")
    parser.add_argument("--ref", metavar="FILE",
                        help="reference translations, line-aligned with --src")
    parser.add_argument(
        "--half", choices=heldout.HALVES,
        help="instead of --src/--ref: the half of the development data the run cut at "
        "training (RUN_DIR/heldout/) when its corpus has no test split: 'select' for choices "
        "(--tune, settings, checkpoints), 'report' for the figures you publish, which "
        "chooses nothing",
    )
    add_beam_search_arguments(parser, "each run's tuned one, else its config's")
    parser.add_argument("--tune", action="store_true",
                        help="first pick the beam and alpha with the best BLEU on --src/--ref "
                        "over --tune-beams x --tune-alphas, store them in the run (search.json: "
                        "translate, evaluate and export then use them), and evaluate with them")
    parser.add_argument("--tune-beams", type=_positive_ints, metavar="K,K",
                        help="with --tune: beam sizes to try (default "
                        f"{','.join(map(str, DEFAULT_BEAMS))})")
    parser.add_argument("--tune-alphas", type=_alphas, metavar="A,A",
                        help="with --tune: alphas to try (default "
                        f"{','.join(f'{a:g}' for a in DEFAULT_ALPHAS)})")
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="B", help="sentences per decoding batch (default 32)")
    parser.add_argument(
        "--plots", metavar="DIR",
        help="write figures (PNG + CSV/JSON), table2.md, evaluation.json, translations and predicted alignments here",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout (the tables go to stderr)")
    add_quiet_argument(parser, "no progress lines on stderr (with --json: no tables either)")
    parser.add_argument(
        "--gold-align", dest="align", metavar="FILE",
        help="gold alignments, Pharaoh i-j per line (default: SRC_STEM.align next to --src, when it exists)",
    )
    heatmaps = parser.add_mutually_exclusive_group()
    heatmaps.add_argument("--heatmaps", type=non_negative_int, metavar="N",
                          help=f"with --plots: attention heat maps per run (default "
                          f"{DEFAULT_HEATMAPS}: the first sentences with "
                          f"{HEATMAP_MIN_TOKENS}-{HEATMAP_MAX_TOKENS} source tokens)")
    heatmaps.add_argument("--sentences", metavar="I,J,K",
                          help="with --plots: heat maps for these line numbers of --src "
                          "(1-based) instead")
    add_shortlist_argument(parser)
    add_unk_replace_arguments(parser)
    add_split_sentences_argument(
        parser, "split each --src line into its sentences, translate each alone and join "
        "their translations; the scores are per line either way")
    add_weights_argument(parser)
    parser.add_argument(
        "--ensemble", action="store_true",
        help="also evaluate the ensemble of all RUN_DIRs (same vocabularies needed), as one more row",
    )
    parser.rename("--align", "--gold-align")
    parser.add_check(_check_needed_options)
    return parser


def _check_needed_options(args: argparse.Namespace) -> None:
    if args.half is not None:
        if args.src or args.ref:
            raise ValueError("--half reads the run's own held-out half: give it or --src/--ref, not both")
        if args.tune and args.half == heldout.REPORT:
            raise ValueError("--tune chooses, and the reported half must choose nothing: "
                             "tune with --half select")
    elif not (args.src and args.ref):
        raise ValueError("give --src and --ref, or --half select|report")
    for option, value, needs in (("--heatmaps", args.heatmaps, "plots"),
                                 ("--sentences", args.sentences, "plots"),
                                 ("--tune-beams", args.tune_beams, "tune"),
                                 ("--tune-alphas", args.tune_alphas, "tune")):
        if value is not None and not getattr(args, needs):
            raise ValueError(f"{option} applies with --{needs} only")


def _positive_ints(text: str) -> tuple[int, ...]:
    values = tuple(positive_int(item) for item in text.split(","))
    return values


def _alphas(text: str) -> tuple[float, ...]:
    return tuple(non_negative_float(item) for item in text.split(","))


def _heatmap_lines(text: str, sources: Sequence[str], source_codec) -> list[int]:
    indices = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not 1 <= int(item) <= len(sources):
            raise EvaluationError(
                f"--sentences: {item!r} is not a line number of --src (1 to {len(sources)})"
            )
        if not source_codec.tokenize(sources[int(item) - 1]):
            raise EvaluationError(f"--sentences: line {item} of --src is empty")
        indices.append(int(item) - 1)
    return sorted(set(indices))


def _prepare_output_dir(path: str) -> pathlib.Path:
    directory = pathlib.Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise EvaluationError(f"--plots: cannot write to {directory}: {error.strerror}") from None
    return directory


def _held_out_half(runs, half: str) -> ParallelFiles:
    """The runs' own held-out half; every run must hold the same one to be compared on it."""
    found = [heldout.half_files(run.run.heldout, run.src, run.tgt)[half] for run in runs]
    for run, files in zip(runs, found):
        if not (files.source.is_file() and files.target.is_file()):
            raise EvaluationError(
                f"--half: {run.run.path} has no held-out halves (its corpus has a test split, "
                "or it was trained before runs cut one): give --src and --ref")
        if not (filecmp.cmp(files.source, found[0].source, shallow=False)
                and filecmp.cmp(files.target, found[0].target, shallow=False)):
            raise EvaluationError(f"--half {half}: {run.run.path} holds another half than "
                                  f"{runs[0].run.path} (another corpus): give --src and --ref")
    return found[0]


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _evaluate, argv, stdin, stdout, stderr)


@dataclasses.dataclass
class _Job:
    """One row of the comparison: a run directory, or the ensemble of all of them."""

    label: str
    paths: list[pathlib.Path]
    config: Any
    summary: dict[str, Any] | None


def _evaluate(args: argparse.Namespace, console: Console) -> int:
    # Everything that can be checked without TensorFlow is checked first.
    runs = [RunDir(path).inspect(args.weights) for path in args.run_dirs]
    pairs = {(run.src, run.tgt) for run in runs}
    if len(pairs) > 1:
        raise EvaluationError(
            "the RUN_DIRs translate different language pairs: "
            + ", ".join(f"{run.run.path} {run.src}->{run.tgt}" for run in runs)
        )
    if args.half is not None:
        half = _held_out_half(runs, args.half)
        args.src, args.ref = str(half.source), str(half.target)
    sources, references = read_parallel(args.src, args.ref)
    src_lang, tgt_lang = runs[0].src, runs[0].tgt
    for option, value in (("--heatmaps", args.heatmaps), ("--sentences", args.sentences),
                          ("--gold-align", args.align)):
        if value is not None:
            check_attention(option, [run.config for run in runs])
    if args.ensemble:
        if len({run.run.path.resolve() for run in runs}) < 2:
            raise EvaluationError("--ensemble needs at least two different RUN_DIRs")
        check_compatible(runs)
    align_path = pathlib.Path(args.align) if args.align else default_alignment_path(args.src)
    gold = None
    if args.align and not align_path.is_file():
        raise EvaluationError(f"--gold-align file not found: {align_path}")
    if align_path.is_file():
        gold = read_gold(align_path, sources, references, src_lang, tgt_lang, pathlib.Path(args.src))
    plots_dir = _prepare_output_dir(args.plots) if args.plots else None
    keep: list[int] = []
    if plots_dir is not None:
        # Heat maps are drawn over the run's tokens: choose by their count.
        source_codec = runs[0].source_codec
        if args.sentences:
            keep = _heatmap_lines(args.sentences, sources, source_codec)
        else:
            lengths = [len(source_codec.tokenize(line)) for line in sources]
            keep = choose_heatmap_sentences(
                lengths, DEFAULT_HEATMAPS if args.heatmaps is None else args.heatmaps)
    if args.shortlist:
        for run in runs:
            shortlist_inputs(args.shortlist, run.run.load_lexicon())
    unk_replace, dictionary = unk_replacement(args, runs)
    if args.tune and (len(runs) > 1 or args.ensemble):
        raise EvaluationError("--tune tunes one run: give one RUN_DIR, without --ensemble")
    settings = {run.run.path: run.run.search_settings(run.config) for run in runs}
    labels = run_labels(args.run_dirs, [run.config.variant for run in runs])
    jobs = [
        _Job(label, [run.run.path], run.config, run_summary(run.run.path))
        for run, label in zip(runs, labels)
    ]
    if args.ensemble:
        label = "ensemble(" + " + ".join(labels) + ")"
        jobs.append(_Job(label, [run.run.path for run in runs], runs[0].config, None))

    quiet_tensorflow()
    from keras_nmt.decoding.keras_translator import Translator

    report = console.stderr if args.json else console.stdout
    if args.json and args.quiet:  # the JSON on stdout holds what the tables show
        report = io.StringIO()
    results = []
    rows = []
    loaded: dict[tuple[pathlib.Path, ...], Translator] = {}  # a run named twice is loaded once
    for job in jobs:
        key = tuple(path.resolve() for path in job.paths)
        if key not in loaded:
            loaded[key] = Translator.from_run_dirs(job.paths, weights=args.weights)
        translator = loaded[key]
        if args.tune:
            settings[job.paths[0]] = _tune(args, translator, sources, references, job.paths[0],
                                           report, unk_replace, dictionary)
        defaults = settings.get(job.paths[0]) or {"beam_size": job.config.beam_size,
                                                   "alpha": job.config.length_alpha}
        beam = args.beam or defaults["beam_size"]
        alpha = defaults["alpha"] if args.alpha is None else args.alpha
        # RNNencdec has no attention: no alignments to score, no heat maps to draw.
        attends = job.config.uses_attention
        result = evaluate_run(
            translator, sources, references, beam, alpha, batch_size=args.batch_size,
            gold=gold if attends else None, keep_attention=keep if attends else [],
            progress=Progress(stream=console.stderr, enabled=not args.quiet), label=job.label, shortlist=args.shortlist,
            split_sentences=args.split_sentences, unk_replace=unk_replace, dictionary=dictionary,
        )
        ensemble = len(job.paths) > 1
        result = {
            "run_dir": str(job.paths[0]) if not ensemble else None,
            "run_dirs": [str(path) for path in job.paths],
            "label": job.label,
            "variant": "ensemble" if ensemble else job.config.variant,
            "architecture": job.config.architecture,
            "src_lang": translator.src_lang,
            "tgt_lang": translator.tgt_lang,
            **result,
        }
        result["table2"] = {key: (job.summary or {}).get(key) for key in TABLE2_FIELDS}
        rows.append(table2_row(job.label, result, job.summary))
        results.append(result)
        print(format_report(result), file=report, flush=True)

    table = plots.table2_markdown(rows)
    print(f"\nTable 2 (training columns from summary.json; scores on {args.src}):\n" + table,
          file=report, flush=True)
    output: dict[str, Any] = {
        "src": str(args.src),
        "ref": str(args.ref),
        "align": str(align_path) if gold is not None else None,
        "sentences": len(sources),
        "runs": [public(r) for r in results],
        "table2": rows,
    }
    if plots_dir is not None:
        output["files"] = write_plots(results, plots_dir, rows)
        output["files"]["evaluation"] = str(plots_dir / "evaluation.json")
        (plots_dir / "evaluation.json").write_text(
            json_text(output, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(f"figures, table2.md and evaluation.json written to {plots_dir}", file=report, flush=True)
    if args.json:
        console.stdout.write(json_text(output, indent=2, ensure_ascii=False))
        console.stdout.write("\n")
    return 0


def _tune(args, translator, sources, references, run_dir: pathlib.Path, report,
          unk_replace: bool, dictionary) -> dict:
    """Tune the beam and alpha of one run on (sources, references) and store them."""
    from keras_nmt.evaluation.tuning import tune_search

    tuned = tune_search(translator, sources, references, args.tune_beams or DEFAULT_BEAMS,
                        args.tune_alphas or DEFAULT_ALPHAS,
                        batch_size=args.batch_size, shortlist=args.shortlist,
                        log=lambda text: print(text, file=report, flush=True),
                        split_sentences=args.split_sentences, unk_replace=unk_replace,
                        dictionary=dictionary)
    tuned.update(src=str(args.src), ref=str(args.ref), weights=args.weights)
    RunDir(run_dir).write_search_settings(tuned)
    print(f"tuned: beam {tuned['beam_size']}, alpha {tuned['alpha']:g} (BLEU {tuned['bleu']:.2f}); "
          f"stored in {RunDir(run_dir).search_path}", file=report, flush=True)
    return {**tuned, "tuned": True}


if __name__ == "__main__":
    raise SystemExit(main())
