"""``keras-nmt lexicon RUN_DIR``: build the run's lexical table p(t|s) (IBM Model 1 over
a sample of its training pairs, in bounded memory) for vocabulary selection (``--shortlist
F,B`` of translate, evaluate and export). Training builds it at its end unless told not to
(``--no-lexicon``)."""

from __future__ import annotations

import json
from typing import Sequence

from keras_nmt.cli.common import OneLineParser, positive_int, run_command, std_streams
from keras_nmt.config import ConfigError
from keras_nmt.corpus.readers import InputError
from keras_nmt.lexicon import DEFAULT_BEST, DEFAULT_ITERATIONS, LexiconError, Limits, build_for_run
from keras_nmt.progress import Progress
from keras_nmt.rundir import RunDir, RunDirError
from keras_nmt.vocab import VocabularyError

PROG = "keras-nmt lexicon"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=__doc__.replace("``", "'"))
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--iterations", type=positive_int, default=DEFAULT_ITERATIONS,
                        help="EM rounds (default %(default)s)")
    parser.add_argument("--translations", dest="best", type=positive_int, default=DEFAULT_BEST,
                        metavar="N", help="translations kept per source word, the most "
                        "--shortlist F,B can use as B (default %(default)s)")
    parser.add_argument("--sample", type=positive_int, default=Limits.sample_pairs,
                        help="training lines EM runs on, spread evenly through the split; "
                             "a shorter split is taken whole (default %(default)s)")
    parser.add_argument("--max-word-pairs", type=positive_int, default=Limits.max_word_pairs,
                        help="word pairs the table holds during EM, the least probable "
                             "dropped beyond (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.rename("--best", "--translations")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    stdin, stdout, stderr = std_streams(stdin, stdout, stderr)
    args = build_parser(prog).parse_args(argv)

    def body() -> int:
        run = RunDir(args.run_dir)
        run.inspect("last")  # a usable run directory (its vocabularies above all)
        progress = Progress(stream=stderr, enabled=not args.quiet)
        limits = Limits(sample_pairs=args.sample, max_word_pairs=args.max_word_pairs)
        lexicon = build_for_run(run, args.iterations, args.best, progress, limits)
        progress.close()
        info = lexicon.info
        size = run.lexicon_path.stat().st_size
        print(json.dumps({"path": str(run.lexicon_path), "bytes": size, **info}, sort_keys=True),
              file=stdout)
        if not args.quiet:
            print(f"wrote {run.lexicon_path} ({size / 1e6:.1f} MB): {info['pairs']:,} pairs "
                  f"(of {info['corpus_lines']:,} lines), "
                  f"{info['word_pairs']:,} word pairs, {info['iterations']} EM rounds in "
                  f"{info['total_seconds']:.1f} s", file=stderr)
        return 0

    return run_command(prog, body, stdout, stderr,
                       (ConfigError, InputError, LexiconError, RunDirError, VocabularyError))
