"""The paper's evaluation: BLEU / chrF on all sentences and on the No-UNK subset, BLEU by
sentence length (Fig. 2), attention heat maps (Fig. 3), Table 2 and alignment error rate.

    python -m keras_nmt.evaluate RUN_DIR [RUN_DIR ...] --src test.en --ref test.fr
        [--beam K] [--alpha A] [--plots DIR] [--json] [--align FILE]
        [--heatmaps N | --sentences I,J,K] [--batch-size B] [--ensemble]

The logic is importable without the command line: :func:`evaluate_run` scores one
:class:`~keras_nmt.translator.Translator` and returns a dict, :func:`write_plots` turns
a list of such dicts into the figures.

Definitions:

- **All**: every line of --src, decoded with the beam (UNK allowed), scored against
  --ref with sacreBLEU (BLEU 13a, chrF).
- **No UNK** (the paper's "No UNK" column): the lines whose source tokens are all in the
  run's source vocabulary and whose reference tokens (target tokenizer) are all in its
  target vocabulary, decoded again with the UNK token forbidden.
- **AER**: the reference is force-decoded (teacher forcing); each reference token is
  linked to the source token with the highest attention weight (EOS row and column left
  out), and the links are scored against the gold alignment:
  AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), summed over sentences.

Text is tokenized with the run's own codecs (:func:`keras_nmt.codec.run_codecs`, as
``translator.source_codec`` / ``target_codec``): words for ``word`` runs, pieces for
SentencePiece runs, in the No-UNK test, the force-decoding and the source lengths of
BLEU by length (pieces for SentencePiece runs). Gold alignments link words of
:func:`keras_nmt.tokenizer.tokenize`: for a SentencePiece run, each piece link is mapped
to the words holding the two pieces (:func:`token_words`) before scoring.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import os
import pathlib
import sys
import time
import unicodedata
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from keras_nmt.arguments import OneLineParser, positive_int, non_negative_int
from keras_nmt import alignment, codec, scoring, tokenizer
from keras_nmt.alignment import AlignmentError, GoldAlignment
from keras_nmt.config import ConfigError
from keras_nmt.corpus.readers import CorpusError, ParallelFiles
from keras_nmt.ensemble import EnsembleError, check_compatible, inspect_run_dir
from keras_nmt.progress import Progress
from keras_nmt.rundir import RunDir, RunDirError
from keras_nmt.tokenizer import BOS_ID, EOS_ID, UNK_ID, VocabularyError

PROG = "python -m keras_nmt.evaluate"
# Fig. 3 sentences chosen by default: the first ones with this many source tokens.
HEATMAP_MIN_TOKENS, HEATMAP_MAX_TOKENS = 8, 30
TABLE2_FIELDS = ("updates", "epochs", "wall_hours", "train_nll", "dev_nll")


class EvaluationError(ValueError):
    """Bad input to the evaluation; the message is for the user."""


USER_ERRORS: tuple[type[Exception], ...] = (
    EvaluationError, AlignmentError, ConfigError, CorpusError, RunDirError, VocabularyError,
    EnsembleError,
)


# ---------------------------------------------------------------------------- subsets

def no_unk_indices(
    sources: Sequence[str], references: Sequence[str], source_codec, target_codec,
) -> list[int]:
    """Indices of the sentences with no unknown token: ``source_codec`` encodes the source
    and ``target_codec`` the reference without UNK (:mod:`keras_nmt.codec` objects: every
    word in the shortlist, or every character known to the SentencePiece model). A
    literal "<unk>" in word-tokenized text counts as unknown."""
    chosen = []
    for i, (source, reference) in enumerate(zip(sources, references)):
        if UNK_ID in source_codec.encode(source) or UNK_ID in target_codec.encode(reference):
            continue
        chosen.append(i)
    return chosen


def token_words(tokens: Sequence[str], words: Sequence[str]) -> list[int]:
    """For each of a run's tokens of a sentence, the index of the word (of
    :func:`keras_nmt.tokenizer.tokenize`, the gold alignments' tokens) it lies in.

    Tokens and words are placed by their first character in the sentence with spaces
    and SentencePiece's word-start mark removed, words NFKC-normalised as SentencePiece's
    default normaliser does ("…" is "..." to it). Should the two texts still differ in
    length, positions are scaled from one to the other."""
    if list(tokens) == list(words):
        return list(range(len(words)))
    pieces = [t.replace("\u2581", "") for t in tokens]
    starts, position = [], 0
    for word in words:
        starts.append(position)
        position += len(unicodedata.normalize("NFKC", word))
    scale = position / max(1, sum(len(p) for p in pieces))
    index, position = [], 0
    for piece in pieces:
        where = position * scale
        index.append(max(0, bisect.bisect_right(starts, where) - 1))
        position += len(piece)
    return index


def word_links(links, source_words: Sequence[int], target_words: Sequence[int]) -> set[alignment.Link]:
    """Token links -> the links of the words holding the two tokens (see token_words)."""
    return {(source_words[i], target_words[j]) for i, j in links}


def choose_heatmap_sentences(
    source_lengths: Sequence[int], count: int,
    min_tokens: int = HEATMAP_MIN_TOKENS, max_tokens: int = HEATMAP_MAX_TOKENS,
) -> list[int]:
    """The first ``count`` sentences with ``min_tokens``..``max_tokens`` source tokens;
    if fewer qualify, the shortest other non-empty ones fill up (a small test set still
    gets its figures)."""
    fitting = [i for i, n in enumerate(source_lengths) if min_tokens <= n <= max_tokens]
    chosen = fitting[:count]
    if len(chosen) < count:
        others = sorted(
            (i for i, n in enumerate(source_lengths) if n > 0 and i not in set(fitting)),
            key=lambda i: (source_lengths[i], i),
        )
        chosen += others[: count - len(chosen)]
    return sorted(chosen)


# ---------------------------------------------------------------------------- alignment

_FORCED_FNS: "weakref.WeakKeyDictionary[Any, Callable]" = weakref.WeakKeyDictionary()


def _forced_attention_fn(model) -> Callable:
    """A compiled (source ids, decoder inputs) -> attention [B, T, Tx] for ``model``,
    traced once per model.

    An ensemble's attention is its members' mean (:mod:`keras_nmt.ensemble`); under
    teacher forcing each member's weights depend only on the reference, so the mean of
    the members' forced attention is the ensemble's."""
    import tensorflow as tf

    if model not in _FORCED_FNS:
        members = tuple(getattr(model, "models", None) or (model,))

        def mean_attention(source, target_in):
            weights = [tf.cast(m.forced(source, target_in)[1], tf.float32) for m in members]
            return tf.add_n(weights) / float(len(weights))

        _FORCED_FNS[model] = tf.function(
            mean_attention, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2
        )
    return _FORCED_FNS[model]


def forced_attention(
    translator, sources: Sequence[str], references: Sequence[str], batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
) -> list[np.ndarray | None]:
    """Teacher-force each reference through the model; per sentence the attention
    weights [reference tokens + EOS, source tokens + EOS] (None when a side is empty)."""
    import tensorflow as tf

    forced = _forced_attention_fn(translator.model)
    source_ids, target_ids = [], []
    for source, reference in zip(sources, references):
        source_tokens = translator.source_codec.encode(source)
        target_tokens = translator.target_codec.encode(reference)
        source_ids.append(source_tokens + [EOS_ID] if source_tokens else None)
        target_ids.append(target_tokens + [EOS_ID] if target_tokens else None)
    out: list[np.ndarray | None] = [None] * len(sources)
    todo = [i for i in range(len(sources)) if source_ids[i] and target_ids[i]]
    todo.sort(key=lambda i: (len(source_ids[i]), len(target_ids[i])))
    for start in range(0, len(todo), batch_size):
        chosen = todo[start : start + batch_size]
        source = np.zeros((len(chosen), max(len(source_ids[i]) for i in chosen)), np.int32)
        target_in = np.zeros((len(chosen), max(len(target_ids[i]) for i in chosen)), np.int32)
        for row, i in enumerate(chosen):
            source[row, : len(source_ids[i])] = source_ids[i]
            target_in[row, : len(target_ids[i])] = [BOS_ID] + target_ids[i][:-1]
        weights = forced(tf.constant(source), tf.constant(target_in)).numpy()
        for row, i in enumerate(chosen):
            out[i] = weights[row, : len(target_ids[i]), : len(source_ids[i])].copy()
        if progress is not None:
            progress(len(chosen))
    if progress is not None and len(todo) < len(sources):
        progress(len(sources) - len(todo))
    return out


def alignment_report(
    translator, sources: Sequence[str], references: Sequence[str], gold: Sequence[GoldAlignment],
    batch_size: int = 32, progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[set[alignment.Link]]]:
    """AER of the argmax attention of the force-decoded reference against ``gold``.
    Returns the report and the predicted links (one set per sentence)."""
    if len(gold) != len(sources):
        raise EvaluationError(f"{len(gold)} gold alignments for {len(sources)} sentences")
    attention = forced_attention(translator, sources, references, batch_size, progress)
    predicted: list[set[alignment.Link]] = []
    scored = []
    for i, weights in enumerate(attention):
        if weights is None:
            predicted.append(set())
            continue
        # Rows and columns beyond the tokens are the EOS ones.
        links = alignment.argmax_alignment(weights, weights.shape[1] - 1, weights.shape[0] - 1)
        if translator.source_codec.kind != codec.WORD or translator.target_codec.kind != codec.WORD:
            # Gold links join words: a piece link stands for the link of its two words.
            links = word_links(links, *(
                token_words(c.tokenize(line), tokenizer.tokenize(line, c.lang))
                for c, line in ((translator.source_codec, sources[i]),
                                (translator.target_codec, references[i]))
            ))
        predicted.append(links)
        scored.append(i)
    counts = alignment.corpus_aer([predicted[i] for i in scored], [gold[i] for i in scored])
    report = {
        "aer": counts.aer,
        "sentences": len(scored),
        "predicted_links": counts.predicted,
        "sure_links": counts.sure,
        "correct_sure_links": counts.predicted_sure,
        "correct_possible_links": counts.predicted_possible,
        "method": "argmax attention over source tokens, reference force-decoded, EOS excluded"
                  + ("" if translator.source_codec.kind == codec.WORD
                     else "; piece links mapped to the words holding them"),
    }
    return report, predicted


# ---------------------------------------------------------------------------- one run

def _counter(progress: Progress | None, text: str, total: int) -> Callable[[int], None] | None:
    if progress is None:
        return None
    done = [0]

    def advance(count: int) -> None:
        done[0] += count
        progress.update(f"{text}: {done[0]}/{total} sentences", force=done[0] >= total)

    return advance


def evaluate_run(
    translator, sources: Sequence[str], references: Sequence[str],
    beam_size: int = 5, alpha: float = 1.0, *, batch_size: int = 32,
    gold: Sequence[GoldAlignment] | None = None, keep_attention: Sequence[int] = (),
    progress: Progress | None = None, label: str = "",
) -> dict[str, Any]:
    """Score one translator on (sources, references).

    Returns a JSON-ready dict: sentences, beam_size, alpha, bleu, chrf (All), signatures,
    no_unk {sentences, bleu, chrf}, bleu_by_length (Fig. 2 rows), aer (None without
    ``gold``), decode_seconds; plus ``details`` (not JSON-ready): hypotheses, no_unk_indices,
    the Translations of ``keep_attention`` with their attention, predicted alignments.
    """
    if len(sources) != len(references):
        raise EvaluationError(f"{len(sources)} sources for {len(references)} references")
    keep = sorted(set(keep_attention))
    prefix = f"{label}: " if label else ""
    start = time.monotonic()
    translations = translator.translate(
        sources, beam_size=beam_size, alpha=alpha, forbid_unk=False, batch_size=batch_size,
        with_attention=bool(keep), progress=_counter(progress, f"{prefix}translating", len(sources)),
    )
    hypotheses = [t.text for t in translations]
    subset = no_unk_indices(sources, references, translator.source_codec, translator.target_codec)
    subset_translations = translator.translate(
        [sources[i] for i in subset], beam_size=beam_size, alpha=alpha, forbid_unk=True,
        batch_size=batch_size,
        progress=_counter(progress, f"{prefix}translating the No-UNK subset (UNK forbidden)", len(subset)),
    )
    seconds = time.monotonic() - start
    all_scores = scoring.corpus_scores(hypotheses, references)
    subset_scores = scoring.corpus_scores(
        [t.text for t in subset_translations], [references[i] for i in subset]
    )
    # Lengths in the run's tokens, before any truncation (Translator.max_source_len).
    lengths = [len(translator.source_codec.tokenize(line)) for line in sources]
    result: dict[str, Any] = {
        "sentences": len(sources),
        "beam_size": int(beam_size),
        "alpha": float(alpha),
        "bleu": all_scores["bleu"],
        "chrf": all_scores["chrf"],
        "signatures": {"bleu": all_scores["bleu_signature"], "chrf": all_scores["chrf_signature"]},
        "no_unk": {
            "sentences": len(subset),
            "bleu": subset_scores["bleu"],
            "chrf": subset_scores["chrf"],
            "forbid_unk": True,
        },
        "bleu_by_length": scoring.bleu_by_length(hypotheses, references, lengths) if sources else [],
        "aer": None,
        "truncated_sentences": sum(1 for t in translations if getattr(t, "truncated", 0)),
        "decode_seconds": seconds,
    }
    predicted = None
    if gold is not None:
        result["aer"], predicted = alignment_report(
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


def run_summary(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The Table 2 columns of a run's summary.json (None when it has none)."""
    path = RunDir(run_dir).summary_path
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise RunDirError(f"cannot read {path}: {error}") from None
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


