"""Continuing a run: what a run records of its options, how a resumed run's
configuration is rebuilt from its own and checked against the options given, and how a
multi-worker non-chief process waits for the chief to set a new run up."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from keras_nmt.core import config as config_lib
from keras_nmt.core.config import Config
from keras_nmt.corpus import wmt14
from keras_nmt.core.errors import ConfigError, RunDirError
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import BUILTIN, TrainOptions

# Fields that may change when a run is resumed: they do not change the model's shape.
RESUMABLE_FIELDS = frozenset(
    {"learning_rate", "rho", "epsilon", "clipnorm", "checkpoint_every", "eval_every",
     "patience", "early_stop_metric", "beam_size", "length_alpha", "max_decode_ratio"}
)
# The options that data.json records (under "options") for --resume to check: those
# that chose the corpus and the configuration besides --variant, --seed and --set,
# which config.json holds.
RECORDED_OPTIONS = ("data", "paper_size", "size", "recipe", "max_train_pairs", "cache_dir",
                    "mirror", "joint_vocabulary", "subword_samples", "subword_alpha",
                    "sentencepiece_type")
# How long a multi-worker non-chief process waits for the chief to set the run up.
CHIEF_SETUP_SECONDS = 600.0


def recorded_value(name: str, value: Any) -> Any:
    """An option's value as data.json records it and --resume compares it: a corpus
    directory resolved, the WMT'14 cache and mirror as the download uses them."""
    if name == "data" and value not in (BUILTIN, wmt14.NAME):
        return str(pathlib.Path(value).expanduser().resolve())
    if name == "cache_dir":
        return str(wmt14.cache_dir(value).resolve())
    if name == "mirror":
        return wmt14.mirror_base(value)
    return value


def options_record(options: TrainOptions) -> dict[str, Any]:
    """data.json's "options" of a new run (``options`` are for_new_run's)."""
    record = {name: recorded_value(name, getattr(options, name)) for name in RECORDED_OPTIONS}
    if options.data != wmt14.NAME:
        record.update(cache_dir=None, mirror=None)  # no download: nothing to record
    return record


def _flag(option: str, value: Any) -> str:
    """How an option reads on the command line: "--seed 7", "--paper-size", "no --recipe"."""
    if value is None or value is False:
        return f"no {option}"
    return option if value is True else f"{option} {value}"


def resume_config(options: TrainOptions, run: RunDir) -> tuple[Config, dict[str, Any]]:
    """The run's configuration and data.json, with the changes --resume allows (the
    RESUMABLE_FIELDS of ``options.overrides``). Every other option given must match the
    run: ConfigError naming the option, its value and the run's otherwise."""
    if not run.is_initialised() or not run.has_checkpoint():
        raise RunDirError(f"--resume: no checkpoint to resume from in {run.path}")
    config = run.load_config()
    info = run.load_data_info()
    record = info.get("options")
    if record is None:  # a run made before data.json recorded its options
        record = {"data": BUILTIN if info.get("builtin") else info.get("corpus")}
    # option -> (given value, the run's), for the options given (None or False: not given).
    given = {
        "--variant": (options.variant, config.variant),
        "--tokenizer": (options.tokenizer, run.tokenizer(info)),
        "--src-lang": (options.src, info["src"]),
        "--tgt-lang": (options.tgt, info["tgt"]),
        "--seed": (options.seed, config.seed),
    }
    for name in RECORDED_OPTIONS:
        if getattr(options, name) not in (None, False):
            given["--" + name.replace("_", "-")] = (
                recorded_value(name, getattr(options, name)), record.get(name, KeyError))
    given = {flag: pair for flag, pair in given.items() if pair[0] is not None}
    unrecorded = [flag for flag, (_, theirs) in given.items() if theirs is KeyError]
    if unrecorded:
        raise ConfigError(
            f"--resume: {run.path} was made by an earlier version that did not record its "
            f"{', '.join(unrecorded)}: leave {'it' if len(unrecorded) == 1 else 'them'} out"
        )
    differ = [flag for flag, (yours, theirs) in given.items() if yours != theirs]
    changes = {k: v for k, v in options.overrides.items() if getattr(config, k) != v}
    fixed = sorted(set(changes) - RESUMABLE_FIELDS)
    if differ or fixed:
        yours = [_flag(flag, given[flag][0]) for flag in differ]
        yours += [f"--set {k}={changes[k]}" for k in fixed]
        theirs = [_flag(flag, given[flag][1]) for flag in differ]
        theirs += [f"{k}={getattr(config, k)}" for k in fixed]
        raise ConfigError(
            f"--resume: {', '.join(yours)} {'does' if len(yours) == 1 else 'do'} not match the "
            f"run in {run.path}, started with {', '.join(theirs)} (leave an option out to "
            "keep the run's)"
        )
    config = config.replace(**changes)
    config_lib.check_optimizer_fields(config, options.overrides)
    return config, info


def remove_interrupted_writes(run: RunDir) -> None:
    """The temporary files of writes a killed process left half done (write_json_atomic's)."""
    for stale in run.path.glob(".*.tmp"):
        stale.unlink(missing_ok=True)


def wait_for_chief(options: TrainOptions, run: RunDir) -> tuple[Config, dict[str, Any]]:
    """A multi-worker non-chief process: the chief sets the run up (corpus,
    vocabularies, config) in the shared run directory; wait for it."""
    deadline = time.monotonic() + CHIEF_SETUP_SECONDS
    while not run.is_initialised():
        if time.monotonic() > deadline:
            raise RunDirError(
                f"the chief has not set up {run.path} within {CHIEF_SETUP_SECONDS:.0f} s: "
                "the run directory must be shared by every worker"
            )
        time.sleep(1.0)
    resumable = {k: v for k, v in options.overrides.items() if k in RESUMABLE_FIELDS}
    return run.load_config().replace(**resumable), run.load_data_info()
