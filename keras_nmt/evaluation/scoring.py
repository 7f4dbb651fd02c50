"""Scores: sacreBLEU BLEU and chrF, overall and by source length (Fig. 2's numbers), on all
sentences and on the paper's No-UNK subset; a run's report and its Table 2 row; a
training run's held-out report.

- **All**: every source line, decoded with the beam (UNK allowed), scored against the
  references with sacreBLEU (BLEU 13a, chrF).
- **No UNK** (the paper's "No UNK" column): the lines whose source tokens are all in the
  run's source vocabulary and whose reference tokens (target tokenizer) are all in its
  target vocabulary, decoded again with the UNK token forbidden.

Text is tokenized with the run's own codecs (``translator.source_codec`` /
``target_codec``): words for ``word`` runs, pieces for SentencePiece runs, in the No-UNK
test and the source lengths of BLEU by length.
"""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any, Callable, Mapping, Sequence

import sacrebleu

from keras_nmt.core.constants import UNK_ID
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.core.errors import EvaluationError
from keras_nmt.evaluation import alignment
from keras_nmt.evaluation.alignment import GoldAlignment
from keras_nmt.core.progress import Phase, Progress
from keras_nmt.rundir.run_directory import RunDir


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
) -> tuple[float | None, int]:
    """BLEU of the sentences whose source is longer than ``limit`` tokens, and their
    number; None when there is none (short-sentence corpora such as Anki)."""
    chosen = [i for i, n in enumerate(source_lengths) if n > limit]
    if not chosen:
        return None, 0
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


# ---------------------------------------------------------------------------- a model's scores

TABLE2_FIELDS = ("updates", "epochs", "wall_hours", "train_nll", "dev_nll")


def no_unk_indices(
    sources: Sequence[str], references: Sequence[str], source_codec, target_codec,
) -> list[int]:
    """Indices of the sentences with no unknown token: ``source_codec`` encodes the source
    and ``target_codec`` the reference without UNK (:mod:`keras_nmt.text` codecs: every
    word in the shortlist, or every character known to the SentencePiece model). A
    literal "<unk>" in word-tokenized text counts as unknown."""
    chosen = []
    for i, (source, reference) in enumerate(zip(sources, references)):
        if UNK_ID in source_codec.encode(source) or UNK_ID in target_codec.encode(reference):
            continue
        chosen.append(i)
    return chosen


