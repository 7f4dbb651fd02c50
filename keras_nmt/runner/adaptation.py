"""A run that starts from another run's weights (``train --init-from PARENT_RUN``): the
parent checked and read, the child's options and configuration (the parent's
architecture), its vocabularies (the parent's words, their ids kept, then the new data's),
its weights copied row by row from the parent's, the parts it leaves frozen, the pull
toward the parent's weights, with ``--keep-optimizer`` the parent's optimizer state and,
with ``--mix``, the parent's training pairs mixed into the child's epochs.

A child is an ordinary run directory once set up: its data.json and summary.json name
the parent, and --resume continues from the child's own checkpoints, never the parent's.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from keras_nmt.core import config as config_lib
from keras_nmt.core.config import Config
from keras_nmt.core.constants import RESERVED, UNK_ID
from keras_nmt.core.errors import (
    CheckpointMismatchError, ConfigError, PreparedError, RunDirError, VocabularyError,
)
from keras_nmt.rundir.model_weights import checkpoint_problem, checkpoint_step, model_variables
from keras_nmt.data.prepared import MixedSplit, PreparedSplit
from keras_nmt.rundir.run_directory import RunDir, RunFiles
from keras_nmt.text import codecs
from keras_nmt.runner.train_options import (
    BUILTIN, DEFAULT_SUBWORD_ALPHA, TrainOptions, check_data_options, recipe_values,
)
from keras_nmt.training.optimizers import make_optimizer, slot_variables
from keras_nmt.training.pull import ParentPull
from keras_nmt.text.vocab import Vocabulary

# The Config fields that give a weight its shape, besides the vocabulary sizes (which the
# vocabulary update sets): a child that changed one could not hold its parent's weights.
SHAPE_FIELDS = ("architecture", "embedding", "hidden", "attention", "maxout", "reset_after",
                "tie_embeddings")
# The weights indexed by word (their paths, model_weights.model_variables'): which
# vocabulary, and along which axis its words lie. tests/test_adaptation.py checks that
# no other weight has a vocabulary-sized axis. With tied embeddings the one matrix is
# the encoder's.
VOCABULARY_WEIGHTS: dict[str, tuple[str, int]] = {
    "encoder/embedding/_embeddings": ("source", 0),
    "decoder/embedding/_embeddings": ("target", 0),
    "decoder/readout/output_kernel": ("target", 1),
    "decoder/readout/output_bias": ("target", 0),
}
OUTPUT_BIAS = "decoder/readout/output_bias"
# The parts of config.FREEZABLE by the paths of their weights: the first part whose
# prefix a path starts with. Every weight is in one (a test checks it).
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("embeddings", ("encoder/embedding/", "decoder/embedding/")),
    ("attention", ("decoder/attention/",)),
    ("output", ("decoder/readout/output_",)),
    ("readout", ("decoder/readout/",)),
    ("encoder", ("encoder/",)),
    ("decoder", ("decoder/",)),
)


@dataclasses.dataclass
class Parent:
    """The run a child starts from: its files, its data.json, the checkpoint of the
    weights chosen (and, for --keep-optimizer, of its last training state) and its model
    with those weights."""

    run: RunDir
    files: RunFiles
    info: dict[str, Any]
    weights: str  # the weights read: "best", "last" or "averaged"
    checkpoint: str
    model: Any  # keras_nmt.models.rnnsearch.TranslationModel
    optimizer_checkpoint: str | None = None

    @classmethod
    def open(cls, path: str, weights: str = "reported", keep_optimizer: bool = False) -> "Parent":
        """The run at ``path`` with its ``weights`` (rundir.WEIGHTS) read and checked:
        RunDirError (one line, "--init-from: ...") when it is no run, holds no such
        weights, or they do not read back intact or fit its configuration."""
        run = RunDir(path)
        try:
            files = run.inspect(weights)
            info = run.load_data_info()
            checkpoint = run.weights_checkpoint(files)
            problem = checkpoint_problem(checkpoint)
            if problem:
                raise RunDirError(f"the weights {checkpoint} are unreadable ({problem})")
            model = run.load_model(files=files)
        except RunDirError as error:
            raise type(error)(f"--init-from: {error}") from None
        optimizer = _optimizer_checkpoint(run) if keep_optimizer else None
        # What was read: "best" falls back on the last checkpoint before any evaluation.
        directory = pathlib.Path(checkpoint).parent.resolve()
        chosen = next(name for name, folder in (("best", run.best), ("last", run.checkpoints),
                                                ("averaged", run.averaged))
                      if folder.resolve() == directory)
        return cls(run, files, info, chosen, checkpoint, model, optimizer)

    @property
    def config(self) -> Config:
        return self.files.config

    @property
    def tokenizer(self) -> str:
        return self.run.tokenizer(self.info)

    def record(self, source_vocab: Vocabulary, target_vocab: Vocabulary) -> dict[str, Any]:
        """data.json's and summary.json's "parent" of a child with these vocabularies:
        where it started from, and how many of its words are the parent's (its rows
        that the parent's weights filled and the pull holds)."""
        return {
            "run": str(self.run.path.resolve()),
            "weights": self.weights,
            "checkpoint": str(pathlib.Path(self.checkpoint).resolve()),
            "step": checkpoint_step(self.checkpoint),
            "optimizer_checkpoint": (str(pathlib.Path(self.optimizer_checkpoint).resolve())
                                     if self.optimizer_checkpoint else None),
            "source_words": len(self.files.source_vocab),
            "target_words": len(self.files.target_vocab),
            "new_source_words": len(source_vocab) - len(self.files.source_vocab),
            "new_target_words": len(target_vocab) - len(self.files.target_vocab),
        }

    def sentencepiece_models(self) -> dict[str, bytes]:
        """The parent's SentencePiece model of each language, which a child keeps."""
        langs = (self.info["src"], self.info["tgt"])
        try:
            return {lang: self.run.sentencepiece_path(lang).read_bytes() for lang in langs}
        except OSError as error:
            raise RunDirError(f"--init-from: cannot read {error.filename}: "
                              f"{error.strerror}") from None


