"""Decoding throughput: sentences/s and output tokens/s of one run's beam search through
the Keras model, the exported SavedModel and onnxruntime, at several beams and batch
sizes; and the time per sentence against source length.

Usage (one command; prints tables, writes JSON and a PNG)::

    python -m bench.decode_throughput RUN_DIR [--weights best] \\
        [--sentences FILE] [--count 512] [--beams 1,5,10] [--batch-sizes 1,16,64] \\
        [--shortlist 1000,20] [--selection off,on] [--rounds 1] \\
        [--json bench-decode.json] [--plot bench-decode-length.png]

Paths (``--paths``):

- ``keras``: :class:`keras_nmt.decoding.keras_translator.Translator` (the run's weights), Python
  tokenization around the model's compiled beam search;
- ``savedmodel``: the export's ``translate`` signature (raw text in and out, beam and
  alpha as inputs) through ``tf.saved_model.load``;
- ``onnx``: :class:`keras_nmt.decoding.onnx_translator.OnnxTranslator`, the export's id-in/id-out
  search in onnxruntime, Python tokenization;
- ``onnx-int8``: the same with the export's int8 model (``--int8``).

Each path runs with vocabulary selection off (the exact search over every word) and on
(``--shortlist F,B``, the run's lexical table), as ``--selection`` says. The run is
exported twice into a temporary directory, removed at the end: as it is (the exact
SavedModel, the baseline of the ratios) and with ``--shortlist F,B --onnx --int8``
(the selecting SavedModel; the ONNX models, whose selection inputs turn it on and off). Sentences: ``--count`` non-empty lines
of ``--sentences`` (default: the run's valid source file), evenly spaced through the
file (corpora sorted by length, as Anki's valid split is, still give every length). Every path
gets the same sentences in batches of similar length (Translator and OnnxTranslator sort
by length; the SavedModel's batches are sorted the same way here); alpha is the run's.
Before each (path, beam, batch) cell the first batch is decoded once, untimed (tracing,
session warm-up). With ``--rounds N`` the whole grid is timed N times, round after round,
and each cell reports its median (every round's seconds are in the JSON); numpy's matmul
rate is measured before (the report's ``matmul_gflops``) and after. Output tokens: the
tokens of the best translation (EOS not counted; for the SavedModel, which returns text
only, its text tokenized again with the project's tokenizer, outside the timing: fewer
where detokenization joins tokens, as a barely trained model's ". . ." becoming "...").

Time against length: at batch 1 every sentence is timed alone; at ``--length-beam``
(default 5) the per-sentence seconds of each path are fitted with a least-squares line
of the source length (tokens), reported as slope, intercept and R^2, with the means of
5-token buckets, and plotted to ``--plot``.

FLOPs: each cell reports the model's useful FLOP/s, an estimate counted from the
configuration: per sentence the encoder over its source tokens and, for each of the
``beam`` hypotheses, one decoder step per output token (EOS included) with the output
layer over the batch's candidate words (every word without selection); divided by the
cell's seconds and compared with numpy's float32 matmul rate measured in the same run.
Work a batch spends on finished sentences or padding is not counted: the ratio says how
far the search is from the machine's limit.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile
from typing import Any, Callable, Sequence

from bench import _common

PROG = "decode_throughput"
PATHS = ("keras", "savedmodel", "onnx", "onnx-int8")
BUCKET = 5  # source tokens per bucket of the length table and plot
# The headline figures (ratios against the exact SavedModel) are taken at this beam and
# batch; the results pages compare them.
HEADLINE_BEAM, HEADLINE_BATCH = 5, 64


# ---------------------------------------------------------------------------- the paths

class KerasPath:
    def __init__(self, run_dir: str, weights: str, alpha: float, shortlist):
        from keras_nmt.decoding.keras_translator import Translator

        self.translator = Translator.from_run_dir(run_dir, weights=weights)
        self.alpha, self.shortlist = alpha, shortlist

    def __call__(self, lines: Sequence[str], beam: int, batch: int) -> list[int]:
        out = self.translator.translate(lines, beam_size=beam, alpha=self.alpha, batch_size=batch,
                                        shortlist=self.shortlist)
        return [len(t.tokens) for t in out]


class SavedModelPath:
    """The ``translate`` signature, fed batches sorted by source length like the others."""

    def __init__(self, savedmodel_dir: pathlib.Path, alpha: float, src: str, tgt: str):
        from keras_nmt.export.loaders import TF2Model

        self.model = TF2Model(savedmodel_dir)
        self.alpha, self.src, self.tgt = alpha, src, tgt

    def __call__(self, lines: Sequence[str], beam: int, batch: int) -> list[str]:
        from keras_nmt.text import word as tokenizer

        order = sorted(range(len(lines)), key=lambda i: len(tokenizer.tokenize(lines[i], self.src)))
        texts: list[str] = [""] * len(lines)
        for start in range(0, len(order), batch):
            chosen = order[start : start + batch]
            out = self.model.run("translate", sentences=[lines[i] for i in chosen],
                                 beam_size=beam, alpha=self.alpha)
            for i, text in zip(chosen, out["translations"]):
                texts[i] = text.decode("utf-8")
        return texts

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        from keras_nmt.text import word as tokenizer

        return [len(tokenizer.tokenize(text, self.tgt)) for text in texts]


class OnnxPath:
    def __init__(self, export_dir: pathlib.Path, name: str, alpha: float, int8: bool, select: bool):
        from keras_nmt.decoding.onnx_translator import OnnxTranslator

        self.translator = OnnxTranslator.from_export_dir(export_dir, name, int8=int8)
        self.alpha, self.select = alpha, select

    def __call__(self, lines: Sequence[str], beam: int, batch: int) -> list[int]:
        out = self.translator.translate(lines, beam_size=beam, alpha=self.alpha, batch_size=batch,
                                        shortlist=self.select)
        return [len(t.tokens) for t in out]


# ---------------------------------------------------------------------------- FLOPs

def step_flops(config, source_len: float, columns: float) -> float:
    """FLOPs of one decoder step of one hypothesis (multiply-adds count 2)."""
    n, e, a, l = config.hidden, config.embedding, config.attention, config.maxout
    flops = 2 * e * 3 * n + 2 * n * 3 * n  # GRU: input, state
    flops += 2 * (n + e) * 2 * l + 2 * l * columns  # deep output (state, word), output layer
    if config.uses_attention:
        # Scores, and the context's two projections weighted by alpha (Decoder.start).
        flops += 2 * n * a + 3 * source_len * a + 2 * source_len * (3 * n + 2 * l)
    return flops


def encoder_flops(config, source_len: float) -> float:
    """The encoder and what the search's memory computes once per sentence."""
    n, e, l = config.hidden, config.embedding, config.maxout
    directions = 2 if config.uses_attention else 1
    flops = source_len * directions * (2 * e * 3 * n + 2 * n * 3 * n)
    if config.uses_attention:  # U_a h_j, C h_j and C_o h_j at every position
        return flops + source_len * 2 * 2 * n * (config.attention + 3 * n + 2 * l)
    return flops + 2 * n * (3 * n + 2 * l)  # C c and C_o c of the fixed context


