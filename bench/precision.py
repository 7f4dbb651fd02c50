"""Training throughput of each --precision x --jit setting, by model size and batch size
(and by the values of any one Config field with --compare); on a GPU, and beam search's.

Trains one RNNsearch per setting, all fed the same kind of batches from one corpus, and
times the training step (input pipeline included) in interleaved rounds: round 1 of
every setting, then round 2 of every setting, ... so that a change in the machine's load
hits all settings alike. Warm-up steps (tracing, XLA compilation of the first shapes)
are not timed. With --jit the batches are padded to widths that are multiples of 8, as
``keras-nmt train --jit`` pads them (Config.length_multiple), so XLA compiles once per
width; any compilation left after the warm-up stays in the timed rounds, as in a real run.
A size (``--sizes``, as ``keras-nmt train --size`` names them, or E/H/N/L) sets the
model's dimensions; the batch size is the grid's.

Reported per setting: target tokens/s and sentences/s (median of the rounds), the
training-step compilations, the padding efficiency (real target tokens / padded target
slots of the timed batches), and on a GPU the peak GPU memory of its warm-up.

``--decode`` (or ``--run RUN_DIR``) then times beam-5 decoding at ``--decode-batch-sizes``
(sentences/s and output tokens/s over ``--count`` valid sentences, after one untimed
batch): with the Translator of ``--run`` in each precision of the grid, or without one
with the grid's first float32 model (a barely trained model decodes to the length limit,
so its sentences/s understate a trained model's). ``--gpu`` refuses with one line when
TensorFlow sees no GPU, and reports the GPU's name.

    python -m bench.precision [--data builtin|DIR] [--sizes medium,paper] [--batch-sizes 80]
        [--precisions float32,mixed_bfloat16,mixed_float16] [--jit both|on|off]
        [--set FIELD=VALUE ...] [--compare FIELD=V1,V2] [--rounds 3] [--steps 20] [--warmup 10]
        [--gpu] [--decode | --run RUN_DIR [--weights averaged]] [--json precision.json]
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import statistics
import sys
import tempfile

from bench import _common

PROG = "precision"
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
DECODE_BEAM = 5


def build_parser() -> argparse.ArgumentParser:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", default="builtin",
                help="'builtin' (generated) or a corpus directory (train.en/.fr ...)")
    _common.add(parser, "sizes", default="medium", help="model sizes, comma-separated: compact, "
                "medium, paper (keras-nmt train --size; their dimensions) or E/H/N/L@B "
                "(default medium)")
    _common.add(parser, "batch_sizes", default="80", help="batch sizes, comma-separated (default 80)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--jit", choices=("both", "on", "off"), default="both")
    _common.add(parser, "vocab_size")
    _common.add(parser, "rounds", default=3, help="timed rounds per setting (default 3)")
    _common.add(parser, "steps", default=20, help="training steps per round (default 20)")
    _common.add(parser, "warmup", default=10, help="untimed steps per setting first (default 10)")
    parser.add_argument("--variant", default="search50")
    parser.add_argument("--compare", metavar="FIELD=V1,V2",
                        help="one more grid axis: a Config field and its values, e.g. "
                        "sampled_softmax=0,4096, or recipe=none,budget (a training recipe of "
                        "config.RECIPES, its batch size left to --batch-sizes); relative "
                        "figures are against the first")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a Config field of every setting (repeatable), e.g. "
                        "sampled_softmax=4096 beside --compare label_smoothing=0,0.1")
    parser.add_argument("--gpu", action="store_true",
                        help="measure the GPU TensorFlow sees; refuse without one")
    parser.add_argument("--decode", action="store_true",
                        help="also time beam-5 decoding (with --run's model, else the grid's "
                             "first float32 one)")
    parser.add_argument("--run", metavar="RUN_DIR", help="a trained run to decode with (--decode)")
    _common.add(parser, "weights")
    parser.add_argument("--decode-batch-sizes", type=_common.int_list, default="64,256",
                        metavar="N,...", help="decoding batch sizes (default 64,256)")
    _common.add(parser, "count", default=1024, help="valid sentences decoded per batch size "
                "(default 1024)")
    return parser


def compared(args) -> tuple[str | None, list]:
    """The --compare field and its values, parsed as that Config field's type."""
    if not args.compare:
        return None, [None]
    from keras_nmt.core.config import parse_overrides

    field, _, values = args.compare.partition("=")
    if field == "recipe":
        from keras_nmt.core.config import RECIPES

        names = values.split(",")
        unknown = [name for name in names if name != "none" and name not in RECIPES]
        if unknown:
            raise ValueError(f"--compare recipe: unknown recipe {unknown[0]!r}")
        return field, names
    return field, [parse_overrides([f"{field}={v}"])[field] for v in values.split(",")]


