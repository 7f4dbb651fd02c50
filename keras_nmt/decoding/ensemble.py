"""Ensembles of translation models, and the checks that say which run directories combine.

:class:`Ensemble` wraps several models that share their vocabularies behind the interface
that :func:`keras_nmt.search.beam_search` drives (``encode``, ``step``, ``config``). At
every step it averages the members' next-word *probabilities*::

    log p(y) = log( (1/M) * sum_m p_m(y) ) = logsumexp_m(log_softmax(logits_m)) - log M

and hands these normalised log-probabilities to the search as its logits (a log-softmax
of them changes nothing). The attention weights it reports are the members' mean. The
decoder state and the memory are tuples of the members' own, so the search tiles and
reorders them with ``tf.nest`` like a single model's.

:func:`check_compatible` says whether inspected run directories
(:meth:`keras_nmt.rundir.run_directory.RunDir.inspect`) combine; it reads no weights and imports no
TensorFlow, so ``keras-nmt translate`` fails at once on runs that do not ensemble. For
the same reason TensorFlow is imported inside the methods of :class:`Ensemble`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from keras_nmt.core.config import Config
from keras_nmt.core.errors import EnsembleError
from keras_nmt.rundir.run_directory import RunFiles


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for line, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return f"line {line}: {x!r} against {y!r}"
    return f"{len(a)} against {len(b)} tokens"


def check_compatible(runs: Sequence[RunFiles]) -> None:
    """Raise :class:`EnsembleError` unless all runs translate the same language pair
    with identical source and target vocabularies (token for token) and the same
    vocabulary sizes in their configurations."""
    if not runs:
        raise EnsembleError("an ensemble needs at least one run directory")
    first = runs[0]
    for other in runs[1:]:
        names = f"{first.run.path} and {other.run.path}"
        if (first.src, first.tgt) != (other.src, other.tgt):
            raise EnsembleError(
                f"cannot ensemble {names}: they translate {first.src}->{first.tgt} "
                f"and {other.src}->{other.tgt}"
            )
        for side, lang, mine, theirs in (
            ("source", first.src, first.source_vocab, other.source_vocab),
            ("target", first.tgt, first.target_vocab, other.target_vocab),
        ):
            if mine.tokens != theirs.tokens:
                raise EnsembleError(
                    f"cannot ensemble {names}: their {side} vocabularies (vocab.{lang}.txt) "
                    f"differ ({_first_difference(mine.tokens, theirs.tokens)})"
                )
        for field in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(first.config, field) != getattr(other.config, field):
                raise EnsembleError(
                    f"cannot ensemble {names}: their configurations differ in {field} "
                    f"({getattr(first.config, field)} against {getattr(other.config, field)})"
                )


class Ensemble:
    """Several models decoded as one: the mean of their next-word distributions.

    ``config`` is the first member's, with ``max_len`` the largest of the members' (it
    only sets the default maximum source length of a Translator). ``encode`` returns a
    tuple of the members' states and a tuple of their memory dicts; ``step`` returns
    (log of the mean probability [B, V], tuple of new states, mean attention [B, Tx]);
    ``forced`` the same for every position of a given target at once.
    An RNNencdec member has no attention (zeros), which the mean then dilutes.
    """

    def __init__(self, models: Sequence[Any]):
        models = tuple(models)
        if not models:
            raise EnsembleError("an ensemble needs at least one model")
        sizes = {int(m.config.tgt_vocab_size) for m in models}
        if len(sizes) > 1:
            raise EnsembleError(
                f"cannot ensemble models with different target vocabulary sizes {sorted(sizes)}"
            )
        self.models = models
        self.config: Config = models[0].config.replace(
            max_len=max(int(m.config.max_len) for m in models)
        )

    def __len__(self) -> int:
        return len(self.models)

    def encode(self, source_ids, training=False):
        states, memories = [], []
        for model in self.models:
            state, memory = model.encode(source_ids, training=training)
            states.append(state)
            memories.append(memory)
        return tuple(states), tuple(memories)

    def output_projection(self, columns, count):
        return tuple(model.output_projection(columns, count) for model in self.models)

    def step(self, previous_ids, state, memory, projection=None):
        outputs, new_states = [], []
        projections = projection if projection is not None else (None,) * len(self.models)
        for model, member_state, member_memory, member_projection in zip(
            self.models, state, memory, projections
        ):
            logits, new_state, attention = model.step(
                previous_ids, member_state, member_memory, member_projection
            )
            outputs.append((logits, attention))
            new_states.append(new_state)
        mixed, attention = _mix(outputs)
        return mixed, tuple(new_states), attention

    def forced(self, source_ids, target_in, training=False):
        """Teacher forcing: (log of the mean probability [B, T, V], mean attention
        [B, T, Tx]), what :meth:`step` gives at each position of a given target. Each
        member reads the same target, so the members' forced outputs mix as their steps
        do."""
        return _mix([model.forced(source_ids, target_in, training=training)
                     for model in self.models])


def _mix(outputs):
    """The members' (logits, attention) -> (log of their mean probability, mean attention),
    over the last axis of the logits, in float32."""
    import tensorflow as tf  # see the module docstring

    log_probs = [tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1) for logits, _ in outputs]
    count = len(outputs)
    mixed = tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - math.log(count)
    attention = tf.add_n([tf.cast(weights, tf.float32) for _, weights in outputs]) / float(count)
    return mixed, attention
