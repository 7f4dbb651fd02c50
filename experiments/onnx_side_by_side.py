"""Several onnxruntime exports decoding the same sentences, timed side by side in one
process: each round runs every export once, in turn, so that a change in the machine's
speed hits them all alike. Reports each export's median sentences/s and, against the
first export, the median of the per-round time ratios, with the numpy matmul rate
measured before and after.

Usage::

    python -m experiments.onnx_side_by_side --sentences FILE \\
        --export words=EXPORTS_A:int8 --export cut=EXPORTS_B:int8 [--export plain=EXPORTS_B:int8:no-unk-replace] \\
        [--beam 5] [--batch-size 64] [--rounds 5] [--json FILE]

An export is ``LABEL=EXPORT_DIR[:int8][:no-unk-replace]``: its newest version, the int8
model with ``int8``, and with ``no-unk-replace`` the ``<unk>`` an export made with
``--unk-replace`` writes are left as they are. Each export decodes with its own
vocabulary selection (``--shortlist`` at export time) and sentence splitting.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from bench import _common

PROG = "experiments.onnx_side_by_side"


def _export(text: str) -> tuple[str, str, set[str]]:
    label, _, rest = text.partition("=")
    parts = rest.split(":")
    options = set(parts[1:])
    unknown = options - {"int8", "no-unk-replace"}
    if not label or not parts[0] or unknown:
        raise ValueError(f"--export takes LABEL=EXPORT_DIR[:int8][:no-unk-replace], got {text!r}")
    return label, parts[0], options


def build_parser():
    parser = _common.parser(PROG, __doc__)
    parser.add_argument("--sentences", required=True, metavar="FILE", help="source lines")
    parser.add_argument("--export", dest="exports", action="append", type=_export,
                        required=True, metavar="LABEL=DIR[:int8][:no-unk-replace]",
                        help="an export to time (give two or more; the first is the baseline)")
    parser.add_argument("--beam", type=int, default=5, metavar="K", help="beam size (default 5)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="B",
                        help="sentences decoded together (default 64)")
    parser.add_argument("--rounds", type=int, default=5, metavar="N",
                        help="rounds, each timing every export once (default 5)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if len(args.exports) < 2:
        raise SystemExit(f"python -m {PROG}: give two --export or more")
    bench = _common.Bench(PROG, args, argv, libraries=("onnxruntime",))
    from keras_nmt.corpus.readers import file_lines
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    lines = [line for line in file_lines(args.sentences) if line.strip()]
    translators = {}
    for label, directory, options in args.exports:
        translator = OnnxTranslator.from_export_dir(directory, int8="int8" in options)
        replace = False if "no-unk-replace" in options else None

        def translate(batch, translator=translator, replace=replace):
            return translator.translate(batch, beam_size=args.beam, batch_size=args.batch_size,
                                        unk_replace=replace)

        translate(lines[: args.batch_size])  # warm-up: sessions, first shapes
        translators[label] = translate
    matmul_before = bench.matmul_gflops()
    seconds: dict[str, list[float]] = {label: [] for label in translators}
    for _ in range(args.rounds):
        for label, translate in translators.items():
            seconds[label].append(_common.timed(lambda: translate(lines))[0])
    matmul_after = _common.matmul_gflops(args.matmul_rounds)
    first = next(iter(seconds))
    rows = []
    for label, directory, options in args.exports:
        times = seconds[label]
        rows.append({
            "export": label, "dir": directory, "int8": "int8" in options,
            "unk_replace": "no-unk-replace" not in options,
            "sentences_per_s": len(lines) / statistics.median(times),
            "seconds": times,
            "time_ratio": statistics.median(t / b for t, b in zip(times, seconds[first])),
        })
    print(_common.table(rows, [("export", "export", ""), ("sentences_per_s", "sent/s", ",.1f"),
                               ("time_ratio", f"time / {first}", ".3f")]))
    print(f"{len(lines)} sentences, beam {args.beam}, batch {args.batch_size}, {args.rounds} "
          f"rounds; numpy matmul {matmul_before:.1f} / {matmul_after:.1f} GFLOP/s")
    bench.write(rows, {"sentences": len(lines), "source": args.sentences, "beam_size": args.beam,
                       "batch_size": args.batch_size, "rounds": args.rounds,
                       "matmul_gflops_after": matmul_after})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
