"""``keras-nmt web EXPORT_DIR --out FOLDER``: a folder that translates in the browser and in
Node.js, offline, from an ONNX export (:mod:`keras_nmt.web.folder`). Needs no TensorFlow:
the plain install runs it. Prints what each part weighs, raw and gzip-compressed."""

from __future__ import annotations

import argparse
from typing import Sequence

from keras_nmt.cli.common import (
    Console, OneLineParser, add_onnx_export_arguments, add_quiet_argument, run_main,
)
from keras_nmt.core.errors import ExportError

PROG = "keras-nmt web"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Write a static folder that translates in the browser (open index.html "
        "through any static file server, e.g. python -m http.server) and in Node.js (node "
        "FOLDER/cli.mjs < in.txt), from the ONNX model that `keras-nmt export ... --onnx` "
        "wrote into EXPORT_DIR (its int8 model where it has one). Nothing is fetched from "
        "outside the folder when it runs.",
    )
    add_onnx_export_arguments(parser)
    parser.add_argument("--out", required=True, metavar="FOLDER",
                        help="the folder to write (an older web export there is replaced)")
    parser.add_argument("--float", dest="int8", action="store_false",
                        help="the float model even where the export has an int8 one")
    add_quiet_argument(parser, "no table of the folder's parts on stderr")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _web, argv, stdin, stdout, stderr)


def _web(args: argparse.Namespace, console: Console) -> int:
    from keras_nmt.web.folder import write_web_folder

    try:
        written = write_web_folder(args.export_dir, args.out, args.name, args.version, args.int8)
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        raise ExportError(f"{error.strerror or error}{where}") from None
    if not args.quiet:
        for line in size_table(written.sizes):
            print(line, file=console.stderr)
    print(f"{console.prog}: wrote {written.path} ({'int8' if written.int8 else 'float'} model)",
          file=console.stderr)
    return 0


def size_table(sizes: dict[str, tuple[int, int]]) -> list[str]:
    """Lines of a table: each part's MB, raw and gzip-compressed, and the total."""
    width = max(map(len, sizes), default=5)
    rows = [f"{'part':<{width}}  {'MB':>7}  {'gzip MB':>7}"]
    rows += [f"{path:<{width}}  {raw / 1e6:7.2f}  {packed / 1e6:7.2f}"
             for path, (raw, packed) in sizes.items()]
    total = [sum(values) for values in zip(*sizes.values())] or [0, 0]
    rows.append(f"{'total':<{width}}  {total[0] / 1e6:7.2f}  {total[1] / 1e6:7.2f}")
    return rows
