"""BLEU of vocabulary selection against the exact search, and of the int8 ONNX model
against the float one, on a whole split.

Usage::

    python -m bench.selection_bleu RUN_DIR --src valid.en --ref valid.fr \\
        [--weights averaged] [--shortlists 2000,30:1000,20:500,10] [--beam 5] \\
        [--batch-size 64] [--export-dir EXPORT_DIR] [--json selection-bleu.json]

Decodes every sentence with the Keras ``Translator``, exactly and with each shortlist
(F,B pairs separated by ':'), and reports BLEU, chrF and the seconds of each decode. With
``--export-dir`` (an export made with ``--onnx --shortlist F,B --int8``) the float and int8
ONNX models decode too, exactly and with the export's shortlist.
"""

from __future__ import annotations

import sys

from bench import _common

PROG = "selection_bleu"


def build_parser():
    from keras_nmt.cli.common import shortlist

    parser = _common.parser(PROG, __doc__)
    _common.add_run_and_split(parser)
    parser.add_argument("--shortlists", default="2000,30:1000,20:500,10", metavar="F,B:F,B...",
                        type=lambda text: [shortlist(item) for item in text.split(":")])
    parser.add_argument("--export-dir", help="an export with --onnx --shortlist F,B --int8")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    from keras_nmt.evaluation.scoring import bleu, chrf, read_parallel
    from keras_nmt.decoding.keras_translator import Translator

    sources, references = read_parallel(args.src, args.ref)
    rows = []

    def score(path: str, shortlist, translate) -> None:
        seconds, translations = _common.warm_then_time(translate, sources, args.batch_size)
        hypotheses = [t.text for t in translations]
        rows.append({"path": path, "shortlist": list(shortlist) if shortlist else None,
                     "bleu": bleu(hypotheses, references)[0],
                     "chrf": chrf(hypotheses, references)[0], "seconds": seconds})
        exact = next(r["bleu"] for r in rows if r["path"] == path and not r["shortlist"])
        rows[-1]["against_exact"] = rows[-1]["bleu"] - exact
        bench.log(f"{path} shortlist {shortlist}: BLEU {rows[-1]['bleu']:.2f} ({seconds:.1f} s)")

    translator = Translator.from_run_dir(args.run_dir, weights=args.weights)
    for shortlist in [None, *args.shortlists]:
        score("keras", shortlist, lambda lines, s=shortlist: translator.translate(
            lines, beam_size=args.beam, batch_size=args.batch_size, shortlist=s))
    if args.export_dir:
        from keras_nmt.decoding.onnx_translator import OnnxTranslator

        for int8 in (False, True):
            onnx = OnnxTranslator.from_export_dir(args.export_dir, int8=int8)
            for select in (False, True):
                score("onnx-int8" if int8 else "onnx", onnx.shortlist if select else None,
                      lambda lines, s=select: onnx.translate(
                          lines, beam_size=args.beam, batch_size=args.batch_size, shortlist=s))
    print(_common.table(rows, [("path", "path", ""), ("shortlist", "shortlist", ""),
                               ("bleu", "BLEU", ".2f"), ("against_exact", "vs exact", "+.2f"),
                               ("chrf", "chrF", ".2f"), ("seconds", "seconds", ".1f")]))
    bench.write(rows, {"run_dir": args.run_dir, "weights": args.weights, "src": args.src,
                       "ref": args.ref, "beam": args.beam, "batch_size": args.batch_size,
                       "export_dir": args.export_dir, "sentences": len(sources)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