def _optimizer_checkpoint(run: RunDir) -> str:
    """The parent's last training checkpoint, which holds its optimizer's state."""
    latest = tf.train.latest_checkpoint(str(run.checkpoints))
    if latest is None:
        raise RunDirError(f"--keep-optimizer: {run.path} holds no training checkpoint "
                          f"({run.checkpoints.name}/) to take the optimizer's state from")
    problem = checkpoint_problem(latest)
    if problem:
        raise RunDirError(f"--keep-optimizer: the training state {latest} is unreadable "
                          f"({problem})")
    return latest


# ---------------------------------------------------------------- the parent's pairs mixed in

@dataclasses.dataclass
class Mix:
    """The pairs of another domain mixed into a child's epochs (``train --mix``): a share
    ``fraction`` of each epoch's pairs is drawn from ``split``, the prepared training
    split (token ids) of ``run``: the parent's, or a run whose vocabularies the parent's
    begin with. Its ids are the child's ids of the same words (the child's vocabularies
    begin with the parent's, or keep its SentencePiece models), so its pairs are read as
    they are: nothing is tokenized or copied, and only the pairs drawn are read."""

    run: RunDir
    fraction: float
    split: PreparedSplit

    @classmethod
    def open(cls, path: str | None, fraction: float, parent: Parent, config: Config) -> "Mix":
        """The mix of ``path``'s training pairs (None: the parent's) into the child of
        ``parent`` with ``config``; RunDirError or ConfigError (one line, "--mix: ...")
        when that is no run with prepared training ids, or its ids are not the child's
        or its pairs longer than the child's ``max_len``."""
        run = parent.run if path is None else RunDir(path)
        try:
            info = run.load_data_info() if path is not None else parent.info
            if path is not None:
                _check_same_ids(run, info, parent)
            split = run.prepared_split(info, needed_for="--mix")
        except RunDirError as error:
            raise type(error)(f"--mix: {error}; PARENT_DATA is a run directory, whose "
                              "prepared training ids are read") from None
        if split is None:
            raise RunDirError(f"--mix: {run.path} holds no prepared training ids (it was made "
                              "by an earlier version): --mix reads a run's prepared/")
        if split.info["max_len"] > config.max_len:
            raise ConfigError(f"--mix: the training pairs of {run.path} are up to "
                              f"{split.info['max_len']} tokens long, the child's up to "
                              f"{config.max_len}: give --set max_len={split.info['max_len']} "
                              "or a --variant of longer sentences")
        return cls(run, fraction, split)

    def drawn_per_epoch(self, own_pairs: int) -> int:
        """How many of an epoch's pairs are drawn, besides the ``own_pairs``: the share
        ``fraction`` of the epoch, at least one."""
        return max(1, round(own_pairs * self.fraction / (1.0 - self.fraction)))

    def record(self, own_pairs: int) -> dict[str, Any]:
        """data.json's and summary.json's "mix" of a child of ``own_pairs`` kept pairs."""
        drawn = self.drawn_per_epoch(own_pairs)
        return {
            "run": str(self.run.path.resolve()),
            "prepared": str(self.split.directory.resolve()),
            "fraction": self.fraction,
            "pairs": self.split.count,
            "drawn_per_epoch": drawn,
            "epoch_pairs": own_pairs + drawn,
        }