def useful_flops(config, source_lens, output_lens, beam: int, columns) -> float:
    """The search's useful work over sentences (see the module docstring); ``columns``:
    per sentence, the output words its batch was scored on."""
    return float(sum(encoder_flops(config, s + 1) + beam * (t + 1) * step_flops(config, s + 1, c)
                     for s, t, c in zip(source_lens, output_lens, columns)))


def batch_columns(source_ids: Sequence[Sequence[int]], batch: int, vocab_size: int,
                  table=None, shortlist=None) -> list[int]:
    """Per sentence, the output words of its batch (batches formed as the Translator forms
    them: sorted by source length, the sentences with a rare source word apart): every
    word, or the shortlist's candidates. ``table``: a Lexicon's ``selection_table``, whose
    marked rows select every word."""
    import numpy as np

    from keras_nmt.lexicon.table import marked_sources
    from keras_nmt.decoding.translation import batches_apart

    columns = [vocab_size] * len(source_ids)
    if table is None or shortlist is None:
        return columns
    frequent, best = shortlist
    rare = marked_sources(table)
    order = sorted(range(len(source_ids)), key=lambda i: len(source_ids[i]))
    for chosen in batches_apart(order, source_ids, batch, lambda ids: bool(rare[list(ids)].any())):
        if rare[[s for i in chosen for s in source_ids[i]]].any():
            continue  # a batch of rare sentences: the whole vocabulary
        words = {int(t) for i in chosen for s in source_ids[i] for t in table[s, :best]}
        count = len(words | set(range(4 + frequent))) if frequent else len(words | set(range(4)))
        for i in chosen:
            columns[i] = int(np.minimum(count, vocab_size))
    return columns


