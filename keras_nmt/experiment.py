"""One training run from start to report: data, vocabularies, training, held-out BLEU.

``train.py`` is a thin command line over :func:`train`; benchmarks call it too.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import pathlib
import shutil
import sys
import time
from typing import Any

import keras

from keras_nmt import config as config_lib
from keras_nmt import averaging, checkpoints, data, distribute, lexicon, prepared
from keras_nmt.checkpoints import checkpoint_problem, checkpoint_step
from keras_nmt.config import Config, ConfigError
from keras_nmt.corpus import builtin, heldout, wmt14
from keras_nmt.corpus.readers import (
    CorpusError, ParallelFiles, count_lines, find_corpus,
)
from keras_nmt.models import TranslationModel
from keras_nmt.progress import Phase, Progress
from keras_nmt.rundir import RunDir, RunDirError, write_json_atomic
from keras_nmt.evaluation import scoring
from keras_nmt.text import codecs
from keras_nmt.text.sentencepiece import (
    SENTENCEPIECE_SAMPLE, SentencePieceCodec, train_sentencepiece,
)
from keras_nmt.vocab import Vocabulary
from keras_nmt.training import Limits, RunWriteError, Trainer, check_limits
from keras_nmt.translator import Translator

BUILTIN = "builtin"
# Without limits, a run on the built-in corpus stops after this much training so that
# the main command finishes in minutes on a laptop.
BUILTIN_DEFAULT_MINUTES = 6.0
# Runs made before prepared data read their text: a training split larger than this (both
# files, on disk) is not permuted in memory but streamed through a shuffle buffer of
# LARGE_CORPUS_SHUFFLE_BUFFER pairs.
PERMUTATION_MAX_BYTES = 2 * 2**30
LARGE_CORPUS_SHUFFLE_BUFFER = 1_000_000
# The fields that make a model's size: --set on any of them is a size chosen.
SIZE_FIELDS = frozenset({"embedding", "hidden", "attention", "maxout"})
# How long a multi-worker non-chief process waits for the chief to set the run up.
CHIEF_SETUP_SECONDS = 600.0
# Fields that may change when a run is resumed: they do not change the model's shape.
RESUMABLE_FIELDS = frozenset(
    {"learning_rate", "rho", "epsilon", "clipnorm", "checkpoint_every", "eval_every",
     "patience", "early_stop_metric", "beam_size", "length_alpha", "max_decode_ratio"}
)
# What a new run takes for the options of TrainOptions left at None; --resume takes the
# run's own instead.
NEW_RUN_DEFAULTS: dict[str, Any] = {
    "variant": config_lib.DEFAULT_VARIANT, "data": BUILTIN, "src": "en", "tgt": "fr",
}


@dataclasses.dataclass
class TrainOptions:
    # None: NEW_RUN_DEFAULTS for a new run, the run's own with ``resume``. Any option
    # given with ``resume`` must match the run (ConfigError otherwise).
    variant: str | None = None
    data: str | None = None  # BUILTIN, wmt14.NAME or a corpus directory
    src: str | None = None
    tgt: str | None = None
    out: str | None = None
    max_steps: int | None = None
    max_minutes: float | None = None
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    resume: bool = False
    seed: int | None = None
    paper_size: bool = False
    quiet: bool = False
    # --data wmt14-en-fr: where its files are kept and fetched from, and a subsample size.
    cache_dir: str | None = None
    mirror: str | None = None
    max_train_pairs: int | None = None
    tokenizer: str | None = None  # "word" (the paper's, default) or "sentencepiece"
    strategy: str = "default"  # see keras_nmt.distribute
    # XLA-compile the training step and the beam search; None: where it wins (use_jit).
    jit: bool | None = None
    recipe: str | None = None  # a name of config.RECIPES
    # A name of config.SIZES; None: the built-in corpus's compact size (the paper's with
    # paper_size), the paper's on any other corpus.
    size: str | None = None
    preset: str | None = None  # a name of config.PRESETS: a size and a recipe
    lexicon: bool = True  # build the lexical table for vocabulary selection at the end

    def for_new_run(self) -> "TrainOptions":
        """These options with NEW_RUN_DEFAULTS where they are None, the size resolved."""
        options = dataclasses.replace(self, **{
            name: value for name, value in NEW_RUN_DEFAULTS.items() if getattr(self, name) is None
        })
        if options.size is None:
            options.size = ("paper" if options.paper_size else config_lib.BUILTIN_SIZE
                            if options.data == BUILTIN else config_lib.DEFAULT_SIZE)
        return options

    def with_preset(self) -> "TrainOptions":
        """These options with their preset's size and recipe filled in; ConfigError when
        --size or --recipe says otherwise."""
        if self.preset is None:
            return self
        chosen = config_lib.PRESETS[self.preset]
        for name, value in chosen.items():
            if getattr(self, name) not in (None, value):
                raise ConfigError(f"--preset {self.preset} is --size {chosen['size']} --recipe "
                                  f"{chosen['recipe']}: it contradicts --{name} {getattr(self, name)}")
        return dataclasses.replace(self, **chosen)


# The options that data.json records (under "options") for --resume to check: those
# that chose the corpus and the configuration besides --variant, --seed and --set,
# which config.json holds.
RECORDED_OPTIONS = ("data", "paper_size", "size", "recipe", "max_train_pairs", "cache_dir",
                    "mirror")


def _recorded_value(name: str, value: Any) -> Any:
    """An option's value as data.json records it and --resume compares it: a corpus
    directory resolved, the WMT'14 cache and mirror as the download uses them."""
    if name == "data" and value not in (BUILTIN, wmt14.NAME):
        return str(pathlib.Path(value).expanduser().resolve())
    if name == "cache_dir":
        return str(wmt14.cache_dir(value).resolve())
    if name == "mirror":
        return wmt14.mirror_base(value)
    return value


