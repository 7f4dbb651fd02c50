"""Corpus-level scores with sacreBLEU, overall and by source sentence length."""

from __future__ import annotations

from typing import Sequence

import sacrebleu


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """sacreBLEU BLEU (13a tokenization, cased) on detokenized text, and its signature."""
    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


def bleu_by_length(
    hypotheses: Sequence[str],
    references: Sequence[str],
    source_lengths: Sequence[int],
    edges: Sequence[int] = (10, 20, 30, 40, 50, 60, 70),
) -> list[dict]:
    """BLEU of the sentences in each source-length bin: the paper's Fig. 2, as numbers.

    Bins are (previous edge, edge]; the last bin holds everything longer.
    """
    bounds = [0, *edges, None]
    rows = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        chosen = [
            i for i, n in enumerate(source_lengths) if n > low and (high is None or n <= high)
        ]
        if not chosen:
            continue
        score, _ = bleu([hypotheses[i] for i in chosen], [references[i] for i in chosen])
        rows.append({"min_len": low + 1, "max_len": high, "sentences": len(chosen), "bleu": score})
    return rows


def bleu_longer_than(
    hypotheses: Sequence[str], references: Sequence[str], source_lengths: Sequence[int], limit: int
) -> tuple[float, int]:
    chosen = [i for i, n in enumerate(source_lengths) if n > limit]
    if not chosen:
        return float("nan"), 0
    score, _ = bleu([hypotheses[i] for i in chosen], [references[i] for i in chosen])
    return score, len(chosen)


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """BLEU and chrF of one set of sentences with both signatures; None scores when the
    set is empty (sacreBLEU has nothing to score)."""
    if not hypotheses:
        return {"sentences": 0, "bleu": None, "chrf": None, "bleu_signature": None, "chrf_signature": None}
    bleu_score, bleu_signature = bleu(hypotheses, references)
    chrf_score, chrf_signature = chrf(hypotheses, references)
    return {
        "sentences": len(hypotheses),
        "bleu": bleu_score,
        "chrf": chrf_score,
        "bleu_signature": bleu_signature,
        "chrf_signature": chrf_signature,
    }
