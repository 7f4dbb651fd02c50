"""Training throughput (target tokens/s) of each --precision x --jit setting.

Trains one compact-size RNNsearch per setting on the built-in corpus, all fed the same
batches, and times the training step (input pipeline included) in interleaved rounds:
round 1 of every setting, then round 2 of every setting, ... so that a change in the
machine's load hits all settings alike. Warm-up steps (tracing, XLA compilation of the
first shapes) are not timed; XLA compiles again for every new batch shape it meets,
and that cost stays in the timed rounds, as it would in a real run.

    python bench/precision.py [--rounds 3] [--steps 20] [--warmup 10] [--json precision.json]
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


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per setting")
    parser.add_argument("--steps", type=int, default=20, help="training steps per round")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per setting first")
    parser.add_argument("--variant", default="search50")
    parser.add_argument("--json", default="precision.json", help="where to write the results")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # six trainers' step functions: retracing warnings
    from keras_nmt import data, experiment
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir
    from keras_nmt.text.word_graph import WordEncoder
    from keras_nmt.training import Trainer

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="bench-precision-"))
    run = RunDir(scratch / "run")
    options = experiment.TrainOptions(variant=args.variant, out=str(run.path), quiet=True)
    config, info = experiment._prepare(options, run, log=lambda text: None)
    config = config.replace(eval_every=10**9, checkpoint_every=10**9)
    source_vocab, target_vocab = run.load_vocabularies()
    encoders = WordEncoder(source_vocab, info["src"]), WordEncoder(target_vocab, info["tgt"])
    files = experiment._files(info, "train")

    settings = list(itertools.product(PRECISIONS, (False, True)))
    trainers = {}
    for precision, jit in settings:
        keras.mixed_precision.set_global_policy(precision)
        keras.utils.set_random_seed(config.seed)
        setting_config = config.replace(precision=precision)
        batches = data.training_batches(
            files, *encoders, max_len=config.max_len, batch_size=config.batch_size,
            sort_batches=config.sort_batches, seed=config.seed, shuffle_buffer=config.shuffle_buffer,
        )
        trainers[precision, jit] = Trainer(
            setting_config, TranslationModel(setting_config),
            RunDir(scratch / f"{precision}-{'jit' if jit else 'nojit'}"),
            batches, lambda: None, train_pairs=info["train"]["kept"], jit_compile=jit,
        )
    keras.mixed_precision.set_global_policy("float32")

    def steps(trainer, count):
        tokens, losses = 0, []
        start = time.perf_counter()
        for _ in range(count):
            (source_ids, target_in), target_out = next(trainer.iterator)
            loss, batch_tokens, _ = trainer.train_step(source_ids, target_in, target_out)
            tokens += int(batch_tokens)
            losses.append(float(loss))
        return tokens, time.perf_counter() - start, losses

    rates: dict = {setting: [] for setting in settings}
    last_loss: dict = {}
    for setting in settings:
        print(f"warming up {setting[0]} jit={setting[1]}", file=sys.stderr, flush=True)
        steps(trainers[setting], args.warmup)
    for round_number in range(args.rounds):
        for setting in settings:
            tokens, seconds, losses = steps(trainers[setting], args.steps)
            rates[setting].append(tokens / seconds)
            last_loss[setting] = losses[-1]
        print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    baseline = statistics.median(rates["float32", False])
    rows = []
    print(f"{'precision':<16}{'jit':<6}{'tgt tok/s (median)':>20}{'min':>10}{'max':>10}"
          f"{'vs float32':>12}{'last loss':>11}")
    for precision, jit in settings:
        values = rates[precision, jit]
        median = statistics.median(values)
        rows.append({
            "precision": precision, "jit": jit, "target_tokens_per_second": values,
            "median": median, "relative_to_float32": median / baseline,
            "last_loss": last_loss[precision, jit],
        })
        print(f"{precision:<16}{'yes' if jit else 'no':<6}{median:>20,.0f}{min(values):>10,.0f}"
              f"{max(values):>10,.0f}{median / baseline:>11.2f}x{last_loss[precision, jit]:>11.2f}")
    result = {
        "variant": args.variant, "config": config.to_dict(), "rounds": args.rounds,
        "steps_per_round": args.steps, "warmup_steps": args.warmup,
        "machine": _common.machine(), "results": rows,
    }
    pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
