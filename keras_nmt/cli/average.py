"""``keras-nmt average RUN_DIR [--last N | --best N]``: write the mean of a run's last or
best N trained checkpoints' model weights (never step 0, the untrained initialisation) to
RUN_DIR/averaged/, which translate, evaluate and export load with ``--weights averaged``."""

from __future__ import annotations

from typing import Sequence

from keras_nmt.cli.common import (
    Console, OneLineParser, add_quiet_argument, positive_int, quiet_tensorflow, run_main,
)
from keras_nmt.rundir.run_directory import RunDir

PROG = "keras-nmt average"


def build_parser(prog: str = PROG) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=__doc__.replace("``", "'"))
    parser.add_argument("run_dir", metavar="RUN_DIR")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--last", type=positive_int, metavar="N",
                       help="the last N trained checkpoints (recent/, else checkpoints/; "
                       "default 2)")
    which.add_argument("--best", type=positive_int, metavar="N",
                       help="the N best by the development score (best/)")
    add_quiet_argument(parser)
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _average, argv, stdin, stdout, stderr)


def _average(args, console: Console) -> int:
    run = RunDir(args.run_dir)
    run.inspect("best")  # a usable run directory, checked before TensorFlow loads
    quiet_tensorflow()
    from keras_nmt.rundir import averaging

    source, count = ("best", args.best) if args.best else ("last", args.last or 2)
    averaging.average(run, source, count, log=lambda text: None if args.quiet else
                      print(text, file=console.stderr, flush=True))
    return 0
