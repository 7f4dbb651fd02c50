"""One training run from start to report: options, configuration, the run's data,
training, then the held-out report in summary.json.

``train.py`` is a thin command line over :func:`train`; benchmarks call it too.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Callable

import keras
import tensorflow as tf

from keras_nmt.core import config as config_lib
from keras_nmt.runner import adaptation, resume, run_data
from keras_nmt.rundir import averaging, model_weights
from keras_nmt.data import pipelines as data
from keras_nmt.core import cpu, distribute, xla
from keras_nmt.lexicon import table as lexicon, unk_dictionary
from keras_nmt.decoding import unk_replace
from keras_nmt.core.atomic import write_json_atomic
from keras_nmt.core.config import Config
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.core.errors import ConfigError, RunWriteError
from keras_nmt.evaluation import scoring
from keras_nmt.rundir.model_weights import checkpoint_problem, checkpoint_step
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.core.progress import Progress
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import (
    BUILTIN, TrainOptions, also_report_files, default_run_dir, new_run_config, resolve_precision,
)
from keras_nmt.training import TrainingBudget, Trainer, check_budget
from keras_nmt.decoding.keras_translator import Translator

# Without limits, a run on the built-in corpus stops after this much training so that
# the main command finishes in minutes on a laptop.
BUILTIN_DEFAULT_MINUTES = 6.0
# The fields that make a model's size: --set on any of them is a size chosen.
SIZE_FIELDS = frozenset({"embedding", "hidden", "attention", "maxout"})


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
    options, precision_reason = resolve_precision(
        options, cpu.cpu_flags(), bool(tf.config.list_physical_devices("GPU")))
    options, config, info, builtin, parent, mix = _checked_options(options, run, log)
    if options.precision == cpu.AUTO:
        log(f"precision: {config.precision} ({precision_reason})")
    also_report = _also_report(options, run, info)
    options = dataclasses.replace(options, also_report={
        name: (str(files.source), str(files.target)) for name, files in also_report.items()})
    limits = TrainingBudget(options.max_steps, options.max_minutes)
    default_budget = builtin and limits.max_steps is None and limits.max_minutes is None
    if default_budget:
        limits.max_minutes = BUILTIN_DEFAULT_MINUTES
    check_budget(config, limits)

    if options.resume:
        resume.remove_interrupted_writes(run)
        log(f"resuming {run.path}")
    elif not chief:
        config, info = resume.wait_for_chief(options, run)
    else:
        config, info = run_data.prepare(options, config, run, log, progress, parent=parent,
                                        mix=mix)
    # Every file training reads is there before any work is done (a run moved without
    # the corpus it was trained on).
    needed_for = "--resume" if options.resume else "training"
    train_files, valid_files, test_files = (
        run.split_files(split, info, needed_for=needed_for) for split in ("train", "valid", "test")
    )
    warnings = []
    if test_files is None and chief:
        # The development split was too small to cut in two (keras_nmt.corpus.heldout).
        warnings.append(f"no test split, and the development split {valid_files.source} "
                        "was too small to cut in two: it both selects the checkpoints and is "
                        "reported, so the held-out scores are optimistic")
        warn(warnings[-1])
    if default_budget:
        log(f"no --max-steps or --max-minutes: training for {BUILTIN_DEFAULT_MINUTES:g} minutes")

    jit = xla.use_jit(options.jit, options.strategy, config.batch_tokens)
    if jit and options.jit is None:
        log("a GPU is present: the training step and the search are compiled with XLA "
            "(--no-jit to turn it off)")
    if jit:
        config = xla.bounded_shapes(config)
    trainer, translator = _trainer(config, run, info, needed_for, train_files, valid_files,
                                   strategy, jit, progress, warn, parent,
                                   options.keep_optimizer)
    if parent is not None:
        log(adaptation.describe(info["parent"], config))
    if info.get("mix"):
        log(adaptation.describe_mix(info["mix"]))
    del parent, mix  # the parent's model and the mix's open files are no longer needed
    if options.resume:
        trainer.restore(log=warn if chief else log)
        log(f"resumed at step {int(trainer.step.numpy())}")
        if chief and run.summary_path.exists():
            # The report describes weights this session moves on from: withdrawn, so that
            # --weights reported loads the best weights until the new report is written.
            try:
                run.summary_path.unlink()
            except OSError as error:
                raise RunWriteError(f"cannot remove {run.summary_path}, the earlier session's "
                                    f"report: {error.strerror}") from None
            log(f"{run.summary_path.name} withdrawn until this session's report")
    else:
        trainer.save()  # step 0: from here on --resume always has a checkpoint
    replicas = f" on {strategy.num_replicas_in_sync} replicas" if strategy else ""
    log(f"training {config.variant} ({config.architecture}){replicas}; run directory: {run.path}")
    outcome = trainer.fit(limits)
    if not chief:
        distribute.barrier(strategy)  # until the chief has written the report
        return {}

    weights, best, averaged = _report_weights(trainer, run, config, log, warn)
    dev_nll = trainer.dev_nll()
    held_out = test_files or valid_files
    # A model trained to write <unk> is reported as `evaluate` scores it by default:
    # replaced, through the dictionary (built first when the run builds its tables).
    replace = unk_replace.on_by_default(config, translator.source_codec.kind)
    # Read once, the training sample serves the dictionary now and the lexical table after.
    sample = (unk_dictionary.WordSample.if_needed(run, progress=progress)
              if replace and options.lexicon else None)
    dictionary = None if sample is None else _write_dictionary(run, progress, log, sample)
    replaced = ", <unk> replaced" if replace else ""
    log(f"translating the held-out {held_out.source.name} with beam {config.beam_size}{replaced}")
    report = scoring.held_out_report(translator, held_out, config.beam_size, config.length_alpha,
                                     quiet=quiet, progress=progress, unk_replace=replace,
                                     dictionary=dictionary and dictionary.entries)
    also_reported = {}
    for name, files in also_report.items():
        log(f"translating {name}'s {files.source.name} with beam {config.beam_size}{replaced}")
        also_reported[name] = scoring.held_out_report(
            translator, files, config.beam_size, config.length_alpha, quiet=quiet,
            progress=progress, unk_replace=replace, dictionary=dictionary and dictionary.entries)
    summary = {
        "variant": config.variant,
        "architecture": config.architecture,
        "config": config.to_dict(),
        "precision_reason": precision_reason,
        "data": {k: info[k] for k in ("src", "tgt", "corpus", "builtin", "train")},
        "parent": info.get("parent"),
        "mix": info.get("mix"),
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
        "also_reported": also_reported,
        "report_weights": weights,
        "averaging": averaged,
        "warnings": warnings,
        "parameters": int(sum(math.prod(w.shape) for w in trainer.model.trainable_weights)),
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
    for line in _report_lines(summary, config.beam_size):
        result(line)
    if options.lexicon:
        # After the report: the training is safe before this extra minute starts.
        ids = None if sample is None else lambda: sample.in_vocabularies(
            translator.source_vocab, translator.target_vocab)
        table = lexicon.build_for_run(run, progress=progress, sample=ids)
        taken = table.info.get("parent_rows")
        taken = f", {taken:,} source words' rows from the parent" if isinstance(taken, int) else ""
        log(f"lexical table for --shortlist: {run.lexicon_path} "
            f"({table.info['total_seconds']:.1f} s{taken})")
        if not replace:
            _write_dictionary(run, progress, log)
    result(f"run directory: {run.path}  (summary.json, checkpoints/, best/, tensorboard/)")
    distribute.barrier(strategy)
    return summary


def _checked_options(options: TrainOptions, run: RunDir, log: Callable[[str], None]
                     ) -> tuple[TrainOptions, Config, dict[str, Any] | None, bool,
                                adaptation.Parent | None, adaptation.Mix | None]:
    """The options completed (a new run's defaults, the preset's size and recipe), the
    configuration they give (a resumed run's own, changed as --resume allows), a resumed
    run's data.json (None for a new run), whether the run trains on the built-in
    corpus, and the parent of a run --init-from one, read, with the run whose pairs
    --mix mixes in; the model's size is logged."""
    chosen_size = options.size or options.preset or options.paper_size
    chosen_recipe = options.recipe or options.preset
    info = parent = None
    if options.init_from:
        if options.resume:
            raise ConfigError("--init-from starts a new run from another's weights: not with "
                              "--resume, which continues a run from its own")
        parent = adaptation.Parent.open(options.init_from, options.init_weights,
                                        options.keep_optimizer)
        options = adaptation.child_options(options, parent)
        config = adaptation.child_config(options, parent)
        mix = (adaptation.Mix.open(options.mix_from, options.mix_fraction, parent, config)
               if options.mix_fraction is not None else None)
        log(f"model: {config.variant} ({config.architecture}), the parent's size: "
            f"{config_lib.size_summary(config)}")
        return options, config, info, options.data == BUILTIN, parent, mix
    if options.mix_fraction is not None or options.mix_from is not None:
        raise ConfigError("--mix draws pairs from a parent's training data: it needs "
                          "--init-from PARENT_RUN")
    options = options.with_preset()
    if options.resume:
        config, info = resume.resume_config(options, run)
        builtin = bool(info.get("builtin"))
        size = info.get("options", {}).get("size")
    else:
        options = options.for_new_run()
        config = new_run_config(options)
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
    if options.recipe == config_lib.BUILTIN_RECIPE and not chosen_recipe:  # the default
        log("the built-in corpus's recipe: a warm-up, a decay to the end of the budget, "
            "U(-0.1, 0.1) weights and the average of the last 3 checkpoints (--recipe paper "
            "for the paper's training)")
    return options, config, info, builtin, parent, None


def _also_report(options: TrainOptions, run: RunDir, info: dict[str, Any] | None
                 ) -> dict[str, ParallelFiles]:
    """The development splits of other domains the report scores, checked: those of
    --also-report, or, for a run resumed without it, those its data.json records."""
    splits = options.also_report
    if splits is None and info is not None:
        splits = {name: tuple(str(run.stored_location(entry[side], info))
                              for side in ("source", "target"))
                  for name, entry in (info.get("also_report") or {}).items()}
    return also_report_files(splits or {})


def _trainer(config: Config, run: RunDir, info: dict[str, Any], needed_for: str,
             train_files: ParallelFiles, valid_files: ParallelFiles, strategy, jit: bool,
             progress: Progress, warn: Callable[[str], None],
             parent: adaptation.Parent | None = None,
             keep_optimizer: bool = False) -> tuple[Trainer, Translator]:
    """The model, seeded (a new child's from its ``parent``), the Trainer over the run's
    training batches (its prepared ids, or the text for a run made before them) and the
    Translator that scores it."""
    keras.utils.set_random_seed(config.seed)
    source_encoder, target_encoder = run.graph_encoders()
    with distribute.scope(strategy):
        model = TranslationModel(config)
        variables, pull = adaptation.setup_training(model, config, info, parent,
                                                    run.load_vocabularies())
    batching = data.Batching.from_config(config, data.mean_pair_length(info["train"]))
    split = run.prepared_split(info, needed_for=needed_for)
    train_pairs = info["train"]["kept"]
    if info.get("mix"):
        split = adaptation.mixed_split(split, info["mix"], info, needed_for=needed_for)
        train_pairs = info["mix"]["epoch_pairs"]
    if split is not None:
        train_batches = data.prepared_batches(split, batching)
    else:  # a run made before prepared data: its checkpoints hold the text pipeline's state
        shuffle_buffer = data.text_shuffle_buffer(config.shuffle_buffer, train_files, warn)
        train_batches = data.training_batches(
            train_files, source_encoder, target_encoder,
            batching.replace(shuffle_buffer=shuffle_buffer))

    # Scored at every evaluation: encoded once and kept in memory (the development split's
    # size), not traced and tokenized again each time (0.6 s of a tiny run's 1.2 s each).
    dev = data.evaluation_batches(valid_files, source_encoder, target_encoder,
                                  batch_size=config.batch_size).cache()

    translator = Translator(model, *run.codecs(), jit_compile=jit)
    valid_sources, valid_references = valid_files.sides()

    def dev_bleu() -> float:
        hypotheses = [t.text for t in translator.translate(valid_sources, beam_size=1)]
        return scoring.bleu(hypotheses, valid_references)[0]

    trainer = Trainer(
        config, model, run, train_batches, lambda: dev,
        train_pairs=train_pairs, dev_bleu=dev_bleu,
        progress=progress, strategy=strategy, jit_compile=jit, variables=variables, pull=pull,
    )
    if parent is not None and keep_optimizer:
        with distribute.scope(strategy):
            adaptation.keep_optimizer(parent, trainer.optimizer, model, variables, config)
    return trainer, translator


def _report_weights(trainer: Trainer, run: RunDir, config: Config, log: Callable[[str], None],
                    warn: Callable[[str], None]) -> tuple[str, str | None, dict[str, Any] | None]:
    """Loads the weights the report is made with, the best development ones as the paper
    selects its models (averaged when the config says so); returns which ("last", "best"
    or "averaged"), the best checkpoint read, if any, and for a run that averages,
    summary.json's "averaging": the checkpoints asked for and the steps averaged."""
    best = trainer.checkpoints.best_manager.latest_checkpoint
    problem = checkpoint_problem(best) if best else None
    if problem:
        warn(f"the best weights {best} are unreadable ({problem}); reporting with the last ones")
        best = None
    weights = "last"
    if best:
        model_weights.read_model(best, trainer.model)
        weights = "best"
    if not config.average_checkpoints:
        return weights, best, None
    wanted = config.average_checkpoints
    paths = averaging.checkpoints_to_average(run, config.average_from, wanted, strict=False)
    steps = [checkpoint_step(path) for path in paths]
    if len(paths) < wanted:
        log(f"averaging {len(paths)} trained checkpoint(s), fewer than the {wanted} of "
            f"average_checkpoints: the run wrote no more"
            + ("" if paths else f"; reporting with the {weights} weights"))
    if paths:
        averaging.write_average(run, paths, trainer.model, log)
        weights = "averaged"
    return weights, best, {"asked": wanted, "from": config.average_from, "steps": steps}


def _write_dictionary(run: RunDir, progress: Progress, log: Callable[[str], None],
                      sample: unk_dictionary.WordSample | None = None
                      ) -> unk_dictionary.UnknownWordDictionary | None:
    dictionary = unk_dictionary.write_for_run(run, progress=progress, sample=sample)
    if dictionary is not None:
        taken = dictionary.info.get("parent_entries")
        taken = f", {taken:,} of them the parent's" if taken else ""
        log(f"unknown-word dictionary for --unk-replace: {run.dictionary_path} "
            f"({dictionary.info['entries']:,} words{taken}, {dictionary.info['seconds']:.1f} s)")
    return dictionary


def _report_lines(summary: dict[str, Any], beam_size: int) -> list[str]:
    """The report on stdout: how training ended and the held-out BLEU."""
    report = summary["held_out"]
    long = (f"on the {report['sentences_longer_than_30']} sentences longer than 30 tokens: "
            f"{report['bleu_longer_than_30']:.2f}" if report["sentences_longer_than_30"]
            else "no sentence is longer than 30 tokens")
    return [
        f"done: {summary['updates']} updates, {summary['epochs']:.2f} epochs, stopped by "
        f"{summary['stop_reason']}; train NLL {summary['train_nll']:.2f}, dev NLL "
        f"{summary['dev_nll']:.2f}",
        f"held-out BLEU ({report['split']}, {report['sentences']} sentences, beam {beam_size}"
        f"{', <unk> replaced' if report.get('unk_replace') else ''}): "
        f"{report['bleu']:.2f}; {long}",
        *(f"{name} BLEU ({other['split']}, {other['sentences']} sentences): {other['bleu']:.2f}"
          for name, other in summary.get("also_reported", {}).items()),
        f"sacreBLEU signature: {report['bleu_signature']}",
    ]