def _check_same_ids(run: RunDir, info: Mapping[str, Any], parent: Parent) -> None:
    """RunDirError unless ``run``'s ids are the parent's (and so the child's): the same
    languages and tokenizer, vocabularies the parent's begin with, the same
    SentencePiece models."""
    if (info.get("src"), info.get("tgt")) != (parent.info["src"], parent.info["tgt"]) \
            or run.tokenizer(info) != parent.tokenizer:
        raise RunDirError(f"{run.path} is a {info.get('src')}-{info.get('tgt')} "
                          f"{run.tokenizer(info)} run, the parent a {parent.info['src']}-"
                          f"{parent.info['tgt']} {parent.tokenizer} one")
    theirs = (parent.files.source_vocab, parent.files.target_vocab)
    for side, ours, parents in zip(("source", "target"), run.load_vocabularies(), theirs):
        if parents.tokens[:len(ours)] != ours.tokens:
            raise RunDirError(f"the {side} vocabulary of {run.path} is not the beginning of "
                              "the parent's: its ids would be other words in the child")
    if parent.tokenizer != codecs.WORD and any(
            run.sentencepiece_path(lang).read_bytes() != model
            for lang, model in parent.sentencepiece_models().items()):
        raise RunDirError(f"{run.path} has other SentencePiece models than the parent's")


def mixed_split(own: PreparedSplit, record: Mapping[str, Any], info: Mapping[str, Any], *,
                needed_for: str) -> MixedSplit:
    """A child's own prepared split with the pairs its data.json's ``record`` (of
    :meth:`Mix.record`) mixes in; RunDirError naming what is missing and ``needed_for``
    when the other run's prepared ids are gone."""
    try:
        other = PreparedSplit(record["prepared"], info["src"], info["tgt"])
    except PreparedError as error:
        raise RunDirError(f"the training ids that --mix draws from are gone or damaged "
                          f"({error}; needed for {needed_for}): put {record['run']} back") from None
    if other.count != record["pairs"]:
        raise RunDirError(f"the training ids that --mix draws from, {other.directory}, hold "
                          f"{other.count} pairs, not the {record['pairs']} the run started "
                          f"with (needed for {needed_for})")
    return MixedSplit(own, other, int(record["drawn_per_epoch"]))


# ---------------------------------------------------------------- options, configuration

def child_options(options: TrainOptions, parent: Parent) -> TrainOptions:
    """``options`` completed from the parent (variant, languages, tokenizer) and the
    defaults of a new run; ConfigError (one line) for an option the parent cannot hold:
    a size, other languages, another tokenizer or SentencePiece model."""
    where = parent.run.path
    for flag, given in (("--size", options.size), ("--preset", options.preset),
                        ("--paper-size", options.paper_size)):
        if given:
            raise ConfigError(f"--init-from: the model's size is the parent's ({where}): leave "
                              f"{flag} out (--recipe and --set change how the child trains)")
    kept = {
        "--tokenizer": ("tokenizer", parent.tokenizer),
        "--src-lang": ("src", parent.info["src"]),
        "--tgt-lang": ("tgt", parent.info["tgt"]),
        "--joint-vocabulary": ("joint_vocabulary", bool(parent.info.get("joint_vocabulary"))),
        "--sentencepiece-type": ("sentencepiece_type", parent.info.get("sentencepiece_type")),
    }
    for flag, (name, theirs) in kept.items():
        given = getattr(options, name)
        if given not in (None, False) and given != theirs:
            yours = flag if given is True else f"{flag} {given}"
            has = (f"{flag} {theirs}" if theirs not in (None, False, True)
                   else flag if theirs else f"no {flag}")
            raise ConfigError(f"--init-from: the parent {where} was trained with {has}, not "
                              f"{yours}: a child keeps its parent's languages, tokenizer and "
                              f"vocabularies (leave {flag} out)")
    if options.variant:
        ours = config_lib.VARIANTS.get(options.variant, {}).get("architecture")
        if ours is not None and ours != parent.config.architecture:
            raise ConfigError(f"--init-from: --variant {options.variant} is an RNN{ours}; the "
                              f"parent {where} is an RNN{parent.config.architecture} "
                              f"({parent.config.variant}): a child keeps its parent's "
                              "architecture")
    options = dataclasses.replace(
        options, variant=options.variant or parent.config.variant, data=options.data or BUILTIN,
        **{name: theirs for name, theirs in kept.values()})
    if options.subword_samples and options.subword_alpha is None:
        options.subword_alpha = DEFAULT_SUBWORD_ALPHA
    check_data_options(options)
    return options