# ---------------------------------------------------------------------------- output

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
        from keras_nmt.plots import bin_label

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


def write_plots(
    results: Sequence[dict[str, Any]], directory: str | os.PathLike, rows: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Fig. 2, Fig. 3 (for each run's kept attention), Table 2 and predicted alignments
    into ``directory``; returns the written paths (as strings)."""
    from keras_nmt import plots

    directory = pathlib.Path(directory)
    written: dict[str, Any] = {}
    curves = {r["label"]: r["bleu_by_length"] for r in results}
    fig2 = plots.bleu_by_length_figure(curves, directory)
    written["fig2"] = {k: str(v) for k, v in fig2.items()}
    written["table2"] = str(plots.write_table2(rows, directory / "table2.md"))
    written["fig3"] = []
    slugs = [plots.slug(r["label"]) for r in results]
    for result, name in zip(results, slugs):
        details = result.get("details") or {}
        for index, translation in sorted(details.get("translations", {}).items()):
            if translation.attention is None:
                continue
            files = plots.attention_figure(
                translation.source_tokens, translation.tokens, translation.attention,
                directory / f"fig3_{name}_line{index + 1}.png",
                title=f"{result['label']}, line {index + 1} (beam {result['beam_size']})",
                source_name=f"Source ({result.get('src_lang', 'source')})",
                output_name=f"Translation ({result.get('tgt_lang', 'target')})",
            )
            written["fig3"].append({"run": result["label"], "line": index + 1, **{k: str(v) for k, v in files.items()}})
        if details.get("predicted_alignments") is not None:
            path = directory / f"alignments_{name}.align"
            alignment.write_pharaoh(path, details["predicted_alignments"])
            written.setdefault("alignments", []).append(str(path))
        if details.get("hypotheses") is not None:
            path = directory / f"translations_{name}.txt"
            path.write_text("".join(h + "\n" for h in details["hypotheses"]), encoding="utf-8")
            written.setdefault("translations", []).append(str(path))
    return written


def public(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without its ``details`` (what goes into JSON)."""
    return {k: v for k, v in result.items() if k != "details"}


# ---------------------------------------------------------------------------- command line



def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Evaluate trained runs as in Bahdanau et al. (2015): BLEU and chrF on all "
        "sentences and on the No-UNK subset, BLEU by sentence length (Fig. 2), attention heat "
        "maps (Fig. 3), Table 2, and AER when gold alignments are available.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories to evaluate and compare")
    parser.add_argument("--src", required=True, help="source sentences, one per line")
    parser.add_argument("--ref", required=True, help="reference translations, line-aligned with --src")
    parser.add_argument("--beam", type=positive_int, help="beam size (default: each run's config)")
    parser.add_argument("--alpha", type=float, help="length normalisation exponent (default: each run's config)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per decoding batch (default 32)")
    parser.add_argument(
        "--plots", metavar="DIR",
        help="write figures (PNG + CSV/JSON), table2.md, evaluation.json, translations and predicted alignments here",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout (the tables go to stderr)")
    parser.add_argument(
        "--align", metavar="FILE",
        help="gold alignments, Pharaoh i-j per line (default: SRC_STEM.align next to --src, when it exists)",
    )
    parser.add_argument("--heatmaps", type=non_negative_int, default=4, metavar="N",
                        help=f"attention heat maps per run with --plots (default 4: the first sentences "
                        f"with {HEATMAP_MIN_TOKENS}-{HEATMAP_MAX_TOKENS} source tokens)")
    parser.add_argument("--sentences", metavar="I,J,K", help="heat maps for these line numbers of --src (1-based) instead")
    parser.add_argument(
        "--ensemble", action="store_true",
        help="also evaluate the ensemble of all RUN_DIRs (same vocabularies needed), as one more row",
    )
    return parser




def read_parallel(src: str | os.PathLike, ref: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Both files, checked: present, UTF-8, same number of lines, not empty."""
    src, ref = pathlib.Path(src), pathlib.Path(ref)
    for flag, path in (("--src", src), ("--ref", ref)):
        if not path.is_file():
            raise EvaluationError(f"{flag} file not found: {path}")
    sources, references = [], []
    try:
        for source, reference in ParallelFiles(src, ref).pairs():
            sources.append(source)
            references.append(reference)
    except OSError as error:
        raise EvaluationError(f"cannot read {error.filename}: {error.strerror}") from None
    if not sources:
        raise EvaluationError(f"--src {src} holds no sentences")
    return sources, references


def default_alignment_path(src: str | os.PathLike) -> pathlib.Path:
    """SRC_STEM.align next to --src: test.en -> test.align, test.en.gz -> test.align."""
    path = pathlib.Path(src)
    if path.suffix == ".gz":
        path = path.with_suffix("")
    return path.with_suffix(".align")


def read_gold(
    path: pathlib.Path, sources: Sequence[str], references: Sequence[str], src_lang: str, tgt_lang: str,
    src_path: pathlib.Path,
) -> list[GoldAlignment]:
    """Gold alignments, checked against the sentences: one line per sentence and every
    link inside the tokenized source and reference."""
    gold = alignment.read_pharaoh(path)
    if len(gold) != len(sources):
        raise EvaluationError(
            f"line counts differ: alignment file {path} has {len(gold)} lines, {src_path} has {len(sources)}"
        )
    for number, (links, source, reference) in enumerate(zip(gold, sources, references), 1):
        problem = alignment.check_in_range(
            links, len(tokenizer.tokenize(source, src_lang)), len(tokenizer.tokenize(reference, tgt_lang))
        )
        if problem:
            raise EvaluationError(f"{path}, line {number}: {problem} (tokenized with keras_nmt.tokenizer)")
    return gold


def _heatmap_lines(text: str, sources: Sequence[str], source_codec) -> list[int]:
    indices = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not 1 <= int(item) <= len(sources):
            raise EvaluationError(
                f"--sentences: {item!r} is not a line number of --src (1 to {len(sources)})"
            )
        if not source_codec.tokenize(sources[int(item) - 1]):
            raise EvaluationError(f"--sentences: line {item} of --src is empty")
        indices.append(int(item) - 1)
    return sorted(set(indices))


def _prepare_output_dir(path: str) -> pathlib.Path:
    directory = pathlib.Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise EvaluationError(f"--plots: cannot write to {directory}: {error.strerror}") from None
    return directory


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _main(args)
    except USER_ERRORS as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


@dataclasses.dataclass
class _Job:
    """One row of the comparison: a run directory, or the ensemble of all of them."""

    label: str
    paths: list[pathlib.Path]
    config: Any
    summary: dict[str, Any] | None


def _main(args: argparse.Namespace) -> int:
    # Everything that can be checked without TensorFlow is checked first.
    sources, references = read_parallel(args.src, args.ref)
    runs = [inspect_run_dir(path) for path in args.run_dirs]
    pairs = {(run.src, run.tgt) for run in runs}
    if len(pairs) > 1:
        raise EvaluationError(
            "the RUN_DIRs translate different language pairs: "
            + ", ".join(f"{run.run.path} {run.src}->{run.tgt}" for run in runs)
        )
    src_lang, tgt_lang = runs[0].src, runs[0].tgt
    if args.ensemble:
        if len({run.run.path.resolve() for run in runs}) < 2:
            raise EvaluationError("--ensemble needs at least two different RUN_DIRs")
        check_compatible(runs)
    align_path = pathlib.Path(args.align) if args.align else default_alignment_path(args.src)
    gold = None
    if args.align and not align_path.is_file():
        raise EvaluationError(f"--align file not found: {align_path}")
    if align_path.is_file():
        gold = read_gold(align_path, sources, references, src_lang, tgt_lang, pathlib.Path(args.src))
    plots_dir = _prepare_output_dir(args.plots) if args.plots else None
    keep: list[int] = []
    if plots_dir is not None:
        # Heat maps are drawn over the run's tokens: choose by their count.
        try:
            source_codec = codec.run_codecs(runs[0].run.path)[0]
        except codec.CodecError as error:
            raise RunDirError(str(error)) from None
        if args.sentences:
            keep = _heatmap_lines(args.sentences, sources, source_codec)
        else:
            lengths = [len(source_codec.tokenize(line)) for line in sources]
            keep = choose_heatmap_sentences(lengths, args.heatmaps)
    labels = run_labels(args.run_dirs, [run.config.variant for run in runs])
    jobs = [
        _Job(label, [run.run.path], run.config, run_summary(run.run.path))
        for run, label in zip(runs, labels)
    ]
    if args.ensemble:
        label = "ensemble(" + " + ".join(labels) + ")"
        jobs.append(_Job(label, [run.run.path for run in runs], runs[0].config, None))

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_nmt.translator import Translator

    report = sys.stderr if args.json else sys.stdout
    results = []
    rows = []
    loaded: dict[tuple[pathlib.Path, ...], Translator] = {}  # a run named twice is loaded once
    for job in jobs:
        key = tuple(path.resolve() for path in job.paths)
        if key not in loaded:
            loaded[key] = Translator.from_run_dirs(job.paths)
        translator = loaded[key]
        beam = args.beam or job.config.beam_size
        alpha = job.config.length_alpha if args.alpha is None else args.alpha
        # RNNencdec has no attention: no alignments to score, no heat maps to draw.
        attends = job.config.uses_attention
        result = evaluate_run(
            translator, sources, references, beam, alpha, batch_size=args.batch_size,
            gold=gold if attends else None, keep_attention=keep if attends else [],
            progress=Progress(), label=job.label,
        )
        ensemble = len(job.paths) > 1
        result = {
            "run_dir": str(job.paths[0]) if not ensemble else None,
            "run_dirs": [str(path) for path in job.paths],
            "label": job.label,
            "variant": "ensemble" if ensemble else job.config.variant,
            "architecture": job.config.architecture,
            "src_lang": translator.src_lang,
            "tgt_lang": translator.tgt_lang,
            **result,
        }
        result["table2"] = {key: (job.summary or {}).get(key) for key in TABLE2_FIELDS}
        rows.append(table2_row(job.label, result, job.summary))
        results.append(result)
        print(format_report(result), file=report, flush=True)

    from keras_nmt import plots

    table = plots.table2_markdown(rows)
    print(f"\nTable 2 (training columns from summary.json; scores on {args.src}):\n" + table,
          file=report, flush=True)
    output: dict[str, Any] = {
        "src": str(args.src),
        "ref": str(args.ref),
        "align": str(align_path) if gold is not None else None,
        "sentences": len(sources),
        "runs": [public(r) for r in results],
        "table2": rows,
    }
    if plots_dir is not None:
        output["files"] = write_plots(results, plots_dir, rows)
        output["files"]["evaluation"] = str(plots_dir / "evaluation.json")
        (plots_dir / "evaluation.json").write_text(
            json.dumps(output, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(f"figures, table2.md and evaluation.json written to {plots_dir}", file=report, flush=True)
    if args.json:
        json.dump(output, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