def read_parallel(src: str | os.PathLike, ref: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Both files, checked: present, UTF-8, same number of lines, not empty."""
    src, ref = pathlib.Path(src), pathlib.Path(ref)
    for flag, path in (("--src", src), ("--ref", ref)):
        if not path.is_file():
            raise EvaluationError(f"{flag} file not found: {path}")
    try:
        sources, references = ParallelFiles(src, ref).sides()
    except OSError as error:
        raise EvaluationError(f"cannot read {error.filename}: {error.strerror}") from None
    if not sources:
        raise EvaluationError(f"--src {src} holds no sentences")
    return sources, references


def _counter(progress: Progress | None, text: str, total: int) -> Callable[[int], None] | None:
    return None if progress is None else Phase(progress, text, total, "sentences").advance


def evaluate_run(
    translator, sources: Sequence[str], references: Sequence[str],
    beam_size: int = 5, alpha: float = 1.0, *, batch_size: int = 32,
    gold: Sequence[GoldAlignment] | None = None, keep_attention: Sequence[int] = (),
    progress: Progress | None = None, label: str = "", shortlist: tuple[int, int] | None = None,
    split_sentences: bool = True, unk_replace: bool | None = None,
    dictionary: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Score one translator on (sources, references), decoding over the whole vocabulary
    or, with ``shortlist`` = (F, B), with vocabulary selection (Translator.translate).
    ``split_sentences``: a source line of several sentences is translated sentence by
    sentence (Translator.translate's option); the scores are per line in any case.
    ``unk_replace``, ``dictionary``: each written ``<unk>`` is replaced (Translator.translate's
    options; None: the translator's own) in the scored translations; the No-UNK subset
    forbids ``<unk>`` as before.

    Returns a JSON-ready dict: sentences, beam_size, alpha, bleu, chrf (All), signatures,
    no_unk {sentences, bleu, chrf}, bleu_by_length (Fig. 2 rows), aer (None without
    ``gold``), decode_seconds; plus ``details`` (not JSON-ready): hypotheses, no_unk_indices,
    the Translations of ``keep_attention`` with their attention, predicted alignments.
    """
    if len(sources) != len(references):
        raise EvaluationError(f"{len(sources)} sources for {len(references)} references")
    keep = sorted(set(keep_attention))
    unk_replace = translator.unk_replace if unk_replace is None else bool(unk_replace)
    prefix = f"{label}: " if label else ""
    start = time.monotonic()
    translations = translator.translate(
        sources, beam_size=beam_size, alpha=alpha, forbid_unk=False, batch_size=batch_size,
        with_attention=bool(keep), progress=_counter(progress, f"{prefix}translating", len(sources)),
        shortlist=shortlist, split_sentences=split_sentences, unk_replace=unk_replace,
        dictionary=dictionary,
    )
    hypotheses = [t.text for t in translations]
    subset = no_unk_indices(sources, references, translator.source_codec, translator.target_codec)
    subset_translations = translator.translate(
        [sources[i] for i in subset], beam_size=beam_size, alpha=alpha, forbid_unk=True,
        batch_size=batch_size, shortlist=shortlist, split_sentences=split_sentences,
        progress=_counter(progress, f"{prefix}translating the No-UNK subset (UNK forbidden)", len(subset)),
    )
    seconds = time.monotonic() - start
    all_scores = corpus_scores(hypotheses, references)
    subset_scores = corpus_scores(
        [t.text for t in subset_translations], [references[i] for i in subset]
    )
    # Lengths in the run's tokens, before any truncation (Translator.max_source_len).
    lengths = [len(translator.source_codec.tokenize(line)) for line in sources]
    result: dict[str, Any] = {
        "sentences": len(sources),
        "beam_size": int(beam_size),
        "alpha": float(alpha),
        "shortlist": list(shortlist) if shortlist else None,
        "unk_replace": bool(unk_replace),
        "bleu": all_scores["bleu"],
        "chrf": all_scores["chrf"],
        "signatures": {"bleu": all_scores["bleu_signature"], "chrf": all_scores["chrf_signature"]},
        "no_unk": {
            "sentences": len(subset),
            "bleu": subset_scores["bleu"],
            "chrf": subset_scores["chrf"],
            "forbid_unk": True,
        },
        "bleu_by_length": bleu_by_length(hypotheses, references, lengths) if sources else [],
        "aer": None,
        "truncated_sentences": sum(t.truncated_sentences for t in translations),
        "decode_seconds": seconds,
    }
    predicted = None
    if gold is not None:
        result["aer"], predicted = alignment.alignment_report(
            translator, sources, references, gold, batch_size,
            _counter(progress, f"{prefix}force-decoding the references for AER", len(sources)),
        )
    if progress is not None:
        progress.close()
    result["details"] = {
        "hypotheses": hypotheses,
        "no_unk_indices": subset,
        "translations": {i: translations[i] for i in keep},
        "predicted_alignments": predicted,
    }
    return result



def held_out_report(
    translator, files: ParallelFiles, beam_size: int, alpha: float, *, quiet: bool = False,
    progress: Progress | None = None, unk_replace: bool | None = None,
    dictionary: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A training run's held-out scores (summary.json's "held_out"): ``files`` translated
    once with the beam (each ``<unk>`` replaced through ``dictionary`` with
    ``unk_replace``; None: the translator's own), sacreBLEU overall, on the sentences
    longer than 30 tokens and by length, in the source tokens the model read."""
    sources, references = files.sides()
    unk_replace = translator.unk_replace if unk_replace is None else bool(unk_replace)
    progress = progress or Progress(log_seconds=30.0, enabled=not quiet)
    phase = Phase(progress, f"translating {files.source.name}", total=len(sources),
                  unit="sentences")
    translations = translator.translate(sources, beam_size=beam_size, alpha=alpha,
                                        progress=phase.advance, unk_replace=unk_replace,
                                        dictionary=dictionary)
    seconds = phase.finish()
    hypotheses = [t.text for t in translations]
    lengths = [len(t.source_tokens) for t in translations]
    score, signature = bleu(hypotheses, references)
    long_bleu, long_count = bleu_longer_than(hypotheses, references, lengths, 30)
    return {
        "split": files.source.stem,
        "sentences": len(sources),
        "beam_size": beam_size,
        "unk_replace": unk_replace,
        "bleu": score,
        "bleu_signature": signature,
        "bleu_longer_than_30": long_bleu,
        "sentences_longer_than_30": long_count,
        "bleu_by_length": bleu_by_length(hypotheses, references, lengths),
        "decode_seconds": seconds,
    }

def run_summary(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The Table 2 columns of a run's summary.json (None when it has none)."""
    summary = RunDir(run_dir).load_summary()
    if summary is None:
        return None
    return {key: summary.get(key) for key in ("variant", "architecture", *TABLE2_FIELDS)}


def table2_row(label: str, result: dict[str, Any], summary: dict[str, Any] | None) -> dict[str, Any]:
    summary = summary or {}
    return {
        "model": label,
        **{key: summary.get(key) for key in TABLE2_FIELDS},
        "bleu_all": result["bleu"],
        "bleu_no_unk": result["no_unk"]["bleu"],
        "no_unk_sentences": result["no_unk"]["sentences"],
        "aer": (result.get("aer") or {}).get("aer"),
    }


def run_labels(run_dirs: Sequence[str | os.PathLike], variants: Sequence[str | None]) -> list[str]:
    """One label per run: the directory name, prefixed with the variant when the name does
    not contain it; repeated labels get ' #2', ' #3'."""
    labels = []
    for path, variant in zip(run_dirs, variants):
        name = pathlib.Path(path).resolve().name
        labels.append(name if not variant or variant in name else f"{variant} ({name})")
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return unique


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_report(result: dict[str, Any]) -> str:
    """A run's scores as a small plain-text table."""
    label = result.get("label") or result.get("run_dir") or "model"
    where = result.get("run_dir") or " + ".join(result.get("run_dirs") or [])
    lines = [
        f"== {label}: {where}",
        f"   beam {result['beam_size']}, alpha {result['alpha']:g}",
        f"   {'':<8} {'sentences':>9} {'BLEU':>7} {'chrF':>7}",
        f"   {'All':<8} {result['sentences']:>9} {_number(result['bleu']):>7} {_number(result['chrf']):>7}",
        f"   {'No UNK':<8} {result['no_unk']['sentences']:>9} {_number(result['no_unk']['bleu']):>7} "
        f"{_number(result['no_unk']['chrf']):>7}   (UNK forbidden in decoding)",
    ]
    if result.get("truncated_sentences"):
        lines.append(f"   {result['truncated_sentences']} sentences were truncated (Translator.max_source_len)")
    if result["bleu_by_length"]:
        from keras_nmt.evaluation.plots import bin_label

        cells = ", ".join(
            f"{bin_label(row)}: {row['bleu']:.2f} ({row['sentences']})" for row in result["bleu_by_length"]
        )
        lines.append(f"   BLEU by source length (sentences): {cells}")
    aer = result.get("aer")
    if aer is not None:
        lines.append(
            f"   AER {aer['aer']:.3f} on {aer['sentences']} sentences ({aer['correct_sure_links']} of "
            f"{aer['predicted_links']} predicted links correct, {aer['sure_links']} gold links)"
        )
    lines.append(f"   BLEU signature: {result['signatures']['bleu']}")
    lines.append(f"   chrF signature: {result['signatures']['chrf']}")
    return "\n".join(lines)


def public(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without its ``details`` (what goes into JSON)."""
    return {k: v for k, v in result.items() if k != "details"}