def child_config(options: TrainOptions, parent: Parent) -> Config:
    """The child's configuration (its vocabulary sizes the most words it may have): the
    parent's (but its ``freeze``, ``parent_pull`` and warm-up), with the variant's sentence
    length, the recipe, ``--set`` and the seed given. ConfigError (one line) for a
    change to the shape of a weight."""
    where = parent.run.path
    # How the parent was itself adapted is no part of what the child inherits, nor is its
    # warm-up: that protects weights drawn at random from Adam's first full-rate steps,
    # and a child's are trained. Without it a child adapting 5 minutes to a new domain
    # scored 2.4 BLEU more on the selecting half, two runs each (docs/training.md).
    # --recipe and --set still choose one.
    values = {**parent.config.to_dict(), "freeze": "", "parent_pull": 0.0,
              "warmup_steps": 0}
    if options.variant != parent.config.variant:
        values.update(variant=options.variant, **config_lib.VARIANTS[options.variant])
    values.update(recipe_values(options.recipe, parent.config.architecture))
    values.update(options.overrides)
    if options.seed is not None:
        values["seed"] = options.seed
    vocabularies = {"src_vocab_size": parent.files.source_vocab,
                    "tgt_vocab_size": parent.files.target_vocab}
    for field, vocabulary in vocabularies.items():
        asked, theirs = options.overrides.get(field), len(vocabulary)
        if parent.tokenizer != codecs.WORD:
            if asked not in (None, theirs):
                raise ConfigError(f"--init-from: --set {field}={asked}: a child keeps its "
                                  f"parent's SentencePiece model, of {theirs:,} pieces")
            values[field] = theirs
        elif asked is not None and asked < theirs:
            raise ConfigError(f"--init-from: --set {field}={asked} cannot hold the parent's "
                              f"{theirs:,} words, which a child keeps with their ids")
        else:
            # As many words as a new run may have, and never fewer than the parent's.
            values[field] = max(theirs, asked or _default(field))
    config = Config.from_dict(values)
    for field in SHAPE_FIELDS:
        if getattr(config, field) != getattr(parent.config, field):
            how = (f"--set {field}={options.overrides[field]}" if field in options.overrides
                   else f"--variant {options.variant}")
            raise ConfigError(f"--init-from: {how} changes the shape of the parent's weights "
                              f"({field} is {getattr(parent.config, field)} in {where}): a "
                              "child keeps its parent's architecture")
    config_lib.check_optimizer_fields(config, options.overrides)
    if options.keep_optimizer and config.optimizer != parent.config.optimizer:
        raise ConfigError(f"--keep-optimizer: the parent {where} trained with "
                          f"{parent.config.optimizer}, the child with {config.optimizer}: "
                          "neither can continue the other's state")
    return config


def _default(field: str) -> int:
    return next(f.default for f in dataclasses.fields(Config) if f.name == field)


# ---------------------------------------------------------------- vocabularies

def extended_vocabulary(parent: Vocabulary, counts: Mapping[str, int], size: int,
                        min_count: int) -> Vocabulary:
    """The parent's tokens in the parent's order (so every id it had is the same word),
    then the words of ``counts`` it lacks, seen at least ``min_count`` times, by falling
    count (ties by the word), up to ``size`` tokens in all."""
    new = {word: count for word, count in counts.items() if word not in parent}
    added = Vocabulary.from_counts(new, size - len(parent) + len(RESERVED), min_count)
    return Vocabulary(parent.tokens + added.tokens[len(RESERVED):])