def _options_record(options: TrainOptions) -> dict[str, Any]:
    """data.json's "options" of a new run (``options`` are for_new_run's)."""
    record = {name: _recorded_value(name, getattr(options, name)) for name in RECORDED_OPTIONS}
    if options.data != wmt14.NAME:
        record.update(cache_dir=None, mirror=None)  # no download: nothing to record
    return record


def default_run_dir(variant: str) -> pathlib.Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{variant}-{stamp}"


def resolve_config(options: TrainOptions) -> Config:
    """The variant's configuration with the model size (:data:`config.SIZES`: compact on
    the built-in corpus, the paper's elsewhere, unless chosen), the recipe and the user's
    overrides, in that order."""
    options = options.with_preset().for_new_run()
    values: dict[str, Any] = dict(config_lib.SIZES[options.size])
    if options.recipe:
        values.update(config_lib.RECIPES[options.recipe])
    values.update(options.overrides)
    if options.seed is not None:
        values["seed"] = options.seed
    return config_lib.variant_config(options.variant, values)


def _new_run_config(options: TrainOptions) -> Config:
    """A new run's configuration (vocabulary sizes before the corpus scan), after every
    check of ``options`` (for_new_run's) that needs no corpus: nothing is written yet."""
    if options.data != wmt14.NAME:
        misplaced = [flag for flag, value in (
            ("--max-train-pairs", options.max_train_pairs), ("--cache-dir", options.cache_dir),
            ("--mirror", options.mirror)) if value is not None]
        if misplaced:
            raise CorpusError(f"{', '.join(misplaced)}: for --data {wmt14.NAME} only, not "
                              f"--data {options.data}")
    elif {options.src, options.tgt} != set(wmt14.LANGS):
        raise CorpusError(f"--data {wmt14.NAME} needs --src-lang/--tgt-lang en and fr, "
                          f"got {options.src}/{options.tgt}")
    if options.paper_size and options.data != BUILTIN:
        raise ConfigError(f"--paper-size: for --data {BUILTIN} only (on other corpora the "
                          "paper's dimensions are the default)")
    if options.paper_size and options.size not in (None, "paper"):
        raise ConfigError(f"--paper-size is --size paper: it contradicts --size {options.size}")
    config = resolve_config(options)
    config_lib.check_optimizer_fields(config, options.overrides)
    return config


