"""Do the export paths translate like the Keras model? Shared by the export command's
self-check, the tests and ``bench/export_paths.py``.

Every path is reduced to one :class:`Decoded` per sentence (best hypothesis: its target
tokens, or only its text for the string signatures, and its score) and compared with
:class:`~keras_nmt.translator.Translator`'s output on the same sentences.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import numpy as np

from keras_nmt.tokenizer import Vocabulary

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
) -> list[Decoded]:
    """Decode source ids (EOS appended, as Translator.encode gives them) through a
    ``translate_ids`` path, ``batch_size`` sentences at a time."""
    decoded: list[Decoded] = []
    for start in range(0, len(source_ids), batch_size):
        out = run({
            "source_ids": pad_batch(source_ids[start : start + batch_size]),
            "beam_size": np.array(beam_size, np.int32),
            "alpha": np.array(alpha, np.float32),
            "forbid_unk": np.array(False),
            "max_length": np.array(0, np.int32),
        })
        ids, lengths, scores = out["ids"], out["lengths"], out["scores"]
        for row in range(ids.shape[0]):
            tokens = tuple(target_vocab.decode(ids[row, 0, : int(lengths[row, 0])]))
            decoded.append(Decoded(None, tokens, float(scores[row, 0])))
    return decoded


def compare(reference: Sequence[Decoded], candidate: Sequence[Decoded]) -> dict:
    """Identical fraction (tokens when both sides have them, else text) and the largest
    score difference over the sentences where both are identical."""
    if len(reference) != len(candidate):
        raise ValueError(f"{len(candidate)} outputs for {len(reference)} sentences")
    same, differences, first_mismatch = 0, [0.0], None
    for i, (ref, cand) in enumerate(zip(reference, candidate)):
        if ref.tokens is not None and cand.tokens is not None:
            equal = ref.tokens == cand.tokens
        else:
            equal = ref.text == cand.text
        if equal:
            same += 1
            differences.append(abs(ref.score - cand.score))
        elif first_mismatch is None:
            first_mismatch = i
    return {
        "sentences": len(reference),
        "identical": same / len(reference) if reference else 1.0,
        "max_score_diff": max(differences),
        "first_mismatch": first_mismatch,
    }


def agrees(result: dict, tolerance: float = 1e-4) -> bool:
    return result["identical"] == 1.0 and result["max_score_diff"] <= tolerance