# ---------------------------------------------------------------------------- measuring

def time_cell(run: Callable, lines: Sequence[str], beam: int, batch: int) -> tuple[float, list, list[float]]:
    """(total seconds, outputs in line order, per-call seconds), after one untimed call
    on the first batch. Batch 1: one call per sentence, each timed; larger batches: one
    call over every line."""
    if batch > 1:
        seconds, outputs = _common.warm_then_time(lambda some: run(some, beam, batch), lines, batch)
        return seconds, outputs, []
    run(lines[:1], beam, 1)
    outputs, seconds = [], []
    for line in lines:
        took, output = _common.timed(lambda: run([line], beam, 1))
        outputs += output
        seconds.append(took)
    return sum(seconds), outputs, seconds


def linear_fit(lengths: Sequence[int], seconds: Sequence[float]) -> dict[str, Any]:
    """Least-squares seconds = slope * length + intercept, R^2, and 5-token bucket means."""
    import numpy as np

    x, y = np.asarray(lengths, np.float64), np.asarray(seconds, np.float64)
    if len(set(lengths)) >= 2:
        slope, intercept = np.polyfit(x, y, 1)
        residual = float(np.sum((y - (slope * x + intercept)) ** 2))
        total = float(np.sum((y - y.mean()) ** 2))
        r2 = 1.0 - residual / total if total > 0 else 1.0
    else:  # one length only: no slope to fit
        slope, intercept, r2 = 0.0, float(y.mean()), None
    buckets = []
    for low in range(1, int(x.max()) + 1, BUCKET):
        chosen = (x >= low) & (x < low + BUCKET)
        if chosen.any():
            buckets.append({"min_len": low, "max_len": low + BUCKET - 1, "sentences": int(chosen.sum()),
                            "mean_ms": 1000 * float(y[chosen].mean())})
    return {"slope_ms_per_token": 1000 * float(slope), "intercept_ms": 1000 * float(intercept),
            "r2": r2, "sentences": len(lengths), "buckets": buckets}


