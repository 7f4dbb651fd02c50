"""Do the export paths translate like the Keras model? Shared by the export command's
self-check, the tests and ``bench/export_paths.py``.

Every path is reduced to one :class:`Decoded` per sentence (best hypothesis: its target
tokens, or only its text for the string signatures, and its score) and compared with
:class:`~keras_nmt.decoding.keras_translator.Translator`'s output on the same sentences.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import numpy as np

from keras_nmt.decoding.constraints import padded_arrays
from keras_nmt.decoding.translation import batches_apart
from keras_nmt.text.vocab import Vocabulary

# A model path run on a feed dict (input name -> array), returning output name -> array:
# TF2Model.run / SessionModel.run bound to a signature, or an onnxruntime session.
RunFn = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Decoded:
    text: str | None  # detokenized (None for an ids path)
    tokens: tuple[str, ...] | None  # target tokens (None for a string path)
    score: float


def from_translations(translations) -> list[Decoded]:
    return [Decoded(t.text, tuple(t.tokens), float(t.score)) for t in translations]


def from_string_outputs(outputs: Mapping[str, np.ndarray]) -> list[Decoded]:
    texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in outputs["translations"]]
    return [Decoded(text, None, float(s)) for text, s in zip(texts, outputs["scores"])]


def pad_batch(rows: Sequence[Sequence[int]]) -> np.ndarray:
    width = max((len(row) for row in rows), default=1)
    batch = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch


def run_ids(
    run: RunFn,
    source_ids: Sequence[Sequence[int]],
    target_vocab: Vocabulary,
    beam_size: int,
    alpha: float,
    batch_size: int = 32,
    shortlist: tuple[int, int] | None = None,
    rare: np.ndarray | None = None,
    constraints: Sequence | None = None,
) -> list[Decoded]:
    """Decode source ids (EOS appended, as Translator.encode gives them) through a
    ``translate_ids`` path, ``batch_size`` sentences at a time, in order; ``shortlist``
    feeds the selection inputs of an export that has them. With ``rare`` (bool [source
    vocabulary], :meth:`keras_nmt.lexicon.table.Lexicon.rare_sources`) the sentences holding a
    marked id are batched apart, after the others, as the translators batch them.
    ``constraints``: each sentence's :class:`~keras_nmt.decoding.constraints.SentenceConstraints`
    (or None), fed to a ``translate_ids_constrained`` path; constrained sentences are
    batched apart from the others, as the translators batch them."""
    extra = {} if shortlist is None else {
        "shortlist_frequent": np.array(shortlist[0], np.int32),
        "shortlist_best": np.array(shortlist[1], np.int32),
    }
    marked = None if rare is None else np.asarray(rare)

    def apart(i: int) -> tuple[bool, bool]:
        return (bool(constraints[i]) if constraints is not None else False,
                bool(marked[np.asarray(source_ids[i], np.int64)].any())
                if marked is not None else False)

    decoded: list[Decoded | None] = [None] * len(source_ids)
    for chosen in batches_apart(range(len(source_ids)), range(len(source_ids)), batch_size,
                                apart):
        if constraints is not None:
            names = ("include_ids", "avoid_ids", "prefix_ids")
            extra = {**extra, **dict(zip(names, padded_arrays(
                [constraints[i] for i in chosen])))}
        out = run({
            "source_ids": pad_batch([source_ids[i] for i in chosen]),
            "beam_size": np.array(beam_size, np.int32),
            "alpha": np.array(alpha, np.float32),
            "forbid_unk": np.array(False),
            "max_length": np.array(0, np.int32),
            **extra,
        })
        ids, lengths, scores = out["ids"], out["lengths"], out["scores"]
        chosen = list(chosen)
        for row, i in enumerate(chosen):
            tokens = tuple(target_vocab.decode(ids[row, 0, : int(lengths[row, 0])]))
            decoded[i] = Decoded(None, tokens, float(scores[row, 0]))
    return decoded  # type: ignore[return-value]


def compare(
    reference: Sequence[Decoded], candidate: Sequence[Decoded], tie_tolerance: float = 1e-5
) -> dict:
    """How often a path gives the reference's output.

    ``identical``: fraction of sentences with the same tokens (text when a side has no
    tokens); ``max_score_diff``: largest score difference over those. ``ties``: fraction
    of the others whose score is the reference's within ``tie_tolerance`` -- another
    hypothesis exactly as good, picked because two runtimes round a float differently
    (a barely trained model that repeats one token has many: with alpha = 1, "." "." EOS
    and "." "." "." EOS score the same)."""
    if len(reference) != len(candidate):
        raise ValueError(f"{len(candidate)} outputs for {len(reference)} sentences")
    same, ties, differences, first_mismatch = 0, 0, [0.0], None
    for i, (ref, cand) in enumerate(zip(reference, candidate)):
        if ref.tokens is not None and cand.tokens is not None:
            equal = ref.tokens == cand.tokens
        else:
            equal = ref.text == cand.text
        if equal:
            same += 1
            differences.append(abs(ref.score - cand.score))
        else:
            ties += abs(ref.score - cand.score) <= tie_tolerance
            if first_mismatch is None:
                first_mismatch = i
    count = max(len(reference), 1)
    return {
        "sentences": len(reference),
        "identical": same / count if reference else 1.0,
        "ties": ties / count,
        "max_score_diff": max(differences),
        "first_mismatch": first_mismatch,
    }


def agrees(result: dict, tolerance: float = 1e-4, allow_ties: bool = False) -> bool:
    """Every sentence identical (or, with ``allow_ties``, an equally scored alternative)
    and scores within ``tolerance``."""
    matched = result["identical"] + (result["ties"] if allow_ties else 0.0)
    return abs(matched - 1.0) < 1e-9 and result["max_score_diff"] <= tolerance


def compare_forced(reference: Sequence, candidate: Sequence) -> dict:
    """How far a force-decoding path (:class:`~keras_nmt.evaluation.forced.ForcedPair`
    lists: the ONNX model's against :func:`~keras_nmt.evaluation.forced.force_decode`'s)
    is from the reference: ``same_tokens`` (both sides' tokens and the unknown counts of
    every pair), the largest differences of a token's log-probability and of an attention
    weight (attention compared where both paths give it; ``attention`` says whether they
    do)."""
    if len(reference) != len(candidate):
        raise ValueError(f"{len(candidate)} outputs for {len(reference)} pairs")
    same, logprob_diff, attention_diff, attention = True, 0.0, 0.0, True
    for ref, cand in zip(reference, candidate):
        same &= (ref.source_tokens, ref.target_tokens, ref.unknown) == (
            cand.source_tokens, cand.target_tokens, cand.unknown)
        if ref.token_logprobs.shape != cand.token_logprobs.shape:
            same = False
            continue
        logprob_diff = max(logprob_diff, float(np.max(
            np.abs(ref.token_logprobs - cand.token_logprobs), initial=0.0)))
        attention &= ref.attention is not None and cand.attention is not None
        if attention:
            if ref.attention.shape != cand.attention.shape:
                same = False
                continue
            attention_diff = max(attention_diff, float(np.max(
                np.abs(ref.attention - cand.attention), initial=0.0)))
    return {"pairs": len(reference), "same_tokens": same, "attention": attention,
            "max_logprob_diff": logprob_diff, "max_attention_diff": attention_diff}


def agrees_forced(result: dict, logprob_tolerance: float = 1e-4,
                  attention_tolerance: float = 1e-5) -> bool:
    """:func:`compare_forced` within float32 rounding: the same tokens, each token's
    log-probability within ``logprob_tolerance`` and each weight within
    ``attention_tolerance``."""
    return (result["same_tokens"] and result["max_logprob_diff"] <= logprob_tolerance
            and result["max_attention_diff"] <= attention_tolerance)