def compared_values(field: str | None, value) -> dict:
    """The Config fields one value of the --compare axis sets."""
    from keras_nmt.core.config import RECIPES

    if field == "recipe":
        return {k: v for k, v in RECIPES.get(value, {}).items() if k != "batch_size"}
    return {field: value} if field else {}


def settings_of(args) -> list[tuple]:
    """(size, batch, precision, jit, compared value) for every setting of the grid."""
    jits = {"both": (False, True), "on": (True,), "off": (False,)}[args.jit]
    return list(itertools.product(
        [name for name, _ in args.sizes], args.batch_sizes,
        args.precisions.split(","), jits, compared(args)[1],
    ))


def make_trainers(args, scratch: pathlib.Path):
    """One Trainer per setting, on the run set up from ``args.data``; returns
    (trainers by setting, the base config, the run's data info)."""
    from keras_nmt.data import pipelines as data
    from keras_nmt.core.config import JIT_LENGTH_MULTIPLE, parse_overrides
    from keras_nmt.runner.run_data import prepare
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.runner.train_options import TrainOptions, new_run_config

    run = RunDir(scratch / "run")
    overrides = {"src_vocab_size": args.vocab_size, "tgt_vocab_size": args.vocab_size,
                 **parse_overrides(args.set)}
    options = TrainOptions(variant=args.variant, data=args.data, out=str(run.path),
                           overrides=overrides, quiet=True).for_new_run()
    config, info = prepare(options, new_run_config(options), run, log=lambda text: None)
    config = config.replace(eval_every=10**9, checkpoint_every=10**9)
    encoders = run.graph_encoders()
    files = run.split_files("train", info, needed_for="the benchmark")
    sizes = dict(args.sizes)
    trainers = {}
    field = compared(args)[0]
    for size, batch, precision, jit, value in settings_of(args):
        dimensions = {k: sizes[size][k] for k in _common.DIMENSIONS}
        setting = config.replace(**dimensions, batch_size=batch, precision=precision,
                                 length_multiple=JIT_LENGTH_MULTIPLE if jit else 0,
                                 **compared_values(field, value))
        batches = data.training_batches(files, *encoders, data.Batching.from_config(setting))
        name = f"{size}-{batch}-{precision}-{'jit' if jit else 'nojit'}-{value}"
        trainers[size, batch, precision, jit, value] = _common.new_trainer(
            setting, batches, scratch / name, train_pairs=info["train"]["kept"], jit_compile=jit)
    return trainers, config, info


def _gpu_peak_bytes(reset: bool = False) -> int | None:
    import tensorflow as tf

    if not tf.config.list_logical_devices("GPU"):
        return None
    if reset:
        tf.config.experimental.reset_memory_stats("GPU:0")
        return None
    return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])


def run_steps(trainer, count: int) -> dict:
    """``count`` training steps; tokens, padded target slots, sentences, seconds, last loss."""
    totals = {"tokens": 0, "slots": 0, "sentences": 0, "loss": float("nan")}

    def steps():
        for _ in range(count):
            step = _common.train_step(trainer, next(trainer.iterator))
            for key in ("tokens", "slots", "sentences"):
                totals[key] += step[key]
            totals["loss"] = step["loss"]

    seconds, _ = _common.timed(steps)
    return {**totals, "seconds": seconds}


def measure(trainers: dict, args, log=lambda text: None) -> list[dict]:
    """Warm every setting up, then time interleaved rounds; one row per setting."""
    peaks = {}
    for setting, trainer in trainers.items():
        log(f"warming up {setting}")
        _gpu_peak_bytes(reset=True)
        run_steps(trainer, args.warmup)
        peaks[setting] = _gpu_peak_bytes()
    rounds: dict = {setting: [] for setting in trainers}
    for number in range(args.rounds):
        for setting, trainer in trainers.items():
            rounds[setting].append(run_steps(trainer, args.steps))
        log(f"round {number + 1}/{args.rounds} done")
    rows = []
    for setting, results in rounds.items():
        size, batch, precision, jit, value = setting
        token_rates = [r["tokens"] / r["seconds"] for r in results]
        sentence_rates = [r["sentences"] / r["seconds"] for r in results]
        rows.append({
            "size": size, "batch": batch, "precision": precision, "jit": jit, "compare": value,
            "target_tokens_per_second": token_rates,
            "median": statistics.median(token_rates),
            "sentences_per_second": statistics.median(sentence_rates),
            "compilations": trainers[setting].compilations(),
            "padding_efficiency": sum(r["tokens"] for r in results) / sum(r["slots"] for r in results),
            "peak_gpu_mib": None if peaks[setting] is None else peaks[setting] / 2**20,
            "last_loss": results[-1]["loss"],
        })
    first = rows[0]["compare"]
    for row in rows:  # against float32 without jit (and the first compared value)
        base = next((r for r in rows if (r["size"], r["batch"], r["precision"], r["jit"], r["compare"])
                     == (row["size"], row["batch"], "float32", False, first)), None)
        row["relative_to_float32"] = row["median"] / base["median"] if base else None
    return rows


