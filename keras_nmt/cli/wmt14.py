"""``keras-nmt wmt14``: download, check and prepare the paper's WMT'14 English-French
corpus without training (``keras-nmt train --data wmt14-en-fr`` does the same first)."""

from __future__ import annotations

from typing import Sequence

from keras_nmt.cli.common import (
    Console, OneLineParser, add_quiet_argument, positive_int, run_main,
)
from keras_nmt.corpus import wmt14

PROG = "keras-nmt wmt14"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=wmt14.__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", help=f"cache directory (default ${wmt14.CACHE_ENV} or "
                        f"{wmt14.DEFAULT_CACHE})")
    parser.add_argument("--mirror", help=f"base URL to fetch every file from (default "
                        f"${wmt14.MIRROR_ENV} or statmt.org)")
    parser.add_argument("--max-train-pairs", type=positive_int,
                        help="deterministic subsample of the training pairs")
    add_quiet_argument(parser, "no progress lines on stderr (the prepared corpus's "
                       "directory still goes to stdout)")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _prepare, argv, stdin, stdout, stderr)


def _prepare(args, console: Console) -> int:
    out = wmt14.prepare(args.cache_dir, args.mirror, args.max_train_pairs, quiet=args.quiet,
                        log=lambda text: None if args.quiet else
                        print(text, file=console.stderr, flush=True))
    print(out, file=console.stdout)
    return 0
