"""``keras-nmt lexicon RUN_DIR``: build the run's lexical table p(t|s) (IBM Model 1 over
a sample of its training pairs, in bounded memory) for vocabulary selection (``--shortlist
F,B`` of translate, evaluate and export), and, for a word run whose target vocabulary
lacks words of its training split, the dictionary ``--unk-replace`` reads
(``dictionary.tsv``). Training builds both at its end unless told not to
(``--no-lexicon``)."""

from __future__ import annotations

import json
from typing import Sequence

from keras_nmt.cli.common import (
    Console, OneLineParser, add_quiet_argument, positive_int, run_main,
)
from keras_nmt.lexicon.table import DEFAULT_BEST, DEFAULT_ITERATIONS, TableLimits, build_for_run
from keras_nmt.core.progress import Progress
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.lexicon.unk_dictionary import WordSample, write_for_run

PROG = "keras-nmt lexicon"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=__doc__.replace("``", "'"))
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--iterations", type=positive_int, default=DEFAULT_ITERATIONS,
                        help="EM rounds (default %(default)s)")
    parser.add_argument("--translations", dest="best", type=positive_int, default=DEFAULT_BEST,
                        metavar="N", help="translations kept per source word, the most "
                        "--shortlist F,B can use as B (default %(default)s)")
    parser.add_argument("--sample", type=positive_int, default=TableLimits.sample_pairs,
                        help="training lines EM runs on, spread evenly through the split; "
                             "a shorter split is taken whole (default %(default)s)")
    parser.add_argument("--max-word-pairs", type=positive_int, default=TableLimits.max_word_pairs,
                        help="word pairs the table holds during EM, the least probable "
                             "dropped beyond (default %(default)s)")
    add_quiet_argument(parser)
    parser.rename("--best", "--translations")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _build, argv, stdin, stdout, stderr)


def _build(args, console: Console) -> int:
    run = RunDir(args.run_dir)
    run.inspect("last")  # a usable run directory (its vocabularies above all)
    progress = Progress(stream=console.stderr, enabled=not args.quiet)
    limits = TableLimits(sample_pairs=args.sample, max_word_pairs=args.max_word_pairs)
    # A run that gets a dictionary reads its training sample once, for both tables.
    sample = WordSample.if_needed(run, limits, progress)
    ids = None if sample is None else lambda: sample.in_vocabularies(
        *(codec.vocabulary for codec in run.codecs()))
    lexicon = build_for_run(run, args.iterations, args.best, progress, limits, ids)
    dictionary = write_for_run(run, args.iterations, progress, limits, sample)
    progress.close()
    info = lexicon.info
    size = run.lexicon_path.stat().st_size
    print(json.dumps({"path": str(run.lexicon_path), "bytes": size, **info,
                      "dictionary": None if dictionary is None else
                      {"path": str(run.dictionary_path), **dictionary.info}}, sort_keys=True),
          file=console.stdout)
    if not args.quiet:
        print(f"wrote {run.lexicon_path} ({size / 1e6:.1f} MB): {info['pairs']:,} pairs "
              f"(of {info['corpus_lines']:,} lines), "
              f"{info['word_pairs']:,} word pairs, {info['iterations']} EM rounds in "
              f"{info['total_seconds']:.1f} s", file=console.stderr)
        if dictionary is not None:
            print(f"wrote {run.dictionary_path}: {dictionary.info['entries']:,} source words "
                  f"with a translation the vocabulary lacks "
                  f"({dictionary.info['seconds']:.1f} s)", file=console.stderr)
    return 0
