"""``keras-nmt onnx-translate`` (and ``python serving/onnx_translate.py``): translate stdin
with an ONNX export and onnxruntime, without TensorFlow; see
:mod:`keras_nmt.decoding.onnx_translator`. One output line per input line, in order; with
``--nbest N`` the Moses n-best format of ``keras-nmt translate``,
``INDEX ||| translation ||| score``. ``--constraints FILE``, ``--prefix FILE`` and
``--glossary TSV`` constrain the output as for ``keras-nmt translate``, with the export's
constrained model (``keras-nmt export --onnx --constrained``)."""

from __future__ import annotations

import argparse
import functools
from typing import Sequence, TextIO

from keras_nmt.cli.common import (
    Console, OneLineParser, add_beam_search_arguments, add_confidence_arguments,
    add_onnx_export_arguments,
    add_constraint_arguments, add_markup_argument, add_quiet_argument,
    add_split_sentences_argument, binary, positive_int, run_main, shortlist,
)
from keras_nmt.cli.streaming import LineRules, Output, translate_in_chunks
from keras_nmt.corpus.readers import stream_lines
from keras_nmt.core.errors import ExportError, UsageError
from keras_nmt.decoding.marked_up import marking_up
from keras_nmt.decoding.onnx_translator import OnnxTranslator

PROG = "keras-nmt onnx-translate"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Translate raw sentences from stdin with onnxruntime, using the ONNX "
        "model, NAME.onnx.json and the vocabularies that `keras-nmt export ... --onnx` writes "
        "into EXPORT_DIR/NAME/VERSION/onnx/ (the newest version's, unless --model-version says). "
        "No TensorFlow needed. One translation per input line, in order; stdin is read and "
        "translated a chunk of 64 batches at a time, each chunk's output written before the "
        "next is read.",
    )
    add_onnx_export_arguments(parser)
    add_beam_search_arguments(parser, "the export's")
    parser.add_argument("--nbest", type=positive_int, metavar="N",
                        help="write the N best translations as 'INDEX ||| translation ||| score'"
                        " (at most the export's --nbest)")
    parser.add_argument("--no-unk", action="store_true", help="never generate <unk>")
    parser.add_argument("--int8", action="store_true",
                        help="run NAME.int8.onnx (exported with --int8) instead of NAME.onnx")
    selection = parser.add_mutually_exclusive_group()
    selection.add_argument("--shortlist", type=shortlist, metavar="F,B",
                           help="vocabulary selection with other sizes than the export's (an "
                                "export made with --shortlist holds the lexical table)")
    selection.add_argument("--full-vocabulary", action="store_true",
                           help="decode over every word although the export selects")
    add_split_sentences_argument(
        parser, "as the export does: split each line into its sentences, translate each alone "
        "and join their translations, unless it was exported with --no-split-sentences or by "
        "a keras-nmt older than that option", unset=None)
    add_confidence_arguments(parser)
    add_constraint_arguments(parser)
    add_markup_argument(parser)
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                        help="sentences decoded together (default 32)")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="onnxruntime intra-op threads (default: onnxruntime's choice)")
    add_quiet_argument(parser, "no progress line on stderr")
    parser.rename("--version", "--model-version")
    return parser


def main(argv: Sequence[str] | None = None, stdin=None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, prog: str = PROG) -> int:
    return run_main(build_parser(prog), _translate, argv, stdin, stdout, stderr)


def _translate(args, console: Console) -> int:
    rules = LineRules(args.constraints, args.prefix, args.glossary)
    translator = OnnxTranslator.from_export_dir(args.export_dir, args.name, args.threads,
                                                int8=args.int8, version=args.version)
    if rules and not translator.constrains:
        raise ExportError(f"{args.export_dir} has no constrained model{' (int8)' * args.int8}"
                          " for --constraints, --prefix or --glossary: export the run again "
                          "with --onnx --constrained")
    nbest = args.nbest or 1
    beam = args.beam if args.beam is not None else max(translator.beam_size, nbest)
    options = dict(beam_size=beam, alpha=args.alpha, nbest=nbest, forbid_unk=args.no_unk,
                   batch_size=args.batch_size, split_sentences=args.split_sentences,
                   shortlist=False if args.full_vocabulary else (args.shortlist or True),
                   confidence=args.confidence or args.min_confidence is not None,
                   align=bool(args.markup))
    try:
        translator.translate([], **options)  # checks the options before reading stdin
    except ValueError as error:
        raise UsageError(str(error)) from None
    if hasattr(console.stdout, "reconfigure"):
        console.stdout.reconfigure(encoding="utf-8", newline="\n")
    output = Output(console.stdout, nbest=bool(args.nbest), confidence=args.confidence,
                    min_confidence=args.min_confidence, drop_below=args.drop_below)
    translate = rules.translating(translator.translate)
    if args.markup:
        translate = marking_up(translate, args.markup)
    read = translate_in_chunks(functools.partial(translate, **options),
                               stream_lines(binary(console.stdin)), args.batch_size, output,
                               console.stderr, args.quiet)
    rules.check_all_read(read)
    output.warn_truncated(console.prog, console.stderr, translator.max_source_len)
    rules.warn_unmet(console.prog, console.stderr)
    return 0