def decode_rates(translator, lines: list[str], precision: str, batch_sizes) -> list[dict]:
    """Beam-5 sentences/s and output tokens/s of ``translator`` at each batch size."""
    rows = []
    for batch in batch_sizes:
        seconds, results = _common.warm_then_time(
            lambda some: translator.translate(some, beam_size=DECODE_BEAM, batch_size=batch),
            lines, batch)
        tokens = sum(len(r.tokens) for r in results)
        rows.append({"precision": precision, "beam": DECODE_BEAM, "batch": batch,
                     "sentences": len(lines),
                     "sentences_per_second": len(lines) / seconds,
                     "output_tokens_per_second": tokens / seconds})
    return rows


def decode(args, trainers: dict, scratch: pathlib.Path, info: dict) -> dict:
    """Decoding rates with --run's Translator in each precision of the grid, or with the
    grid's first float32 model."""
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.decoding.keras_translator import Translator

    valid = RunDir(scratch / "run").split_files("valid", info, needed_for="--decode")
    lines = _common.spread([source for source, _ in valid.pairs()], args.count)
    rows = []
    if args.run:  # a trained model in each precision measured: mixed precision decodes too
        decoded_with = f"{args.run} ({args.weights} weights)"
        for name in args.precisions.split(","):
            translator = Translator.from_run_dir(args.run, weights=args.weights, precision=name)
            rows += decode_rates(translator, lines, name, args.decode_batch_sizes)
    else:
        setting = next((s for s in trainers if s[2] == "float32"), next(iter(trainers)))
        translator = Translator(trainers[setting].model, *RunDir(scratch / "run").codecs())
        decoded_with = f"the benchmark's {setting} model"
        rows = decode_rates(translator, lines, setting[2], args.decode_batch_sizes)
    return {"with": decoded_with, "results": rows}


COLUMNS = [
    ("size", "size", "s"), ("batch", "batch", "d"), ("precision", "precision", "s"),
    ("jit", "jit", ""), ("compare", "compared", ""), ("median", "tgt tok/s", ",.0f"),
    ("sentences_per_second", "sent/s", ",.1f"), ("relative_to_float32", "relative", ".2f"),
    ("compilations", "compiles", "d"), ("padding_efficiency", "pad eff", ".3f"),
    ("peak_gpu_mib", "GPU MiB", ",.0f"), ("last_loss", "loss", ".2f"),
]
DECODE_COLUMNS = [
    ("precision", "precision", "s"), ("beam", "beam", "d"), ("batch", "batch", "d"),
    ("sentences_per_second", "sent/s", ",.1f"), ("output_tokens_per_second", "tok/s", ",.0f"),
]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        compared(args)
    except ValueError as error:  # an unknown recipe or a value the field does not take
        parser.error(str(error))
    bench = _common.Bench(PROG, args, argv)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if args.gpu and not gpus:
        print(f"{parser.prog}: error: TensorFlow sees no GPU on this machine; --gpu measures "
              "one (without --gpu this benchmark measures the CPU)", file=sys.stderr)
        return 2
    tf.get_logger().setLevel("ERROR")  # many trainers' step functions: retracing warnings
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="bench-precision-"))
    trainers, config, info = make_trainers(args, scratch)
    rows = measure(trainers, args, log=bench.log)
    print(_common.table(rows, COLUMNS))
    decoding = None
    if args.decode or args.run:
        decoding = decode(args, trainers, scratch, info)
        print(_common.table(decoding["results"], DECODE_COLUMNS))
    device = None
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        device = {"name": details.get("device_name"),
                  "compute_capability": details.get("compute_capability")}
    bench.write({"training": rows, "decoding": decoding}, {
        "data": args.data, "variant": args.variant, "config": config.to_dict(),
        "compare": args.compare, "gpu": device,
        "rounds": args.rounds, "steps_per_round": args.steps, "warmup_steps": args.warmup,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