def length_figure(fits: dict[str, dict], points: dict[str, tuple], beam: int, path: pathlib.Path) -> None:
    """Per-sentence times (dots), bucket means (markers) and the fitted line, per path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.6))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for k, (name, fit) in enumerate(fits.items()):
        colour = f"C{k}"
        lengths, seconds = points[name]
        axes.scatter(lengths, [1000 * s for s in seconds], s=6, alpha=0.25, color=colour)
        middle = [(b["min_len"] + b["max_len"]) / 2 for b in fit["buckets"]]
        axes.plot(middle, [b["mean_ms"] for b in fit["buckets"]], "o", color=colour)
        ends = [min(lengths), max(lengths)]
        r2 = "-" if fit["r2"] is None else f"{fit['r2']:.2f}"
        axes.plot(ends, [fit["intercept_ms"] + fit["slope_ms_per_token"] * e for e in ends], "-",
                  color=colour, label=f"{name}: {fit['slope_ms_per_token']:.2f} ms/token + "
                                      f"{fit['intercept_ms']:.1f} ms, R²={r2}")
    axes.set_xlabel("Source sentence length (tokens)")
    axes.set_ylabel("ms per sentence (batch 1)")
    axes.set_title(f"Decoding time against source length, beam {beam}")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def headline(cells: Sequence[dict]) -> list[dict[str, Any]]:
    """The figures the results pages quote: each path's speed against the exact SavedModel
    at beam 5, batch 64, and the fastest beam-5 and greedy rates (None where the grid
    lacks what a figure needs)."""
    def rates(beam):
        return {(c["path"], c["selection"]): c["sentences_per_second"] for c in cells
                if c["beam"] == beam and c["batch"] == HEADLINE_BATCH}

    rate, greedy = rates(HEADLINE_BEAM), rates(1)
    exact = rate.get(("savedmodel", "off"))
    fastest = max(rate.items(), key=lambda item: item[1]) if rate else None
    fastest_greedy = max(greedy.items(), key=lambda item: item[1]) if greedy else None
    where = f"beam {HEADLINE_BEAM}, batch {HEADLINE_BATCH}"

    def name(item):
        return f"{item[0][0]} selection {item[0][1]}" if item else "-"

    rows = [{"figure": f"{path} selection {selection} / exact SavedModel ({where})",
             "value": value / exact if exact else None}
            for (path, selection), value in sorted(rate.items())
            if (path, selection) != ("savedmodel", "off")]
    rows.append({"figure": f"fastest: {name(fastest)}, sentences/s ({where})",
                 "value": fastest[1] if fastest else None})
    rows.append({"figure": f"fastest greedy: {name(fastest_greedy)}, sentences/s (beam 1, "
                           f"batch {HEADLINE_BATCH})",
                 "value": fastest_greedy[1] if fastest_greedy else None})
    return rows


# ---------------------------------------------------------------------------- command line

def build_parser():
    from keras_nmt.cli.common import positive_int, shortlist

    parser = _common.parser(PROG, __doc__)
    parser.add_argument("run_dir", help="a run directory")
    _common.add(parser, "weights")
    parser.add_argument("--export-dir", help="keep the exports here (EXPORT_DIR/exact, "
                                             "EXPORT_DIR/selected; reused when present) "
                                             "instead of a temporary directory")
    _common.add(parser, "name")
    _common.add(parser, "sentences", help="source lines (default: the run's valid source file)")
    _common.add(parser, "count", default=512, help="sentences (default 512)")
    _common.add(parser, "beams", default="1,5,10", help="beam sizes, comma-separated (default 1,5,10)")
    _common.add(parser, "batch_sizes", default="1,16,64",
                help="batch sizes, comma-separated (default 1,16,64)")
    parser.add_argument("--paths", default=",".join(PATHS), help=", ".join(PATHS))
    parser.add_argument("--shortlist", type=shortlist, default=(1000, 20), metavar="F,B",
                        help="vocabulary selection of the 'on' cells (default 1000,20)")
    parser.add_argument("--selection", default="off,on", help="off, on or both (default off,on)")
    parser.add_argument("--length-beam", type=positive_int, default=5,
                        help="beam of the time-against-length fit (batch 1 cells)")
    _common.add(parser, "rounds", help="time every cell this many times, round by round; "
                                       "report the medians (default 1)")
    parser.add_argument("--plot", metavar="PNG", default="bench-decode-length.png",
                        help="time-against-length figure (default %(default)s)")
    return parser


def _savedmodel_dir(export_dir: pathlib.Path, name: str) -> pathlib.Path:
    from keras_nmt.export import layout

    versions = layout.versions(export_dir / name)
    if not versions:
        raise SystemExit(f"{PROG}: error: {export_dir / name} holds no SavedModel version")
    return export_dir / name / str(versions[-1])


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    beams, batches = args.beams, args.batch_sizes
    paths = [p for p in args.paths.split(",") if p]
    if not paths or any(p not in PATHS for p in paths):
        parser.error(f"--paths: choose from {', '.join(PATHS)}")
    selections = [s for s in args.selection.split(",") if s]
    if not selections or any(s not in ("off", "on") for s in selections):
        parser.error("--selection: off, on or off,on")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    bench = _common.Bench(PROG, args, argv)

    from keras_nmt.core.errors import LexiconError, RunDirError
    from keras_nmt.text import word as tokenizer
    from keras_nmt.rundir.run_directory import RunDir

    run = RunDir(args.run_dir)
    try:
        config, info = run.load_config(), run.load_data_info()
        table = run.load_lexicon().selection_table() if "on" in selections else None
        valid = None if args.sentences else run.split_files("valid", info, needed_for=PROG)
    except (RunDirError, LexiconError, OSError, ValueError) as error:
        parser.error(f"{args.run_dir}: {error}")
    source_file = args.sentences or (valid.source if valid else None)
    if not source_file:
        parser.error("the run has no valid split: give --sentences FILE")
    lines = _common.sentences(source_file, args.count, parser=parser)
    lengths = [len(tokenizer.tokenize(line, info["src"])) for line in lines]
    alpha = config.length_alpha
    matmul = bench.matmul_gflops()

    cells, per_sentence = [], {}
    source_ids = None
    with tempfile.TemporaryDirectory(prefix="decode_throughput_") as tmp:
        export_dir = pathlib.Path(args.export_dir or tmp)
        frequent, best = args.shortlist
        needs_exact = "savedmodel" in paths and "off" in selections
        needs_selected = ("savedmodel" in paths and "on" in selections) or any(
            p.startswith("onnx") for p in paths)
        if needs_exact:
            _common.export(args.run_dir, export_dir / "exact", args.name, args.weights)
        if needs_selected:
            extra = ["--onnx", "--shortlist", f"{frequent},{best}"]
            extra += ["--int8"] if "onnx-int8" in paths else []
            _common.export(args.run_dir, export_dir / "selected", args.name, args.weights, extra)
        runners = {}
        for name in paths:
            for selection in selections:
                select = selection == "on"
                if name == "keras":
                    run_path = KerasPath(args.run_dir, args.weights, alpha,
                                         args.shortlist if select else None)
                    if source_ids is None:
                        source_ids = run_path.translator.encode(lines)
                elif name == "savedmodel":
                    where = export_dir / ("selected" if select else "exact")
                    run_path = SavedModelPath(_savedmodel_dir(where, args.name), alpha,
                                              info["src"], info["tgt"])
                else:
                    run_path = OnnxPath(export_dir / "selected", args.name, alpha,
                                        int8=name == "onnx-int8", select=select)
                    if source_ids is None:
                        source_ids = [run_path.translator.source_ids(line)[0] for line in lines]
                runners[name, selection] = run_path
        # Every cell once a round, the rounds one after another: a cell's figure is its
        # median over the rounds, so a minute of a slower machine moves one figure of
        # each cell, not every figure of one path.
        timings: dict[tuple, list] = {}
        for round_number in range(1, args.rounds + 1):
            for (name, selection), run_path in runners.items():
                for beam in beams:
                    for batch in batches:
                        bench.log(f"round {round_number}/{args.rounds}: {name} selection "
                                  f"{selection} beam {beam} batch {batch}: {len(lines)} sentences")
                        timings.setdefault((name, selection, beam, batch), []).append(
                            time_cell(run_path, lines, beam, batch))
        for (name, selection, beam, batch), measured in timings.items():
            every = [m[0] for m in measured]
            seconds = statistics.median(every)
            outputs = measured[0][1]
            tokens = runners[name, selection].count_tokens(outputs) if name == "savedmodel" else outputs
            cells.append({"path": name, "selection": selection, "beam": beam,
                          "batch": batch, "sentences": len(lines), "seconds": seconds,
                          "seconds_each_round": every,
                          "sentences_per_second": len(lines) / seconds,
                          "output_tokens": int(sum(tokens)),
                          "output_tokens_per_second": sum(tokens) / seconds,
                          "_tokens": tokens})
            if batch == 1 and beam == args.length_beam:
                per_sentence[f"{name} selection {selection}"] = [
                    statistics.median(times) for times in zip(*(m[2] for m in measured))]
        del runners
        matmul_after = _common.matmul_gflops(args.matmul_rounds)
    if source_ids is None:  # only SavedModel paths ran: ids from the run's codec
        codec = run.codecs()[0]
        source_ids = [codec.encode(line) + [3] for line in lines]
    for cell in cells:
        columns = batch_columns(source_ids, cell["batch"], config.tgt_vocab_size, table,
                                args.shortlist if cell["selection"] == "on" else None)
        flops = useful_flops(config, lengths, cell.pop("_tokens"), cell["beam"], columns)
        cell["mean_columns"] = sum(columns) / len(columns)
        cell["gflop_per_second"] = flops / cell["seconds"] / 1e9
        cell["of_matmul_rate"] = cell["gflop_per_second"] / matmul

    fits = {name: linear_fit(lengths, each) for name, each in per_sentence.items()}
    plot = None
    if fits:
        plot = pathlib.Path(args.plot)
        length_figure(fits, {name: (lengths, each) for name, each in per_sentence.items()},
                      args.length_beam, plot)
    figures = headline(cells)
    settings = {"run_dir": str(args.run_dir), "weights": args.weights,
                "shortlist": list(args.shortlist), "selection": selections,
                "export_dir": args.export_dir, "rounds": args.rounds,
                "sentences_file": str(source_file), "sentences": len(lines),
                "mean_source_tokens": sum(lengths) / len(lengths), "alpha": alpha,
                "beams": beams, "batch_sizes": batches, "paths": paths,
                "length_beam": args.length_beam, "config": config.to_dict()}
    results = {
        "cells": cells,
        "time_against_length": {"beam": args.length_beam, "batch": 1, "fits": fits,
                                "plot": str(plot) if plot else None},
        "headline": figures,
        "matmul_gflops_after": matmul_after,
    }
    print(_common.table(cells, [
        ("path", "path", ""), ("selection", "selection", ""), ("beam", "beam", "d"),
        ("batch", "batch", "d"), ("sentences_per_second", "sent/s", ",.1f"),
        ("output_tokens_per_second", "out tok/s", ",.0f"), ("mean_columns", "words", ",.0f"),
        ("gflop_per_second", "GFLOP/s", ".1f"), ("of_matmul_rate", "of matmul", ".1%"),
        ("seconds", "seconds", ".2f")]))
    print(f"numpy float32 matmul in this run: {matmul:.1f} GFLOP/s "
          f"before, {matmul_after:.1f} after; medians of "
          f"{args.rounds} round(s)")
    if fits:
        print(f"\ntime per sentence against source length (beam {args.length_beam}, batch 1):")
        print(_common.table([{"path": k, **v} for k, v in fits.items()], [
            ("path", "path", ""), ("slope_ms_per_token", "ms/token", ".3f"),
            ("intercept_ms", "intercept ms", ".2f"), ("r2", "R²", ".3f"), ("sentences", "sentences", "d")]))
        print(f"plot: {plot}")
    print()
    print(_common.table(figures, [("figure", "figure", ""), ("value", "value", ",.2f")]))
    bench.write(results, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