def _prepare(options: TrainOptions, config: Config, run: RunDir, log,
             progress: Progress | None = None) -> tuple[Config, dict[str, Any]]:
    """First start of a run: corpus, vocabularies and config written into ``run``.
    ``options`` (for_new_run's) and ``config`` are :func:`_new_run_config`'s, checked.
    ``progress`` shows the long passes (SentencePiece, the scan) with their ETA."""
    progress = progress or Progress(enabled=False)
    run.create()
    if options.data == BUILTIN:
        spec = builtin.BuiltinCorpusSpec()
        log(f"generating the built-in corpus into {run.corpus} (seed {spec.seed})")
        corpus_dir = builtin.write_corpus(run.corpus.resolve(), spec)
    elif options.data == wmt14.NAME:
        corpus_dir = wmt14.prepare(
            options.cache_dir, options.mirror, options.max_train_pairs, log=log, quiet=options.quiet
        )
    else:
        corpus_dir = pathlib.Path(options.data).expanduser().resolve()
    splits = find_corpus(corpus_dir, options.src, options.tgt)
    for name, files in splits.items():
        if name != "train":  # the training split is checked by the tokenization pass below
            files.check()
    development, halves = splits["valid"], None
    if "test" not in splits:
        halves = heldout.write_halves(development, run.heldout, options.src, options.tgt)
        if halves:
            splits = {**splits, "valid": halves[heldout.SELECT], "test": halves[heldout.REPORT]}
            log(f"no test split: the development split is cut in two ({heldout.RULE}); "
                f"{heldout.SELECT}.* picks the checkpoints, {heldout.REPORT}.* is only "
                f"reported (both in {run.heldout})")
    kind = options.tokenizer or codecs.WORD
    models = {}
    lines = count_lines(splits["train"].source)  # the passes' totals, for their ETA
    if kind == codecs.SENTENCEPIECE:
        for side, lang, size in ((0, options.src, config.src_vocab_size), (1, options.tgt, config.tgt_vocab_size)):
            # SentencePiece reports nothing while it trains: the reading is counted, then
            # what it does and the time it took are said.
            phase = Phase(progress, f"SentencePiece ({lang}): reading the training side",
                          total=lines, unit="lines")

            def read(side=side, phase=phase, lang=lang, size=size):
                for pair in splits["train"].pairs():
                    phase.advance()
                    yield pair[side]
                progress.message(
                    f"SentencePiece ({lang}): training a unigram model of up to {size:,} pieces "
                    f"on {min(phase.done, SENTENCEPIECE_SAMPLE):,} of its {phase.done:,} lines "
                    "(SentencePiece reports no progress)")

            models[lang] = train_sentencepiece(read(), size)
            phase.finish(f"{phase.done:,} lines read and the model trained")
            run.sentencepiece_path(lang).write_bytes(models[lang])

    def vocabularies(stats) -> tuple[Vocabulary, Vocabulary]:
        if kind == codecs.SENTENCEPIECE:
            return tuple(SentencePieceCodec(models[lang], lang).vocabulary
                         for lang in (options.src, options.tgt))
        return (Vocabulary.from_counts(stats.source_counts, config.src_vocab_size),
                Vocabulary.from_counts(stats.target_counts, config.tgt_vocab_size))

    log(f"reading {splits['train'].source} and {splits['train'].target}: tokenized once, "
        f"into token ids in {run.prepared}")
    tokenizing = Phase(progress, "tokenizing the training split (vocabularies, lengths, ids)",
                       total=lines, unit="pairs")
    stats, (source_vocab, target_vocab) = prepared.prepare_split(
        splits["train"], run.prepared, (options.src, options.tgt),
        tuple(codecs.graph_tokenizer(kind, lang, models.get(lang))
              for lang in (options.src, options.tgt)),
        config.max_len, vocabularies, progress=tokenizing.reached,
    )
    tokenizing.finish()
    if stats.kept == 0:
        raise CorpusError(
            f"no usable training pair in {splits['train'].source}: every pair is empty or "
            f"longer than max_len={config.max_len}"
        )
    config = config.replace(src_vocab_size=len(source_vocab), tgt_vocab_size=len(target_vocab))
    source_vocab.save(run.vocab_path(options.src))
    target_vocab.save(run.vocab_path(options.tgt))
    info = {
        "src": options.src,
        "tgt": options.tgt,
        "corpus": run.stored_path(corpus_dir),
        "builtin": options.data == BUILTIN,
        "tokenizer": kind,
        "splits": {name: {"source": run.stored_path(f.source), "target": run.stored_path(f.target)}
                   for name, f in splits.items()},
        "development": {"source": run.stored_path(development.source),
                        "target": run.stored_path(development.target),
                        "halves": heldout.RULE if halves else None},
        "prepared": run.stored_path(run.prepared),
        "train": stats.summary(),
        "source_types": len(stats.source_counts),
        "target_types": len(stats.target_counts),
        "options": _options_record(options),
    }
    write_json_atomic(run.data_path, info)
    # config.json last: its presence marks a run whose set-up is complete.
    write_json_atomic(run.config_path, config.to_dict())
    log(
        f"training pairs: {stats.kept} kept of {stats.pairs} ({stats.too_long} longer than "
        f"{config.max_len} tokens dropped, {stats.empty} empty skipped); vocabularies "
        f"{len(source_vocab)} {options.src} / {len(target_vocab)} {options.tgt}"
    )
    return config, info


