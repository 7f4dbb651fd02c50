"""Model and training configuration: the paper's four variants as data.

A run is described by one flat :class:`Config`. Flat, because every field must be
overridable from the command line as ``--set name=value`` and a flat namespace keeps
those names short and unambiguous. The variants of Bahdanau et al. (2015) differ only
in two fields, so they are rows of a table, not code paths.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterable, Mapping

from keras_nmt.core.errors import ConfigError

ARCHITECTURES = ("search", "encdec")
OPTIMIZERS = ("adadelta", "adam", "sgd")
# Fields that only some optimizers read (training.make_optimizer); every other field
# applies to all of them.
OPTIMIZER_FIELDS = {"rho": ("adadelta",), "epsilon": ("adadelta",)}
DEFAULT_VARIANT = "search50"
# keras.mixed_precision policies: variables stay float32 in all three.
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
AVERAGE_FROM = ("last", "best")
LR_SCHEDULES = ("constant", "budget")
INITS = ("paper", "uniform")  # weight initialisation schemes (layers/initializers.py)
# The parts of a model that Config.freeze can hold fixed (keras_nmt.runner.adaptation maps each
# weight to one): the word embeddings, the encoder's recurrences, the alignment model,
# the decoder's recurrence and initial state, the deep output's maxout layer, and the
# output layer (its words' rows and biases).
FREEZABLE = ("embeddings", "encoder", "attention", "decoder", "readout", "output")
# Batch widths under --jit are multiples of this (Config.length_multiple, when it is 0;
# Translator's decoding batches always): XLA compiles once per shape.
JIT_LENGTH_MULTIPLE = 8
# The longest max_len: the prepared split stores each pair side's length in 16 bits
# (keras_nmt.data.prepared), so a longer one would wrap and misalign every later pair.
MAX_LEN_LIMIT = 65_535


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that defines a model and how it is trained.

    Defaults are the paper's (Appendix A and B): m=620, n=1000, n'=1000, l=500,
    30,000-word shortlists, minibatches of 80, Adadelta (rho=0.95, eps=1e-6) and
    gradient norm clipped to 1.
    """

    variant: str = DEFAULT_VARIANT
    architecture: str = "search"  # "search" (RNNsearch) or "encdec" (RNNencdec)
    embedding: int = 620  # m: word embedding size
    hidden: int = 1000  # n: GRU units (per direction in the encoder)
    attention: int = 1000  # n': hidden units of the alignment model
    maxout: int = 500  # l: maxout units of the deep output
    src_vocab_size: int = 30000  # shortlist, including the reserved symbols
    tgt_vocab_size: int = 30000
    # Beyond the paper: a word seen fewer times than this in the training split stays out
    # of the word vocabularies, whatever their size, and reads as <unk>; so training meets
    # <unk> on both sides, and the model learns to read an unknown word and to write <unk>
    # for one, which --unk-replace then fills. 1 (the default) keeps every word that fits;
    # 3 in --recipe budget.
    # SentencePiece's pieces ignore it.
    vocab_min_count: int = 1
    # Beyond the paper: the encoder and the decoder read words through one embedding
    # matrix. Only with one vocabulary for both sides (--joint-vocabulary), where an id
    # is the same piece in either language: a name or a number is then one row, trained
    # by both sides. The output layer keeps its own weights (its rows are maxout-sized).
    tie_embeddings: bool = False
    max_len: int = 50  # training pairs longer than this (either side) are dropped
    reset_after: bool = False  # cuDNN-style GRU reset gate; the paper's form is reset-before
    # Training (Appendix B).
    batch_size: int = 80
    optimizer: str = "adadelta"
    learning_rate: float = 1.0
    rho: float = 0.95
    epsilon: float = 1e-6
    clipnorm: float = 1.0
    sort_batches: int = 20  # minibatches sorted together for length bucketing
    # Beyond the paper: > 0 fills each minibatch up to this many padded token slots
    # (sentences x longest side) instead of batch_size sentences; 0 keeps batch_size.
    batch_tokens: int = 0
    # Beyond the paper: "constant" (the paper's), or "budget": a linear warm-up over
    # warmup_steps, then a cosine decay that reaches learning_rate * final_lr_fraction at
    # the end of the budget (--max-minutes or --max-steps, whichever ends first).
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    final_lr_fraction: float = 0.1
    # Beyond the paper (trained on 348M words; small corpora overfit): the dropout rate
    # on the word embeddings, the annotations and the deep output's maxout layer during
    # training. 0 in the paper's variants.
    dropout: float = 0.0
    # "paper": Appendix B.1's N(0, 0.01^2) weights, N(0, 0.001^2) alignment weights and
    # orthogonal recurrent blocks, tuned for Adadelta; "uniform": every weight matrix
    # U(-0.1, 0.1), as JoeyNMT's small-corpus recipes do with Adam.
    init: str = "paper"
    # Beyond the paper (Jean et al., 2015): > 0 trains with a softmax over this many
    # output words per batch (the batch's own target words, then uniformly drawn ones,
    # corrected for their sampling probability); dev NLL and decoding use the full
    # softmax. It must hold every target word a batch can have. 0: the full softmax.
    sampled_softmax: int = 0
    # Beyond the paper (Szegedy et al., 2016): the training loss puts this weight on a
    # uniform distribution over the target vocabulary and 1 - it on the reference word,
    # against over-confidence on a corpus seen many times; with sampled_softmax the
    # uniform part is estimated from the candidates. Dev NLL, force decoding and the
    # scores stay the plain NLL. 0: the paper's loss.
    label_smoothing: float = 0.0
    # Beyond the paper, for XLA (--jit compiles once per batch shape): > 0 pads every
    # training batch's source and target to one length, a multiple of this, so a run
    # sees at most ceil((max_len + 1) / length_multiple) shapes. 0: each batch its own
    # lengths (--jit makes it 8). Needs batch_tokens = 0, the fixed batch size.
    length_multiple: int = 0
    # 0: every epoch is a permutation of the whole training split, held in memory (the
    # paper shuffles the whole corpus). > 0: pairs are streamed through a shuffle buffer
    # of this many pairs, saved in every checkpoint (about 0.6 KB a pair); the order on
    # disk then shows through. Either way --resume continues with exactly the next batch.
    shuffle_buffer: int = 0
    # Computation dtype (train.py --precision). Fixed for a run: float16 adds loss
    # scaling state to the checkpoint.
    precision: str = "float32"
    checkpoint_every: int = 500  # steps between checkpoints
    # Beyond the paper: > 0 keeps the model weights of the last N checkpoints (recent/)
    # or the best N development scores (best/, average_from="best"), and at the end of
    # training reports with their average (averaged/). 0: no averaging.
    average_checkpoints: int = 0
    average_from: str = "last"  # "last" or "best"
    eval_every: int = 500  # steps between development-set evaluations
    patience: int = 10  # training stops after this many evaluations in a row without improvement
    early_stop_metric: str = "nll"  # "nll" or "bleu"
    # Beyond the paper, for a run that starts from another's weights (train --init-from):
    # the parts of FREEZABLE, a comma list, that training leaves exactly as they are
    # (train --freeze), and the strength s of an L2 pull toward the parent's weights,
    # s/2 x the squared distance of every weight the run shares with its parent, which
    # bounds how far adapting to new data moves the model (and how much it forgets).
    # "" and 0: the run trains every weight, unpulled.
    freeze: str = ""
    parent_pull: float = 0.0
    # Decoding used for the held-out report at the end of training.
    beam_size: int = 5
    length_alpha: float = 1.0
    max_decode_ratio: float = 2.0  # maximum output length relative to the source length
    seed: int = 1234

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ConfigError(
                f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.early_stop_metric not in ("nll", "bleu"):
            raise ConfigError(f"early_stop_metric must be 'nll' or 'bleu', got {self.early_stop_metric!r}")
        for name in (
            "embedding", "hidden", "attention", "maxout", "max_len", "batch_size",
            "sort_batches", "checkpoint_every", "eval_every", "beam_size", "vocab_min_count",
            "patience",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)}")
        for name in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(self, name) < 8:
                raise ConfigError(f"{name} must be at least 8, got {getattr(self, name)}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                f"tie_embeddings needs one vocabulary for both sides: src_vocab_size "
                f"{self.src_vocab_size:,} and tgt_vocab_size {self.tgt_vocab_size:,} differ")
        if self.max_len > MAX_LEN_LIMIT:
            raise ConfigError(f"max_len must be at most {MAX_LEN_LIMIT:,} (the prepared "
                              f"split's 16-bit lengths), got {self.max_len:,}")
        if self.batch_tokens < 0:
            raise ConfigError(f"batch_tokens must be >= 0 (0 = batches of batch_size sentences), got {self.batch_tokens}")
        if 0 < self.batch_tokens <= self.max_len:
            raise ConfigError(
                f"batch_tokens={self.batch_tokens} cannot hold one sentence of max_len={self.max_len} "
                f"tokens plus EOS; use at least {self.max_len + 1}"
            )
        if self.shuffle_buffer < 0:
            raise ConfigError(
                f"shuffle_buffer must be >= 0 (0 = a permutation of the whole corpus), got {self.shuffle_buffer}"
            )
        if self.average_checkpoints < 0:
            raise ConfigError(f"average_checkpoints must be >= 0 (0 = none), got {self.average_checkpoints}")
        if self.average_from not in AVERAGE_FROM:
            raise ConfigError(f"average_from must be one of {', '.join(AVERAGE_FROM)}, got {self.average_from!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if self.warmup_steps < 0 or not 0.0 <= self.final_lr_fraction <= 1.0:
            raise ConfigError("warmup_steps must be >= 0 and final_lr_fraction in [0, 1]")
        if self.init not in INITS:
            raise ConfigError(f"init must be one of {', '.join(INITS)}, got {self.init!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.sampled_softmax < 0:
            raise ConfigError(f"sampled_softmax must be >= 0 (0 = the full softmax), got {self.sampled_softmax}")
        most = (self.batch_tokens or self.batch_size * (self.max_len + 1)) + 1  # + PAD
        if 0 < self.sampled_softmax < most:
            raise ConfigError(
                f"sampled_softmax={self.sampled_softmax} cannot hold the {most} distinct target "
                f"words a batch can have (batch of {self.batch_tokens or self.batch_size} x "
                f"max_len {self.max_len} + EOS, + PAD); use at least {most}"
            )
        if self.length_multiple < 0:
            raise ConfigError(f"length_multiple must be >= 0 (0 = exact lengths), got {self.length_multiple}")
        if self.length_multiple and self.batch_tokens:
            raise ConfigError(
                "length_multiple needs batch_tokens=0: bounded batch shapes need a fixed "
                "number of sentences per batch"
            )
        if self.learning_rate <= 0 or self.clipnorm <= 0 or self.epsilon <= 0:
            raise ConfigError("learning_rate, clipnorm and epsilon must be positive")
        unknown = [part for part in self.frozen_parts if part not in FREEZABLE]
        if unknown:
            raise ConfigError(f"freeze: no part named {unknown[0]!r}; the parts are "
                              f"{', '.join(FREEZABLE)}")
        if "attention" in self.frozen_parts and not self.uses_attention:
            raise ConfigError("freeze: an RNNencdec model has no attention to freeze")
        parts = set(FREEZABLE) if self.uses_attention else set(FREEZABLE) - {"attention"}
        if set(self.frozen_parts) >= parts:
            raise ConfigError(f"freeze: {self.freeze} is every part of the model: nothing "
                              "would be trained")
        if not self.parent_pull >= 0:
            raise ConfigError(f"parent_pull must be >= 0 (0 = no pull), got {self.parent_pull}")

    @property
    def frozen_parts(self) -> tuple[str, ...]:
        """The parts of :data:`FREEZABLE` that ``freeze`` names, in its order."""
        return tuple(dict.fromkeys(part.strip() for part in self.freeze.split(",") if part.strip()))

    @property
    def uses_attention(self) -> bool:
        return self.architecture == "search"

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "Config":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown configuration field(s): {', '.join(unknown)}")
        return cls(**values)


# The paper's four models: RNNencdec-30/50 and RNNsearch-30/50, named by the maximum
# training sentence length.
VARIANTS: dict[str, dict[str, Any]] = {
    "encdec30": {"architecture": "encdec", "max_len": 30},
    "encdec50": {"architecture": "encdec", "max_len": 50},
    "search30": {"architecture": "search", "max_len": 30},
    "search50": {"architecture": "search", "max_len": 50},
}

# Dimensions small enough to train on a laptop CPU in minutes. Applied to the built-in
# corpus unless the user asks for the paper's sizes; its vocabulary is tiny, so the
# 30,000 shortlist is cut to what the corpus has.
COMPACT: dict[str, Any] = {
    "embedding": 96,
    "hidden": 128,
    "attention": 128,
    "maxout": 64,
    "optimizer": "adam",
    "learning_rate": 5e-3,
    "batch_size": 64,
    "checkpoint_every": 100,
    "eval_every": 100,
}


# Model sizes (train.py --size NAME), applied before the recipe and --set. "paper": the
# Config defaults (m=620, n=n'=1000, l=500, Adadelta, batch 80), the default on a real
# corpus; days of training on a CPU. "medium": the size of every published real-corpus
# result (docs/benchmarks.md: Anki, Multi30k), trainable on a CPU in tens of minutes.
# "compact": the built-in corpus's default, minutes on a laptop.
MEDIUM: dict[str, Any] = {
    "embedding": 256,
    "hidden": 256,
    "attention": 256,
    "maxout": 128,
    "optimizer": "adam",
    "learning_rate": 2e-3,
    "batch_size": 64,
}
SIZES: dict[str, dict[str, Any]] = {"compact": COMPACT, "medium": MEDIUM, "paper": {}}
DEFAULT_SIZE = "paper"  # on a real corpus; the built-in corpus takes "compact"
BUILTIN_SIZE = "compact"
BUILTIN_RECIPE = "builtin"  # on the built-in corpus at BUILTIN_SIZE, unless --recipe says


def size_summary(config: "Config") -> str:
    """What a size means, read from a configuration: dimensions, optimizer, batch."""
    return (f"embedding {config.embedding}, hidden {config.hidden}, attention "
            f"{config.attention}, maxout {config.maxout}; {config.optimizer} "
            f"{config.learning_rate:g}, batch {config.batch_size}")


# Training recipes beyond the paper (train.py --recipe NAME): applied after the compact
# sizes and before --set, which wins. "budget": the most from a fixed training time on
# one machine. Adam at the medium size's rate (3e-3 gained nothing on the selecting
# halves of Anki and Multi30k, docs/benchmarks.md), a warm-up and a decay that ends with
# the budget, light dropout (see the comment at its value), a sampled softmax over
# 4,096 words (1.61x target tokens/s on Anki, docs/training.md), label smoothing 0.1
# (+0.9 BLEU on Anki's reported half in 30 minutes and +1.8 on Multi30k's in 15, two runs
# each, at the same cost a step), the average of the last 3 checkpoints,
# and weights drawn from U(-0.1, 0.1) (with Adam, 4.2 BLEU above the paper's N(0, 0.01^2)
# in 15 minutes on Anki). Its BLEU against the default and each component's share are
# measured in docs/benchmarks.md.
# "builtin": the built-in corpus's default (train_options.TrainOptions.for_new_run), the
# budget recipe's warm-up and decay, initialisation and averaging on the compact size's
# Adam: with a constant rate the development NLL swung by tens of nats between
# evaluations and the held-out BLEU by several points from run to run (benchmarks.md).
# No dropout and no sampled softmax: the corpus is not small for the compact model, and
# its vocabulary is smaller than 4,096 words. "paper": Appendix B's training, the
# Config defaults (Adadelta, minibatches of 80, a constant rate, N(0, 0.01^2) weights).
RECIPES: dict[str, dict[str, Any]] = {
    "builtin": {
        "lr_schedule": "budget",
        "warmup_steps": 200,
        "final_lr_fraction": 0.1,
        "average_checkpoints": 3,
        "init": "uniform",
    },
    "paper": {
        field.name: field.default for field in dataclasses.fields(Config) if field.name in (
            "optimizer", "learning_rate", "rho", "epsilon", "batch_size", "lr_schedule",
            "warmup_steps", "dropout", "sampled_softmax", "label_smoothing",
            "average_checkpoints", "init", "vocab_min_count")
    },
    "budget": {
        "optimizer": "adam",
        "learning_rate": 2e-3,
        "batch_size": 64,
        "lr_schedule": "budget",
        "warmup_steps": 200,
        "final_lr_fraction": 0.1,
        # 0.1, not 0.2: +1.2 BLEU on Anki (4 epochs in 30 minutes), level on Multi30k
        # (8 in 15), two runs each (docs/experiments.md, "Less dropout").
        "dropout": 0.1,
        "sampled_softmax": 4096,
        "label_smoothing": 0.1,
        "average_checkpoints": 3,
        "init": "uniform",
        # Words seen once or twice read as <unk>, filled by the run's dictionary: two
        # runs each on Anki and Multi30k (docs/experiments.md, "Rare words as <unk>").
        "vocab_min_count": 3,
    },
}


def budget_recipe_summary() -> str:
    """What --recipe budget sets, read from RECIPES so that the help cannot drift from it."""
    recipe = RECIPES["budget"]
    return (f"Adam {recipe['learning_rate']:g} at batch {recipe['batch_size']} with "
            f"{recipe['warmup_steps']} warm-up steps and a decay to "
            f"{recipe['final_lr_fraction']:g} x the rate at the end of "
            f"--max-minutes/--max-steps, dropout {recipe['dropout']:g}, label smoothing "
            f"{recipe['label_smoothing']:g}, sampled softmax over "
            f"{recipe['sampled_softmax']:,} words, average of the last "
            f"{recipe['average_checkpoints']} checkpoints, weights drawn from U(-0.1, 0.1), "
            f"words seen fewer than {recipe['vocab_min_count']} times read as <unk>")


# Presets (train.py --preset NAME): a size and a recipe together, the settings behind a
# published result one flag away. "budget": the medium size and the budget recipe, as
# in the Anki (30 minutes, BLEU 43.96-44.31 on the reported half) and Multi30k (15
# minutes, 57.92-57.99) results of docs/benchmarks.md; the time budget stays the user's
# (--max-minutes).
PRESETS: dict[str, dict[str, str]] = {
    "budget": {"size": "medium", "recipe": "budget"},
}


def variant_config(name: str, overrides: Mapping[str, Any] | None = None) -> Config:
    """The configuration of a named variant, with optional field overrides."""
    if name not in VARIANTS:
        raise ConfigError(f"unknown variant {name!r}; choose one of: {', '.join(VARIANTS)}")
    values: dict[str, Any] = {"variant": name, **VARIANTS[name]}
    values.update(overrides or {})
    return Config.from_dict(values)


def check_optimizer_fields(config: Config, given: Iterable[str]) -> None:
    """Refuse ``given`` fields (those the user set) that ``config``'s optimizer does not
    read: an ``--set rho=...`` with Adam would otherwise change nothing. Defaults never
    trigger it, nor do recipes, which are checked for consistency by the tests: a recipe's
    value is not the user's to remove when the user picks another optimizer."""
    ignored = sorted(name for name in given
                     if config.optimizer not in OPTIMIZER_FIELDS.get(name, OPTIMIZERS))
    if ignored:
        users = " and ".join(sorted({o for name in ignored for o in OPTIMIZER_FIELDS[name]}))
        raise ConfigError(
            f"--set {', '.join(ignored)}: only the {users} optimizer reads "
            f"{'it' if len(ignored) == 1 else 'them'}, and this run uses {config.optimizer} "
            f"(--set optimizer=... to change it)"
        )


def check_attention(option: str, configs: Iterable[Config]) -> None:
    """Refuse ``option``, which reads the attention weights, when none of the models it
    would apply to (``configs``) has attention: RNNencdec has none, and the option would
    change nothing."""
    configs = list(configs)
    if not any(config.uses_attention for config in configs):
        variants = ", ".join(sorted({config.variant for config in configs}))
        raise ConfigError(f"{option} reads the attention weights, and an RNNencdec model "
                          f"({variants}) has none")


def _field_types() -> dict[str, Any]:
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def parse_value(name: str, text: str) -> Any:
    """Convert the text of a ``--set name=value`` into the field's type."""
    types = _field_types()
    if name not in types:
        raise ConfigError(f"unknown --set key {name!r}; known keys: {', '.join(sorted(types))}")
    kind = types[name]
    try:
        if kind is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        return str(text)
    except ValueError:
        raise ConfigError(
            f"--set {name}={text}: expected a value of type {kind.__name__}"
        ) from None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into typed field overrides."""
    overrides: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        key = key.strip()
        overrides[key] = parse_value(key, text)
    return overrides
