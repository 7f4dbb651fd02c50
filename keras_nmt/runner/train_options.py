"""What a training run is asked for (:class:`TrainOptions`, ``keras-nmt train``'s options)
and the configuration a new run resolves them to, checked before anything is written."""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
from typing import Any

from keras_nmt.core import config as config_lib
from keras_nmt.core import cpu
from keras_nmt.core.config import Config
from keras_nmt.corpus import wmt14
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.core.errors import ConfigError, CorpusError

BUILTIN = "builtin"
DEFAULT_SUBWORD_ALPHA = 0.1  # Kudo (2018)'s choice with the 64 best segmentations
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
    # With tokenizer "sentencepiece": one model of both languages' pieces instead of one
    # per language.
    joint_vocabulary: bool = False
    # With tokenizer "sentencepiece": this many copies of the training split in sampled
    # segmentations (subword regularisation), epoch E training on copy E mod
    # subword_samples, drawn with this smoothing (None: DEFAULT_SUBWORD_ALPHA).
    subword_samples: int | None = None
    subword_alpha: float | None = None
    # With tokenizer "sentencepiece": "unigram" (None) or "bpe".
    sentencepiece_type: str | None = None
    strategy: str = "default"  # see keras_nmt.core.distribute
    # --precision: a name of config.PRECISIONS or cpu.AUTO, resolved into
    # overrides["precision"] at the run's start (resolve_precision). None: --set's, else
    # the config's (float32), the run's own with resume or the parent's with init_from.
    precision: str | None = None
    # XLA-compile the training step and the beam search; None: where it wins (xla.use_jit).
    jit: bool | None = None
    # A name of config.RECIPES; None: BUILTIN_RECIPE on the built-in corpus at its compact
    # size, none elsewhere.
    recipe: str | None = None
    # A name of config.SIZES; None: the built-in corpus's compact size (the paper's with
    # paper_size), the paper's on any other corpus.
    size: str | None = None
    preset: str | None = None  # a name of config.PRESETS: a size and a recipe
    lexicon: bool = True  # build the lexical table for vocabulary selection at the end
    # A run directory whose weights the new run starts from (keras_nmt.runner.adaptation): its
    # architecture, tokenizer and vocabularies (extended with the new data's words) too.
    init_from: str | None = None
    init_weights: str = "reported"  # which of the parent's weights (rundir.WEIGHTS)
    # Start from the parent's optimizer state (its last checkpoint's) instead of afresh.
    keep_optimizer: bool = False
    # With init_from: this share (0 < f < 1) of each epoch's training pairs drawn from
    # the prepared training split of the run mix_from (None: the parent's), see
    # keras_nmt.runner.adaptation.Mix.
    mix_fraction: float | None = None
    mix_from: str | None = None
    # More development splits the report scores besides the held-out one:
    # name -> (source file, reference file); None with resume: those the run recorded.
    also_report: dict[str, tuple[str, str]] | None = None

    def for_new_run(self) -> "TrainOptions":
        """These options with NEW_RUN_DEFAULTS where they are None, the size resolved."""
        options = dataclasses.replace(self, **{
            name: value for name, value in NEW_RUN_DEFAULTS.items() if getattr(self, name) is None
        })
        if options.size is None:
            options.size = ("paper" if options.paper_size else config_lib.BUILTIN_SIZE
                            if options.data == BUILTIN else config_lib.DEFAULT_SIZE)
        if options.tokenizer == "sentencepiece" and options.sentencepiece_type is None:
            options.sentencepiece_type = "unigram"
        if options.subword_samples and options.subword_alpha is None:
            options.subword_alpha = DEFAULT_SUBWORD_ALPHA
        if (options.recipe is None and options.data == BUILTIN
                and options.size == config_lib.BUILTIN_SIZE):
            options.recipe = config_lib.BUILTIN_RECIPE
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


def parse_mix(text: str) -> tuple[str | None, float]:
    """``--mix [PARENT_DATA:]FRACTION`` -> (the run directory PARENT_DATA, or None for
    the parent, and the fraction); ConfigError (one line) for a bad value."""
    where, colon, fraction = text.rpartition(":")
    try:
        value = float(fraction)
    except ValueError:
        value = None
    if value is None or not 0.0 < value < 1.0:
        raise ConfigError(f"--mix {text}: FRACTION must be a number between 0 and 1 (both "
                          f"excluded), the share of each epoch's pairs drawn from the "
                          f"parent's training data, not {fraction!r}")
    if colon and not where:
        raise ConfigError(f"--mix {text}: PARENT_DATA before the colon is empty: give a run "
                          "directory, or leave it out with the colon for the parent's data")
    return (where or None), value