def child_vocabularies(parent: Parent, source_counts: Mapping[str, int],
                       target_counts: Mapping[str, int],
                       config: Config) -> tuple[Vocabulary, Vocabulary]:
    """A word child's vocabularies (:func:`extended_vocabulary`) from the new training
    split's word counts, up to the config's sizes, above its ``vocab_min_count``."""
    return (extended_vocabulary(parent.files.source_vocab, source_counts,
                                config.src_vocab_size, config.vocab_min_count),
            extended_vocabulary(parent.files.target_vocab, target_counts,
                                config.tgt_vocab_size, config.vocab_min_count))


# ---------------------------------------------------------------- weights

def with_new_rows(path: str, value: np.ndarray, axis: int, count: int) -> np.ndarray:
    """The parent's ``value`` of the vocabulary weight ``path`` with ``count`` rows for
    new words appended along ``axis``.

    A new word starts as the parent's ``<unk>``, the token the parent read and wrote for
    every one of these words. Its embedding rows copy ``<unk>``'s, so at the first step
    the child reads the new data exactly as the parent did and nothing after the
    embeddings meets an input it was not trained on. Its output column copies ``<unk>``'s
    with the bias lowered by log(count): the new words together start with the
    probability the parent gave ``<unk>``, and the parent's own words keep their ranks.
    The mean of the parent's rows, the other obvious choice, would give each new word an
    ordinary word's probability in every context: with thousands of new words, a large
    share of the probability moved off the parent's words before any training. The
    words part as soon as they are trained: a word's input row moves only where it
    occurs, its output column only where it is (or is not) the reference."""
    rows = np.repeat(np.take(value, [UNK_ID], axis=axis), count, axis=axis)
    if path == OUTPUT_BIAS and count:
        rows = rows - np.log(count).astype(value.dtype)
    return np.concatenate([value, rows.astype(value.dtype)], axis=axis)


def initialize(model, parent_model, parent_vocabularies: tuple[Vocabulary, Vocabulary],
               vocabularies: tuple[Vocabulary, Vocabulary]) -> None:
    """Give ``model`` (the child's, of ``vocabularies``) the weights of ``parent_model``
    (of ``parent_vocabularies``): every weight copied whole, a weight indexed by word row
    by row for the parent's words (their ids are the same in the child's vocabularies)
    and :func:`with_new_rows` for the new ones. CheckpointMismatchError when a weight
    does not fit."""
    for vocabulary, theirs, side in zip(vocabularies, parent_vocabularies, ("source", "target")):
        if vocabulary.tokens[:len(theirs)] != theirs.tokens:
            raise VocabularyError(f"the child's {side} vocabulary does not begin with its "
                                  f"parent's words in the parent's order")
    theirs = model_variables(parent_model)
    for path, variable in model_variables(model).items():
        if path not in theirs:
            raise CheckpointMismatchError(f"--init-from: the parent has no weight {path}")
        value = np.asarray(theirs[path].numpy())
        if path in VOCABULARY_WEIGHTS:
            axis = VOCABULARY_WEIGHTS[path][1]
            value = with_new_rows(path, value, axis, variable.shape[axis] - value.shape[axis])
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointMismatchError(
                f"--init-from: the parent's {path} is {list(theirs[path].shape)}, the "
                f"child's {list(variable.shape)}")
        variable.assign(value)


def part_of(path: str) -> str:
    """The part of config.FREEZABLE that the weight ``path`` belongs to."""
    for part, prefixes in PARTS:
        if path.startswith(prefixes):
            return part
    raise ValueError(f"the weight {path} is in no part of adaptation.PARTS")


def trained_variables(model, config: Config) -> list:
    """The weights of ``model`` that training updates, in the model's order (the order
    its optimizer state is kept in): all but those of ``config.freeze``'s parts."""
    frozen = set(config.frozen_parts)
    if not frozen:
        return list(model.trainable_variables)
    paths = {id(variable): path for path, variable in model_variables(model).items()}
    return [variable for variable in model.trainable_variables
            if part_of(paths[id(variable)]) not in frozen]