def _flag(option: str, value: Any) -> str:
    """How an option reads on the command line: "--seed 7", "--paper-size", "no --recipe"."""
    if value is None or value is False:
        return f"no {option}"
    return option if value is True else f"{option} {value}"


def _resume_config(options: TrainOptions, run: RunDir) -> tuple[Config, dict[str, Any]]:
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
                _recorded_value(name, getattr(options, name)), record.get(name, KeyError))
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


def held_out_report(
    translator: Translator, files: ParallelFiles, beam_size: int, alpha: float, log,
    quiet: bool = False, progress: Progress | None = None,
) -> dict[str, Any]:
    """Translate a held-out split and score it with sacreBLEU, overall and by length."""
    sources, references = files.sides()
    progress = progress or Progress(log_seconds=30.0, enabled=not quiet)
    phase = Phase(progress, f"translating {files.source.name}", total=len(sources),
                  unit="sentences")
    translations = translator.translate(sources, beam_size=beam_size, alpha=alpha,
                                        progress=phase.advance)
    seconds = phase.finish()
    hypotheses = [t.text for t in translations]
    lengths = [len(t.source_tokens) for t in translations]
    bleu, signature = scoring.bleu(hypotheses, references)
    long_bleu, long_count = scoring.bleu_longer_than(hypotheses, references, lengths, 30)
    return {
        "split": files.source.stem,
        "sentences": len(sources),
        "beam_size": beam_size,
        "bleu": bleu,
        "bleu_signature": signature,
        "bleu_longer_than_30": long_bleu,
        "sentences_longer_than_30": long_count,
        "bleu_by_length": scoring.bleu_by_length(hypotheses, references, lengths),
        "decode_seconds": seconds,
    }


def _wait_for_chief(options: TrainOptions, run: RunDir, log) -> tuple[Config, dict[str, Any]]:
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
    config = run.load_config()
    return config.replace(**{k: v for k, v in options.overrides.items() if k in RESUMABLE_FIELDS}), run.load_data_info()


def use_jit(jit: bool | None, strategy: str, batch_tokens: int = 0) -> bool:
    """``--jit``'s default: on with a GPU, the default strategy and a fixed batch size (a
    token budget would give XLA a new shape almost every step), off otherwise. On an H100
    XLA gave 4.6x the target tokens/s of the same batches without it; on a 2-core CPU,
    0.78-0.80x (docs/benchmarks.md, docs/training.md)."""
    if jit is not None:
        return jit
    import tensorflow as tf

    return (strategy == "default" and not batch_tokens
            and bool(tf.config.list_physical_devices("GPU")))