def parse_also_report(values: list[str]) -> dict[str, tuple[str, str]]:
    """``--also-report NAME=SOURCE,REFERENCE`` options -> name -> (source, reference);
    ConfigError (one line) for one that is not of that form or a name given twice."""
    splits: dict[str, tuple[str, str]] = {}
    for value in values:
        name, equals, files = value.partition("=")
        name = name.strip()
        source, comma, reference = files.partition(",")
        if not (equals and comma and name and source and reference):
            raise ConfigError(f"--also-report {value}: give NAME=SOURCE_FILE,REFERENCE_FILE, "
                              "e.g. --also-report news=newstest.en,newstest.fr")
        if name in splits or name == "held_out":
            taken = "given twice" if name in splits else "the held-out split"
            raise ConfigError(f"--also-report {value}: the name {name!r} is {taken}: give "
                              "each split a name of its own")
        splits[name] = (source, reference)
    return splits


def also_report_files(splits: dict[str, tuple[str, str]]) -> dict[str, ParallelFiles]:
    """The files of ``--also-report`` splits, each read once now (UTF-8, the same number
    of lines on both sides): CorpusError (one line) before any work otherwise."""
    found = {}
    for name, (source, reference) in splits.items():
        files = ParallelFiles(pathlib.Path(source).expanduser().resolve(),
                              pathlib.Path(reference).expanduser().resolve())
        for path in (files.source, files.target):
            if not path.is_file():
                raise CorpusError(f"--also-report {name}: {path} is not a file")
        if not files.check():
            raise CorpusError(f"--also-report {name}: {files.source} holds no sentence")
        found[name] = files
    return found


def default_run_dir(variant: str) -> pathlib.Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{variant}-{stamp}"


def resolve_precision(options: TrainOptions, flags, on_gpu: bool) -> tuple[TrainOptions, str]:
    """``options`` with ``--precision`` put into ``--set precision``, ``auto`` chosen by
    :func:`keras_nmt.core.cpu.choose_precision` from the CPU's ``flags`` and ``on_gpu``,
    and why, for the run's summary. With ``resume``, ``auto`` keeps the run's own."""
    asked = options.precision
    if asked == cpu.AUTO and options.resume:
        return options, "auto: --resume keeps the run's own"
    if asked is None:
        given = options.overrides.get("precision")
        return options, (f"--set precision={given}" if given is not None
                         else "--resume: the run's own" if options.resume
                         else "--init-from: the parent's" if options.init_from
                         else "the default")
    precision, reason = cpu.choose_precision(asked, flags, on_gpu)
    overrides = {**options.overrides, "precision": precision}
    return dataclasses.replace(options, overrides=overrides), reason


def resolve_config(options: TrainOptions) -> Config:
    """The variant's configuration with the model size (:data:`config.SIZES`: compact on
    the built-in corpus, the paper's elsewhere, unless chosen), the recipe and the user's
    overrides, in that order."""
    options = options.with_preset().for_new_run()
    values: dict[str, Any] = dict(config_lib.SIZES[options.size])
    architecture = config_lib.VARIANTS[options.variant]["architecture"]
    values.update(recipe_values(options.recipe, architecture))
    values.update(options.overrides)
    if options.seed is not None:
        values["seed"] = options.seed
    return config_lib.variant_config(options.variant, values)


def recipe_values(recipe: str | None, architecture: str) -> dict[str, Any]:
    """The fields a recipe (None: none) sets for a model of ``architecture``."""
    if recipe is None:
        return {}
    values = dict(config_lib.RECIPES[recipe])
    if architecture != "search":
        # RNNencdec has no attention to fill an <unk> from: its words stay whole.
        values.pop("vocab_min_count", None)
    return values


def check_sentencepiece_options(options: TrainOptions) -> None:
    """ConfigError for a SentencePiece option a new run would not use."""
    for flag, given in (("--joint-vocabulary", options.joint_vocabulary),
                        ("--subword-samples", options.subword_samples),
                        ("--sentencepiece-type", options.sentencepiece_type)):
        if given and options.tokenizer != "sentencepiece":
            raise ConfigError(f"{flag} needs --tokenizer sentencepiece")
    if options.subword_alpha is not None and not options.subword_samples:
        raise ConfigError("--subword-alpha needs --subword-samples")
    if options.subword_samples and options.sentencepiece_type == "bpe":
        raise ConfigError("--subword-samples draws among a unigram model's segmentations: "
                          "not with --sentencepiece-type bpe")


def new_run_config(options: TrainOptions) -> Config:
    """A new run's configuration (vocabulary sizes before the corpus scan), after every
    check of ``options`` (for_new_run's) that needs no corpus: nothing is written yet.
    A run adapted from another (``init_from``) takes keras_nmt.runner.adaptation's instead."""
    check_data_options(options)
    config = resolve_config(options)
    if config.tie_embeddings and not options.joint_vocabulary:
        raise ConfigError("tie_embeddings needs --joint-vocabulary (--tokenizer sentencepiece): "
                          "with a vocabulary per language an id is a different word on each side")
    for given, what in ((config.freeze, "--freeze"), (config.parent_pull, "--set parent_pull")):
        if given:
            raise ConfigError(f"{what} holds a run to the weights it starts from: it needs "
                              "--init-from PARENT_RUN")
    config_lib.check_optimizer_fields(config, options.overrides)
    return config


def check_data_options(options: TrainOptions) -> None:
    """ConfigError or CorpusError for options of a new run's data that contradict each
    other or would change nothing."""
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
    check_sentencepiece_options(options)
