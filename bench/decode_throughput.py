"""Decoding throughput: sentences/s and output tokens/s of one run's beam search through
the Keras model, the exported SavedModel and onnxruntime, at several beams and batch
sizes; and the time per sentence against source length.

Usage (one command; prints tables, writes JSON and a PNG)::

    PYTHONPATH=. python bench/decode_throughput.py RUN_DIR [--export-dir EXPORT_DIR] \\
        [--sentences FILE] [--count 512] [--beams 1,5,10] [--batches 1,16,64] \\
        [--json bench-decode.json] [--plot bench-decode-length.png]

Paths (``--paths``):

- ``keras``: :class:`keras_nmt.translator.Translator` (the run's best weights), Python
  tokenization around the model's compiled beam search;
- ``savedmodel``: the export's ``translate`` signature (raw text in and out, beam and
  alpha as inputs) through ``tf.saved_model.load``;
- ``onnx``: :class:`keras_nmt.serving.onnx_translator.OnnxTranslator`, the export's id-in/id-out
  search in onnxruntime, Python tokenization.

Without ``--export-dir`` the run is exported first (``python -m export RUN_DIR --onnx``)
into a temporary directory, removed at the end. Sentences: ``--count`` non-empty lines
of ``--sentences`` (default: the run's valid source file), evenly spaced through the
file (corpora sorted by length, as Anki's valid split is, still give every length). Every path
gets the same sentences in batches of similar length (Translator and OnnxTranslator sort
by length; the SavedModel's batches are sorted the same way here); alpha is the run's.
Before each (path, beam, batch) cell the first batch is decoded once, untimed (tracing,
session warm-up). Output tokens: the tokens of the best translation (EOS not counted;
for the SavedModel, which returns text only, its text tokenized again with the
project's tokenizer, outside the timing: fewer where detokenization joins tokens, as a
barely trained model's ". . ." becoming "...").

Time against length: at batch 1 every sentence is timed alone; at ``--length-beam``
(default 5) the per-sentence seconds of each path are fitted with a least-squares line
of the source length (tokens), reported as slope, intercept and R^2, with the means of
5-token buckets, and plotted to ``--plot``.

Targets (pass/fail columns; "n/a" when the grid leaves out beam 5 or batch 64):
onnxruntime >= 2x the SavedModel's sentences/s at beam 5, batch 64; the SavedModel
>= 120 sentences/s at beam 5, batch 64.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402

PROG = "decode_throughput"
PATHS = ("keras", "savedmodel", "onnx")
BUCKET = 5  # source tokens per bucket of the length table and plot
TARGET_BEAM, TARGET_BATCH = 5, 64
SAVEDMODEL_TARGET = 120.0  # sentences/s
ONNX_SPEEDUP_TARGET = 2.0


# ---------------------------------------------------------------------------- the paths

class KerasPath:
    def __init__(self, run_dir: str, alpha: float):
        from keras_nmt.translator import Translator

        self.translator = Translator.from_run_dir(run_dir)
        self.alpha = alpha

    def __call__(self, lines: Sequence[str], beam: int, batch: int) -> list[int]:
        out = self.translator.translate(lines, beam_size=beam, alpha=self.alpha, batch_size=batch)
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
    def __init__(self, export_dir: pathlib.Path, name: str, alpha: float):
        from keras_nmt.serving.onnx_translator import OnnxTranslator

        self.translator = OnnxTranslator.from_export_dir(export_dir, name)
        self.alpha = alpha

    def __call__(self, lines: Sequence[str], beam: int, batch: int) -> list[int]:
        out = self.translator.translate(lines, beam_size=beam, alpha=self.alpha, batch_size=batch)
        return [len(t.tokens) for t in out]


# ---------------------------------------------------------------------------- measuring

def time_cell(run: Callable, lines: Sequence[str], beam: int, batch: int) -> tuple[float, list, list[float]]:
    """(total seconds, outputs in line order, per-call seconds). Batch 1: one call per
    sentence, each timed; larger batches: one call over every line."""
    run(lines[:batch], beam, batch)  # warm-up, untimed
    if batch == 1:
        outputs, seconds = [], []
        for line in lines:
            start = time.perf_counter()
            outputs += run([line], beam, 1)
            seconds.append(time.perf_counter() - start)
        return sum(seconds), outputs, seconds
    start = time.perf_counter()
    outputs = run(lines, beam, batch)
    return time.perf_counter() - start, outputs, []


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


def targets(cells: Sequence[dict]) -> list[dict[str, Any]]:
    rate = {c["path"]: c["sentences_per_second"] for c in cells
            if c["beam"] == TARGET_BEAM and c["batch"] == TARGET_BATCH}
    saved, onnx = rate.get("savedmodel"), rate.get("onnx")
    speedup = onnx / saved if saved and onnx else None

    def verdict(value, goal):
        return "n/a" if value is None else ("PASS" if value >= goal else "FAIL")

    where = f"beam {TARGET_BEAM}, batch {TARGET_BATCH}"
    return [
        {"target": f"onnxruntime / SavedModel sentences/s ({where})", "measured": speedup,
         "goal": ONNX_SPEEDUP_TARGET, "result": verdict(speedup, ONNX_SPEEDUP_TARGET)},
        {"target": f"SavedModel sentences/s ({where})", "measured": saved,
         "goal": SAVEDMODEL_TARGET, "result": verdict(saved, SAVEDMODEL_TARGET)},
    ]


# ---------------------------------------------------------------------------- command line

def _int_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise ValueError(text)
    return values


def build_parser():
    from keras_nmt.cli.common import OneLineParser, positive_int

    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory (its best weights)")
    parser.add_argument("--export-dir", help="an existing export of RUN_DIR made with --onnx "
                                             "(default: export into a temporary directory)")
    parser.add_argument("--name", default="nmt", help="model name in the export (default nmt)")
    parser.add_argument("--sentences", help="source lines (default: the run's valid source file)")
    parser.add_argument("--count", type=positive_int, default=512, help="sentences (default 512)")
    parser.add_argument("--beams", default="1,5,10")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--paths", default=",".join(PATHS), help="keras, savedmodel, onnx")
    parser.add_argument("--length-beam", type=positive_int, default=5,
                        help="beam of the time-against-length fit (batch 1 cells)")
    parser.add_argument("--note", default="", help="stored in the JSON (e.g. 'under load')")
    parser.add_argument("--json", metavar="FILE", help="write the report here")
    parser.add_argument("--plot", metavar="PNG", default="bench-decode-length.png",
                        help="time-against-length figure (default %(default)s)")
    return parser


def _export(run_dir: str, out: pathlib.Path, name: str) -> None:
    from keras_nmt.cli import export as cli

    if cli.main([run_dir, "--out", str(out), "--name", name, "--onnx"]) != 0:
        raise SystemExit(f"{PROG}: error: the export of {run_dir} failed (its message is above)")


def _savedmodel_dir(export_dir: pathlib.Path, name: str) -> pathlib.Path:
    versions = [p for p in (export_dir / name).glob("*") if p.name.isdigit()]
    if not versions:
        raise SystemExit(f"{PROG}: error: {export_dir / name} holds no SavedModel version")
    return max(versions, key=lambda p: int(p.name))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        beams, batches = _int_list(args.beams), _int_list(args.batches)
    except ValueError:
        parser.error("--beams and --batches take positive integers, comma-separated")
    paths = [p for p in args.paths.split(",") if p]
    if not paths or any(p not in PATHS for p in paths):
        parser.error(f"--paths: choose from {', '.join(PATHS)}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from keras_nmt.text import word as tokenizer
    from keras_nmt.rundir import RunDir, RunDirError

    run = RunDir(args.run_dir)
    try:
        config, info = run.load_config(), run.load_data_info()
    except (RunDirError, OSError, ValueError) as error:
        parser.error(f"{args.run_dir}: {error}")
    source_file = args.sentences or info["splits"].get("valid", {}).get("source")
    if not source_file:
        parser.error("the run has no valid split: give --sentences FILE")
    try:
        text = pathlib.Path(source_file).read_text(encoding="utf-8")
    except OSError as error:
        parser.error(f"cannot read {source_file}: {error.strerror}")
    lines = _common.spread_sentences(text, args.count)
    if not lines:
        parser.error(f"{source_file} has no non-empty line")
    lengths = [len(tokenizer.tokenize(line, info["src"])) for line in lines]
    alpha = config.length_alpha

    cells, per_sentence = [], {}
    with tempfile.TemporaryDirectory(prefix="decode_throughput_") as tmp:
        export_dir = pathlib.Path(args.export_dir or tmp)
        if not args.export_dir and {"savedmodel", "onnx"} & set(paths):
            print(f"{PROG}: exporting {args.run_dir} (SavedModel + ONNX)", file=sys.stderr, flush=True)
            _export(args.run_dir, export_dir, args.name)
        for name in paths:
            if name == "keras":
                run_path = KerasPath(args.run_dir, alpha)
            elif name == "savedmodel":
                run_path = SavedModelPath(_savedmodel_dir(export_dir, args.name), alpha, info["src"], info["tgt"])
            else:
                run_path = OnnxPath(export_dir, args.name, alpha)
            for beam in beams:
                for batch in batches:
                    print(f"{PROG}: {name} beam {beam} batch {batch}: {len(lines)} sentences",
                          file=sys.stderr, flush=True)
                    seconds, outputs, each = time_cell(run_path, lines, beam, batch)
                    tokens = run_path.count_tokens(outputs) if name == "savedmodel" else outputs
                    cells.append({"path": name, "beam": beam, "batch": batch, "sentences": len(lines),
                                  "seconds": seconds, "sentences_per_second": len(lines) / seconds,
                                  "output_tokens": int(sum(tokens)),
                                  "output_tokens_per_second": sum(tokens) / seconds})
                    if batch == 1 and beam == args.length_beam:
                        per_sentence[name] = each
            del run_path

    fits = {name: linear_fit(lengths, each) for name, each in per_sentence.items()}
    plot = None
    if fits:
        plot = pathlib.Path(args.plot)
        length_figure(fits, {name: (lengths, each) for name, each in per_sentence.items()},
                      args.length_beam, plot)
    checks = targets(cells)
    report = {
        "benchmark": "decode_throughput", "note": args.note, "machine": _common.machine(),
        "settings": {"run_dir": str(args.run_dir), "export_dir": args.export_dir,
                     "sentences_file": str(source_file), "sentences": len(lines),
                     "mean_source_tokens": sum(lengths) / len(lengths), "alpha": alpha,
                     "beams": beams, "batches": batches, "paths": paths,
                     "length_beam": args.length_beam, "config": config.to_dict()},
        "results": cells,
        "time_against_length": {"beam": args.length_beam, "batch": 1, "fits": fits,
                                "plot": str(plot) if plot else None},
        "targets": checks,
    }
    print(_common.table(cells, [
        ("path", "path", ""), ("beam", "beam", "d"), ("batch", "batch", "d"),
        ("sentences_per_second", "sent/s", ",.1f"), ("output_tokens_per_second", "out tok/s", ",.0f"),
        ("seconds", "seconds", ".2f")]))
    if fits:
        print(f"\ntime per sentence against source length (beam {args.length_beam}, batch 1):")
        print(_common.table([{"path": k, **v} for k, v in fits.items()], [
            ("path", "path", ""), ("slope_ms_per_token", "ms/token", ".3f"),
            ("intercept_ms", "intercept ms", ".2f"), ("r2", "R²", ".3f"), ("sentences", "sentences", "d")]))
        print(f"plot: {plot}")
    print()
    print(_common.table(checks, [("target", "target", ""), ("measured", "measured", ".2f"),
                                 ("goal", "goal", "g"), ("result", "result", "")]))
    _common.write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
