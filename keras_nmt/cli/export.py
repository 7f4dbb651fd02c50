"""``keras-nmt export RUN_DIR --out EXPORT_DIR`` (and ``python -m export``): a run's model
for TF Serving, and with --onnx for onnxruntime. The work is
:func:`keras_nmt.export.exporter.export`; errors a user can fix give one line
``PROG: error: ...`` and exit status 2."""

from __future__ import annotations

import argparse
import time
from typing import Sequence

from keras_nmt.cli.common import (
    UNK_REPLACE_DEFAULT, Console, OneLineParser, add_quiet_argument, add_shortlist_argument,
    add_split_sentences_argument, add_weights_argument, non_negative_float, non_negative_int,
    positive_int, quiet_tensorflow, run_main,
)
from keras_nmt.core.errors import ExportError
from keras_nmt.export.exporter import INT8_MAX_DROP, NAME, ExportRequest, export
from keras_nmt.core.progress import format_duration

PROG = "keras-nmt export"
DESCRIPTION = (
    "Export a training run: EXPORT_DIR/NAME/VERSION/ (a SavedModel in TF Serving's layout, "
    "checked with the TF1 session loader against the Keras model), EXPORT_DIR/models.config "
    "and EXPORT_DIR/SERVING.md; with --onnx also NAME.onnx for onnxruntime, in "
    "EXPORT_DIR/NAME/VERSION/onnx/. An export that fails leaves nothing behind."
)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a training run directory")
    parser.add_argument("--out", required=True, metavar="EXPORT_DIR",
                        help="directory that receives NAME/VERSION/, models.config, SERVING.md")
    parser.add_argument("--name", default="nmt", help="model name for TF Serving (default nmt)")
    parser.add_argument("--model-version", dest="version", type=non_negative_int, default=None,
                        metavar="N", help="the model's version number (default: 1 + the "
                        "highest existing, 1 if none)")
    parser.add_argument("--beam", type=positive_int, default=None, metavar="K",
                        help="beam size of serving_default (default: the run's tuned beam, "
                             "keras-nmt evaluate --tune, else its beam_size); alpha: the tuned "
                             "one, else the config's")
    parser.add_argument("--nbest", type=positive_int, default=1, metavar="N",
                        help="N > 1: serving_default also returns the N best translations")
    parser.add_argument("--return-attention", dest="attention", action="store_true",
                        help="serving_default also returns the best translation's attention")
    parser.add_argument("--onnx", action="store_true",
                        help="also write NAME/VERSION/onnx/NAME.onnx (translate_ids, for "
                             "onnxruntime) with its vocabularies and NAME.onnx.json")
    parser.add_argument("--int8", action="store_true",
                        help="with --onnx, also write NAME.int8.onnx there (int8 weights, "
                             "onnxruntime dynamic quantization), refused when its BLEU on a "
                             "sample of the run's sentences falls more than --int8-max-drop "
                             "below the float model's")
    parser.add_argument("--int8-max-drop", type=non_negative_float, default=INT8_MAX_DROP,
                        metavar="BLEU", help="the BLEU the int8 model may lose on the sample "
                                             "(default %(default)s)")
    parser.add_argument("--constrained", action="store_true",
                        help="also export the lexically constrained search: the SavedModel's "
                             "translate_ids_constrained signature and, with --onnx, "
                             "NAME.constrained.onnx (with --int8 NAME.constrained.int8.onnx) "
                             "for onnx-translate --constraints/--prefix/--glossary; one ONNX "
                             "conversion more")
    add_shortlist_argument(parser, what="serving_default and onnx-translate decode (the "
                           "table goes into both graphs; shortlist inputs turn it off)")
    parser.add_argument("--unk-replace", action=argparse.BooleanOptionalAction, default=None,
                        help="serving_default, translate and onnx-translate replace each "
                             "<unk> of a translation with the source word its step attended "
                             "to most, through the run's dictionary.tsv (copied when it lacks "
                             f"the word); a word run of RNNsearch. {UNK_REPLACE_DEFAULT}")
    add_split_sentences_argument(
        parser, "serving_default, translate and onnx-translate split each line into its "
        "sentences, translate each alone and join their translations")
    add_weights_argument(parser)
    add_quiet_argument(parser)
    parser.rename("--version", "--model-version")
    parser.rename("--attention", "--return-attention")
    parser.add_check(_check_name)
    return parser


def _check_name(args: argparse.Namespace) -> None:
    if not NAME.fullmatch(args.name):
        raise ValueError(f"--name must be letters, digits, '_', '.', '-', got {args.name!r}")


def main(argv: Sequence[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _export, argv, stdin, stdout, stderr)


def _export(args: argparse.Namespace, console: Console) -> int:
    started = time.monotonic()

    def log(message: str) -> None:
        if args.quiet:
            return
        print(f"{console.prog}: {message} [{format_duration(time.monotonic() - started)}]",
              file=console.stderr, flush=True)

    request = ExportRequest(
        run_dir=args.run_dir, out=args.out, name=args.name, version=args.version,
        beam=args.beam, nbest=args.nbest, attention=args.attention, onnx=args.onnx,
        weights=args.weights, shortlist=args.shortlist, int8=args.int8,
        int8_max_drop=args.int8_max_drop, split_sentences=args.split_sentences,
        unk_replace=args.unk_replace, constrained=args.constrained,
    )
    quiet_tensorflow()
    try:
        final = export(request, log)
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        raise ExportError(f"{error.strerror or error}{where}") from None
    log(f"wrote {final}")
    return 0
