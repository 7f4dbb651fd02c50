"""``keras-nmt average RUN_DIR [--last N | --best N]``: write the mean of a run's last or
best N checkpoints' model weights to RUN_DIR/averaged/, which translate, evaluate and
export load with ``--weights averaged``."""

from __future__ import annotations

from typing import Sequence

from keras_nmt.cli.common import (
    OneLineParser, positive_int, quiet_tensorflow, run_command, std_streams,
)
from keras_nmt.config import ConfigError
from keras_nmt.rundir import RunDir, RunDirError
from keras_nmt.vocab import VocabularyError

PROG = "keras-nmt average"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=__doc__.replace("``", "'"))
    parser.add_argument("run_dir", metavar="RUN_DIR")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--last", type=positive_int, metavar="N",
                       help="the last N checkpoints (recent/, else checkpoints/; default 2)")
    which.add_argument("--best", type=positive_int, metavar="N",
                       help="the N best by the development score (best/)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    stdin, stdout, stderr = std_streams(stdin, stdout, stderr)
    args = build_parser(prog).parse_args(argv)

    def body() -> int:
        run = RunDir(args.run_dir)
        run.inspect("best")  # a usable run directory, checked before TensorFlow loads
        quiet_tensorflow()
        from keras_nmt import averaging

        source, count = ("best", args.best) if args.best else ("last", args.last or 2)
        averaging.average(run, source, count, log=lambda text: None if args.quiet else
                          print(text, file=stderr, flush=True))
        return 0

    return run_command(prog, body, stdout, stderr, (ConfigError, RunDirError, VocabularyError))
