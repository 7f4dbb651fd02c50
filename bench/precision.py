"""Training throughput of each --precision x --jit setting, by model size and batch size
(and by the values of any one Config field with --compare).

Trains one RNNsearch per setting, all fed the same kind of batches from one corpus, and
times the training step (input pipeline included) in interleaved rounds: round 1 of
every setting, then round 2 of every setting, ... so that a change in the machine's load
hits all settings alike. Warm-up steps (tracing, XLA compilation of the first shapes)
are not timed. With --jit the batches are padded to widths that are multiples of 8, as
``train.py --jit`` pads them (Config.length_multiple), so XLA compiles once per width;
any compilation left after the warm-up stays in the timed rounds, as in a real run.

Reported per setting: target tokens/s and sentences/s (median of the rounds), the
training-step compilations, the padding efficiency (real target tokens / padded target
slots of the timed batches), and on a GPU the peak GPU memory of its warm-up.

    python bench/precision.py [--data builtin|DIR] [--sizes compact,paper] [--batches 80]
        [--precisions float32,mixed_bfloat16,mixed_float16] [--jit both|on|off]
        [--compare FIELD=V1,V2] [--rounds 3] [--steps 20] [--warmup 10] [--json precision.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _common  # noqa: E402

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# Model sizes: compact (what the README's CPU runs use) and the paper's Appendix A.
SIZES = {
    "compact": {"embedding": 256, "hidden": 256, "attention": 256, "maxout": 128},
    "paper": {"embedding": 620, "hidden": 1000, "attention": 1000, "maxout": 500},
}


def add_arguments(parser: argparse.ArgumentParser, batches: str = "80",
                  sizes: str = "compact") -> None:
    parser.add_argument("--data", default="builtin",
                        help="'builtin' (generated) or a corpus directory (train.en/.fr ...)")
    parser.add_argument("--sizes", default=sizes, help=f"comma list of {', '.join(SIZES)}")
    parser.add_argument("--batches", default=batches, help="comma list of batch sizes")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--jit", choices=("both", "on", "off"), default="both")
    parser.add_argument("--vocab-size", type=int, default=30000, help="shortlist per side")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per setting")
    parser.add_argument("--steps", type=int, default=20, help="training steps per round")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per setting first")
    parser.add_argument("--variant", default="search50")
    parser.add_argument("--compare", metavar="FIELD=V1,V2",
                        help="one more grid axis: a Config field and its values, e.g. "
                        "sampled_softmax=0,4096, or recipe=none,budget (a training recipe of "
                        "config.RECIPES, its batch size left to --batches); relative figures "
                        "are against the first")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--json", default="precision.json", help="where to write the results")
    return parser.parse_args(argv)


def compared(args) -> tuple[str | None, list]:
    """The --compare field and its values, parsed as that Config field's type."""
    if not args.compare:
        return None, [None]
    from keras_nmt.config import parse_overrides

    field, _, values = args.compare.partition("=")
    if field == "recipe":
        from keras_nmt.config import RECIPES

        names = values.split(",")
        unknown = [name for name in names if name != "none" and name not in RECIPES]
        if unknown:
            raise ValueError(f"--compare recipe: unknown recipe {unknown[0]!r}")
        return field, names
    return field, [parse_overrides([f"{field}={v}"])[field] for v in values.split(",")]


def compared_values(field: str | None, value) -> dict:
    """The Config fields one value of the --compare axis sets."""
    from keras_nmt.config import RECIPES

    if field == "recipe":
        return {k: v for k, v in RECIPES.get(value, {}).items() if k != "batch_size"}
    return {field: value} if field else {}


def settings_of(args) -> list[tuple]:
    """(size, batch, precision, jit, compared value) for every setting of the grid."""
    jits = {"both": (False, True), "on": (True,), "off": (False,)}[args.jit]
    return list(itertools.product(
        args.sizes.split(","), [int(b) for b in args.batches.split(",")],
        args.precisions.split(","), jits, compared(args)[1],
    ))


def make_trainers(args, scratch: pathlib.Path):
    """One Trainer per setting, on the run set up from ``args.data``; returns
    (trainers by setting, the base config, the run's data info)."""
    import keras

    from keras_nmt import data, experiment
    from keras_nmt.config import JIT_LENGTH_MULTIPLE
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir
    from keras_nmt.training import Trainer

    run = RunDir(scratch / "run")
    overrides = {"src_vocab_size": args.vocab_size, "tgt_vocab_size": args.vocab_size}
    options = experiment.TrainOptions(variant=args.variant, data=args.data, out=str(run.path),
                                      overrides=overrides, quiet=True).for_new_run()
    config, info = experiment._prepare(options, experiment._new_run_config(options), run,
                                       log=lambda text: None)
    config = config.replace(eval_every=10**9, checkpoint_every=10**9)
    encoders = run.graph_encoders()
    files = run.split_files("train", info, needed_for="the benchmark")
    trainers = {}
    field = compared(args)[0]
    for size, batch, precision, jit, value in settings_of(args):
        keras.utils.set_random_seed(config.seed)
        setting = config.replace(**SIZES[size], batch_size=batch, precision=precision,
                                 length_multiple=JIT_LENGTH_MULTIPLE if jit else 0,
                                 **compared_values(field, value))
        batches = data.training_batches(
            files, *encoders, max_len=setting.max_len, batch_size=batch,
            sort_batches=setting.sort_batches, seed=setting.seed,
            shuffle_buffer=setting.shuffle_buffer, length_multiple=setting.length_multiple,
        )
        name = f"{size}-{batch}-{precision}-{'jit' if jit else 'nojit'}-{value}"
        trainers[size, batch, precision, jit, value] = Trainer(
            setting, TranslationModel(setting), RunDir(scratch / name), batches, lambda: None,
            train_pairs=info["train"]["kept"], jit_compile=jit,
        )
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
    tokens = slots = sentences = 0
    loss = float("nan")
    start = time.perf_counter()
    for _ in range(count):
        (source_ids, target_in), target_out = next(trainer.iterator)
        loss, batch_tokens, _ = trainer.train_step(source_ids, target_in, target_out)
        tokens += int(batch_tokens)
        slots += int(target_out.shape[0] * target_out.shape[1])
        sentences += int(target_out.shape[0])
    return {"tokens": tokens, "slots": slots, "sentences": sentences,
            "seconds": time.perf_counter() - start, "loss": float(loss)}


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


COLUMNS = [
    ("size", "size", "s"), ("batch", "batch", "d"), ("precision", "precision", "s"),
    ("jit", "jit", ""), ("compare", "compared", ""), ("median", "tgt tok/s", ",.0f"), ("sentences_per_second", "sent/s", ",.1f"),
    ("relative_to_float32", "relative", ".2f"), ("compilations", "compiles", "d"),
    ("padding_efficiency", "pad eff", ".3f"), ("peak_gpu_mib", "GPU MiB", ",.0f"),
    ("last_loss", "loss", ".2f"),
]


def main(argv=None) -> int:
    args = parse_args(argv)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # many trainers' step functions: retracing warnings
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="bench-precision-"))
    trainers, config, _ = make_trainers(args, scratch)
    rows = measure(trainers, args, log=lambda text: print(text, file=sys.stderr, flush=True))
    print(_common.table(rows, COLUMNS))
    result = {
        "data": args.data, "variant": args.variant, "config": config.to_dict(),
        "compare": args.compare,
        "rounds": args.rounds, "steps_per_round": args.steps, "warmup_steps": args.warmup,
        "matmul": _common.matmul_flops(), "machine": _common.machine(), "results": rows,
    }
    pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