def train(options: TrainOptions) -> dict[str, Any]:
    """Train (or resume) a run and return its summary, also written to summary.json
    (on a multi-worker cluster, by the chief; the other workers return {})."""
    # First of all: a multi-worker strategy sets up TF's collectives at start.
    strategy = distribute.make_strategy(options.strategy)
    chief = distribute.is_chief(strategy)
    run = RunDir(options.out or default_run_dir(options.variant or config_lib.DEFAULT_VARIANT))
    quiet = options.quiet or not chief
    # One stream: log lines and progress on stderr (a log line stays above the live
    # progress line); stdout gets the final report only, so it can be kept whole.
    progress = Progress(enabled=not quiet)
    log = progress.message

    def result(text: str) -> None:
        if not quiet:
            progress.close()
            print(text, flush=True)

    def warn(text: str) -> None:  # shown even with --quiet
        progress.close()
        print(f"warning: {text}", file=sys.stderr, flush=True)

    # Every option is checked before anything is written.
    chosen_size = options.size or options.preset or options.paper_size
    options = options.with_preset()
    if options.resume:
        config, info = _resume_config(options, run)
        builtin = bool(info.get("builtin"))
        size = info.get("options", {}).get("size")
    else:
        options = options.for_new_run()
        config = _new_run_config(options)
        builtin = options.data == BUILTIN
        size = options.size
    resized = bool(set(options.overrides) & SIZE_FIELDS)
    log(f"model: {config.variant} ({config.architecture}), "
        f"{'size ' + size if size else 'its size'}{' changed by --set' if resized else ''}: "
        f"{config_lib.size_summary(config)}")
    if not options.resume and not chosen_size and not resized:
        log("the built-in corpus's compact size for CPU training (--size paper for the paper's)"
            if builtin else
            "the paper's size, the default on a real corpus: days of training on a CPU; "
            "--size medium (or --preset budget with --max-minutes) for the size of the "
            "published CPU results")
    limits = Limits(options.max_steps, options.max_minutes)
    default_budget = builtin and limits.max_steps is None and limits.max_minutes is None
    if default_budget:
        limits.max_minutes = BUILTIN_DEFAULT_MINUTES
    check_limits(config, limits)

    if options.resume:
        for stale in run.path.glob(".*.tmp"):  # write_json_atomic's, from a killed process
            stale.unlink(missing_ok=True)
        log(f"resuming {run.path}")
    elif not chief:
        config, info = _wait_for_chief(options, run, log)
    else:
        if run.is_initialised() or run.has_checkpoint():
            raise RunDirError(
                f"{run.path} already holds a run: pass --resume to continue it, or choose another --out"
            )
        existed = run.path.exists()
        try:
            config, info = _prepare(options, config, run, log, progress)
        except BaseException:
            # Leave no half-made run behind: a later start must not mistake it for one.
            if not existed:
                shutil.rmtree(run.path, ignore_errors=True)
            else:
                for path in (run.config_path, run.data_path, *run.path.glob("vocab.*.txt"),
                             *run.path.glob("spm.*.model")):
                    path.unlink(missing_ok=True)
                shutil.rmtree(run.prepared, ignore_errors=True)
                shutil.rmtree(run.heldout, ignore_errors=True)
                prepared.remove_stale(run.prepared)
            raise
    # Every file training reads is there before any work is done (a run moved without
    # the corpus it was trained on).
    needed_for = "--resume" if options.resume else "training"
    train_files, valid_files, test_files = (
        run.split_files(split, info, needed_for=needed_for) for split in ("train", "valid", "test")
    )
    if default_budget:
        log(f"no --max-steps or --max-minutes: training for {BUILTIN_DEFAULT_MINUTES:g} minutes")

    jit = use_jit(options.jit, options.strategy, config.batch_tokens)
    if jit and options.jit is None:
        log("a GPU is present: the training step and the search are compiled with XLA "
            "(--no-jit to turn it off)")
    if jit and not config.length_multiple and not config.batch_tokens:
        # XLA compiles once per batch shape: bound the shapes (not stored in config.json,
        # so the same run resumes with or without --jit).
        config = config.replace(length_multiple=config_lib.JIT_LENGTH_MULTIPLE)
    keras.utils.set_random_seed(config.seed)
    source_encoder, target_encoder = run.graph_encoders()
    with distribute.scope(strategy):
        model = TranslationModel(config)
    batching = dict(
        max_len=config.max_len, batch_size=config.batch_size, sort_batches=config.sort_batches,
        seed=config.seed, batch_tokens=config.batch_tokens,
        mean_length=mean_pair_length(info["train"]), length_multiple=config.length_multiple,
    )
    split = run.prepared_split(info, needed_for=needed_for)
    if split is not None:
        train_batches = data.prepared_batches(split, shuffle_buffer=config.shuffle_buffer, **batching)
    else:  # a run made before prepared data: its checkpoints hold the text pipeline's state
        train_batches = data.training_batches(
            train_files, source_encoder, target_encoder,
            shuffle_buffer=_text_shuffle_buffer(config, train_files, warn), **batching)

    def dev_batches():
        return data.evaluation_batches(
            valid_files, source_encoder, target_encoder, batch_size=config.batch_size
        )

    translator = Translator(model, *run.codecs(), jit_compile=jit)
    valid_sources, valid_references = valid_files.sides()

    def dev_bleu() -> float:
        hypotheses = [t.text for t in translator.translate(valid_sources, beam_size=1)]
        return scoring.bleu(hypotheses, valid_references)[0]

    trainer = Trainer(
        config, model, run, train_batches, dev_batches,
        train_pairs=info["train"]["kept"], dev_bleu=dev_bleu,
        progress=progress, strategy=strategy, jit_compile=jit,
    )
    if options.resume:
        trainer.restore(log=warn if chief else log)
        log(f"resumed at step {int(trainer.step.numpy())}")
    else:
        trainer.save()  # step 0: from here on --resume always has a checkpoint
    replicas = f" on {strategy.num_replicas_in_sync} replicas" if strategy else ""
    log(f"training {config.variant} ({config.architecture}){replicas}; run directory: {run.path}")
    outcome = trainer.fit(limits)
    if not chief:
        distribute.barrier(strategy)  # until the chief has written the report
        return {}

    # Report with the best development weights, as the paper selects its models.
    best = trainer.best_manager.latest_checkpoint
    problem = checkpoint_problem(best) if best else None
    if problem:
        warn(f"the best weights {best} are unreadable ({problem}); reporting with the last ones")
        best = None
    weights = "last"
    if best:
        checkpoints.read_model(best, model)
        weights = "best"
    if config.average_checkpoints:
        averaging.average(run, config.average_from, config.average_checkpoints, model, log,
                          strict=False)
        weights = "averaged"
    dev_nll = trainer.dev_nll()
    held_out = test_files or valid_files
    log(f"translating the held-out {held_out.source.name} with beam {config.beam_size}")
    report = held_out_report(translator, held_out, config.beam_size, config.length_alpha, log,
                             quiet=quiet, progress=progress)
    summary = {
        "variant": config.variant,
        "architecture": config.architecture,
        "config": config.to_dict(),
        "data": {k: info[k] for k in ("src", "tgt", "corpus", "builtin", "train")},
        "vocabulary": {info["src"]: len(translator.source_vocab),
                       info["tgt"]: len(translator.target_vocab)},
        "stop_reason": outcome.stop_reason,
        "updates": outcome.steps,
        "epochs": outcome.epochs,
        "wall_hours": outcome.wall_seconds / 3600,
        "target_tokens": outcome.target_tokens,
        "target_tokens_per_second": outcome.target_tokens / max(outcome.wall_seconds, 1e-9),
        "train_nll": outcome.train_nll,
        "dev_nll": dev_nll,
        "best_weights_step": checkpoint_step(best),
        "held_out": report,
        "report_weights": weights,
        "parameters": int(sum(math.prod(w.shape) for w in model.trainable_weights)),
        "length_multiple": config.length_multiple,
        "jit": jit,
        "train_step_compilations": trainer.compilations() if jit else None,
    }
    try:
        write_json_atomic(run.summary_path, summary)
    except OSError as error:
        raise RunWriteError(
            f"cannot write {run.summary_path}: {error.strerror}; training is complete and "
            f"checkpointed: free space and run again with --resume to write the report"
        ) from None
    result(
        f"done: {outcome.steps} updates, {outcome.epochs:.2f} epochs, stopped by {outcome.stop_reason}; "
        f"train NLL {outcome.train_nll:.2f}, dev NLL {dev_nll:.2f}"
    )
    long = (f"on the {report['sentences_longer_than_30']} sentences longer than 30 tokens: "
            f"{report['bleu_longer_than_30']:.2f}" if report["sentences_longer_than_30"]
            else "no sentence is longer than 30 tokens")
    result(
        f"held-out BLEU ({report['split']}, {report['sentences']} sentences, beam {config.beam_size}): "
        f"{report['bleu']:.2f}; {long}"
    )
    result(f"sacreBLEU signature: {report['bleu_signature']}")
    if options.lexicon:
        # After the report: the training is safe before this extra minute starts.
        table = lexicon.build_for_run(run, progress=progress)
        log(f"lexical table for --shortlist: {run.lexicon_path} "
            f"({table.info['total_seconds']:.1f} s)")
    result(f"run directory: {run.path}  (summary.json, checkpoints/, best/, tensorboard/)")
    distribute.barrier(strategy)
    return summary


def _text_shuffle_buffer(config: Config, files: ParallelFiles, warn) -> int:
    """The shuffle buffer of a run that reads its text (made before prepared data)."""
    corpus_bytes = sum(path.stat().st_size for path in (files.source, files.target))
    if config.shuffle_buffer or corpus_bytes <= PERMUTATION_MAX_BYTES:
        return config.shuffle_buffer
    warn(f"the training split holds {corpus_bytes / 2**30:.1f} GiB, more than a whole-corpus "
         f"permutation keeps in memory ({PERMUTATION_MAX_BYTES / 2**30:.0f} GiB): pairs are "
         f"shuffled in a streaming buffer of {LARGE_CORPUS_SHUFFLE_BUFFER:,} pairs instead")
    return LARGE_CORPUS_SHUFFLE_BUFFER


def mean_pair_length(train: dict[str, int]) -> float | None:
    """Mean tokens of the longer side of a kept training pair, EOS included (the token
    batching's window size); None for runs made before the scan counted tokens."""
    if "source_tokens" not in train or not train.get("kept"):
        return None
    return max(train["source_tokens"], train["target_tokens"]) / train["kept"] + 1

