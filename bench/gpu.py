"""The GPU benchmark: training and beam-search decoding on the GPU TensorFlow sees.

Training (bench/precision.py's interleaved rounds): RNNsearch at the compact and the
paper's size, batch 80 and larger, float32 / mixed_float16 / mixed_bfloat16, --jit off
and on; target tokens/s, sentences/s, compilations, padding efficiency and the peak GPU
memory of each setting. Decoding: beam 5 at batch 64 and 256 (sentences/s and output
tokens/s) with the Translator of --run, or without one the compact float32 model the
training part just trained (a barely trained model decodes to the length limit, so its
sentences/s understate a trained model's). Refuses with one line when TensorFlow sees
no GPU.

    python bench/gpu.py --data data/anki-fra-eng [--run RUN_DIR [--weights averaged]]
        [--json gpu.json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common, precision  # noqa: E402

PROG = "gpu.py"
DECODE_BATCHES = (64, 256)
DECODE_BEAM = 5


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    precision.add_arguments(parser, batches="80,256", sizes="compact,paper")
    parser.add_argument("--run", help="a trained run directory to decode with")
    parser.add_argument("--weights", choices=("best", "last", "averaged"), default="best",
                        help="which of --run's weights decode")
    parser.add_argument("--sentences", type=int, default=1024,
                        help="valid sentences decoded per batch size")
    parser.add_argument("--json", default="gpu.json", help="where to write the results")
    return parser.parse_args(argv)


def decode_rates(translator, lines: list[str], precision: str) -> list[dict]:
    rows = []
    for batch in DECODE_BATCHES:
        translator.translate(lines[:batch], beam_size=DECODE_BEAM, batch_size=batch)  # trace
        start = time.perf_counter()
        results = translator.translate(lines, beam_size=DECODE_BEAM, batch_size=batch)
        seconds = time.perf_counter() - start
        tokens = sum(len(r.tokens) for r in results)
        rows.append({"precision": precision, "beam": DECODE_BEAM, "batch": batch,
                     "sentences": len(lines),
                     "sentences_per_second": len(lines) / seconds,
                     "output_tokens_per_second": tokens / seconds})
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        print(f"{PROG}: error: TensorFlow sees no GPU on this machine; this benchmark "
              "measures one (bench/precision.py measures the CPU)", file=sys.stderr)
        return 2
    tf.get_logger().setLevel("ERROR")
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    trainers, config, info = precision.make_trainers(args, scratch)
    training = precision.measure(trainers, args, log=log)
    print(_common.table(training, precision.COLUMNS))

    from keras_nmt.rundir import RunDir
    from keras_nmt.translator import Translator

    valid = RunDir(scratch / "run").split_files("valid", info, needed_for=PROG)
    lines = _common.spread([source for source, _ in valid.pairs()], args.sentences)
    decoding = []
    if args.run:
        # A trained model in each precision measured: mixed precision decodes too.
        decoded_with = f"{args.run} ({args.weights} weights)"
        for name in args.precisions.split(","):
            translator = Translator.from_run_dir(args.run, weights=args.weights, precision=name)
            decoding += decode_rates(translator, lines, name)
    else:
        setting = next(s for s in trainers if s[0] == "compact" and s[2] == "float32")  # any jit
        translator = Translator(trainers[setting].model, *RunDir(scratch / "run").codecs())
        decoded_with = f"the benchmark's {setting} model"
        decoding = decode_rates(translator, lines, "float32")
    print(_common.table(decoding, [
        ("precision", "precision", "s"), ("beam", "beam", "d"), ("batch", "batch", "d"),
        ("sentences_per_second", "sent/s", ",.1f"), ("output_tokens_per_second", "tok/s", ",.0f"),
    ]))
    details = tf.config.experimental.get_device_details(gpus[0])
    report = {
        "gpu": details.get("device_name"), "compute_capability": details.get("compute_capability"),
        "data": args.data, "config": config.to_dict(), "training": training,
        "decoding": {"with": decoded_with, "results": decoding},
        "machine": _common.machine(),
    }
    pathlib.Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