def shared_rows(path: str, record: Mapping[str, Any]) -> tuple[int, int] | None:
    """How much of the weight ``path`` is its parent's (the parent of data.json's
    ``record``): None for all of it, or (axis, rows) for a weight indexed by word."""
    if path not in VOCABULARY_WEIGHTS:
        return None
    side, axis = VOCABULARY_WEIGHTS[path]
    return axis, int(record[f"{side}_words"])


def setup_training(model, config: Config, info: Mapping[str, Any], parent: Parent | None = None,
                   vocabularies: tuple[Vocabulary, Vocabulary] | None = None
                   ) -> tuple[list, ParentPull | None]:
    """What any run's training updates and how: the trained weights
    (:func:`trained_variables`) and, with ``config.parent_pull``, the pull toward the
    parent's weights. A new child (``parent`` and its ``vocabularies`` given) first gets
    its parent's weights (:func:`initialize`), which the pull then holds it to; a
    resumed one restores both from its own checkpoint. Call in the training's
    distribution scope."""
    if parent is not None:
        initialize(model, parent.model, (parent.files.source_vocab, parent.files.target_vocab),
                   vocabularies)
    variables = trained_variables(model, config)
    if not config.parent_pull:
        return variables, None
    record = info.get("parent")
    if record is None:
        raise ConfigError("parent_pull pulls toward a parent's weights: this run has no "
                          "parent (train --init-from)")
    paths = {id(variable): path for path, variable in model_variables(model).items()}
    rows = [shared_rows(paths[id(variable)], record) for variable in variables]
    return variables, ParentPull(config.parent_pull, variables, rows)


def keep_optimizer(parent: Parent, optimizer, model, variables: list, config: Config) -> None:
    """Start ``optimizer`` (the child's, built over ``variables`` of ``model``) from the
    state of the parent's last training checkpoint: each slot of a weight the parent
    trained, its new words' rows empty (zero, a fresh slot's value), and the update
    count (Adam's bias correction). A weight the parent kept frozen starts fresh."""
    # Built as the parent's trainer built it: the state is checkpointed in that order.
    reading = make_optimizer(parent.config)
    trained_by_parent = trained_variables(parent.model, parent.config)
    reading.build(trained_by_parent)
    tf.train.Checkpoint(optimizer=reading).read(
        parent.optimizer_checkpoint).assert_existing_objects_matched().expect_partial()
    theirs = model_variables(parent.model)
    trained_by_parent = {id(variable) for variable in trained_by_parent}
    paths = {id(variable): path for path, variable in model_variables(model).items()}
    for variable in variables:
        path = paths[id(variable)]
        if id(theirs[path]) not in trained_by_parent:
            continue
        for ours, its in zip(slot_variables(optimizer, config.optimizer, variable),
                             slot_variables(reading, parent.config.optimizer, theirs[path])):
            value = np.asarray(its.numpy())
            if path in VOCABULARY_WEIGHTS:
                axis = VOCABULARY_WEIGHTS[path][1]
                shape = list(value.shape)
                shape[axis] = ours.shape[axis] - value.shape[axis]
                value = np.concatenate([value, np.zeros(shape, value.dtype)], axis=axis)
            ours.assign(value)
    optimizer.iterations.assign(reading.iterations)


def describe(record: Mapping[str, Any], config: Config) -> str:
    """The log line of a new child: where it starts from and what it changes."""
    frozen = f"; frozen: {', '.join(config.frozen_parts)}" if config.freeze else ""
    pull = (f"; pulled toward the parent (parent_pull {config.parent_pull:g})"
            if config.parent_pull else "")
    optimizer = ("; the parent's optimizer state" if record.get("optimizer_checkpoint")
                 else "; a fresh optimizer")
    return (f"starting from {record['run']} ({record['weights']} weights, step "
            f"{record['step']}): {record['new_source_words']:,} new source and "
            f"{record['new_target_words']:,} new target words{frozen}{pull}{optimizer}")


def describe_mix(record: Mapping[str, Any]) -> str:
    """The log line of a child that mixes another run's pairs in (``train --mix``)."""
    return (f"each epoch of {record['epoch_pairs']:,} pairs draws {record['drawn_per_epoch']:,} "
            f"({record['fraction']:.0%}) from the {record['pairs']:,} training pairs of "
            f"{record['run']}")
