"""``keras-nmt wmt14``: download, check and prepare the paper's WMT'14 English-French
corpus without training (``keras-nmt train --data wmt14-en-fr`` does the same first)."""

from __future__ import annotations

from typing import Sequence

from keras_nmt.cli.common import OneLineParser, positive_int, run_command, std_streams
from keras_nmt.corpus import wmt14
from keras_nmt.corpus.readers import CorpusError

PROG = "keras-nmt wmt14"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=wmt14.__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", help=f"cache directory (default ${wmt14.CACHE_ENV} or "
                        f"{wmt14.DEFAULT_CACHE})")
    parser.add_argument("--mirror", help=f"base URL to fetch every file from (default "
                        f"${wmt14.MIRROR_ENV} or statmt.org)")
    parser.add_argument("--max-train-pairs", type=positive_int,
                        help="deterministic subsample of the training pairs")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr "
                        "(the prepared corpus's directory still goes to stdout)")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    stdin, stdout, stderr = std_streams(stdin, stdout, stderr)
    args = build_parser(prog).parse_args(argv)

    def body() -> int:
        out = wmt14.prepare(args.cache_dir, args.mirror, args.max_train_pairs, quiet=args.quiet,
                            log=lambda text: None if args.quiet else
                            print(text, file=stderr, flush=True))
        print(out, file=stdout)
        return 0

    return run_command(prog, body, stdout, stderr, (CorpusError,))
