"""How well the model's confidence predicts the quality of its translations.

Usage::

    python -m bench.confidence_quality RUN_DIR --src select.en --ref select.fr \\
        [--weights reported] [--beam 5] [--batch-size 64] [--fit] \\
        [--figure reliability.png] [--json confidence-quality.json]

Translates ``--src`` with ``Translator.translate(..., confidence=True)`` (each line whole,
its n-best list kept), scores each translation against its reference with sentence chrF
(sacrebleu), and reports, for the confidence the API gives and for each signal it may be
made of (:func:`keras_nmt.decoding.confidence.sentence_signals`, from one force-decoding pass of
the best hypothesis, and the n-best list's agreement):

- Spearman and Pearson correlation with sentence chrF;
- flagging: the share of the worst chrF decile (the sentences at or below its 10th
  percentile) that are among the 10% of sentences of lowest confidence;
- the reliability table: equal-width confidence bins, each with its sentences, mean
  confidence and mean chrF (``--figure`` draws it);
- words: the AUROC of one minus a word's confidence for telling the hypothesis words
  that are not in the reference (a bag of words, case-folded, apostrophes unified and
  punctuation stripped from their ends) from those that are.

``--fit`` also fits a combination of the signals on these sentences (:func:`fit_combination`:
a logistic regression of chrF / 100 with nonnegative weights on the standardized signals,
so the figure never falls when a signal rises) and reports its Spearman correlation in
sample and 5-fold cross-validated: a combination is worth using only where the
cross-validated figure beats the plain mean log-probability's on the half of the
development data that selects (never on the half that is reported). Nothing is stored
in the run. ``--combination REPORT`` applies the combination a ``--fit`` report holds (fitted
on other sentences) to these, and reports its figures beside the plain one's.

``--export DIR`` (``--int8``) translates with an ONNX export of the run instead
(``OnnxTranslator``, with the export's vocabulary selection), whose confidence comes from
the log-probabilities that search gave its tokens: the figures a server gives. Its best
hypothesis only, so no other signals, no ``--fit`` and no ``--combination``.

``--dropout-samples N`` gives the API's figures from N passes with the model's dropout on
(Monte Carlo dropout, ``translate(..., dropout_samples=N)``); the report's
``seconds_translating`` is what they cost, beside a run without.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import unicodedata
from typing import Sequence

import numpy as np

from bench import _common

PROG = "confidence_quality"
BINS = 10
FOLDS = 5


# ---------------------------------------------------------------------------- statistics

def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties given their mean rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranked = np.empty(len(values), np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranked[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    scale = math.sqrt(float(np.sum(x * x) * np.sum(y * y)))
    return float(np.sum(x * y) / scale) if scale > 0 else float("nan")


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's correlation of the ranks (ties: mean ranks)."""
    return pearson(ranks(x), ranks(y))


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """The chance that a positive's score is above a negative's (ties count half)."""
    positive = np.asarray(positive, bool)
    count, negatives = int(positive.sum()), int((~positive).sum())
    if not count or not negatives:
        return float("nan")
    ranked = ranks(scores)
    return float((ranked[positive].sum() - count * (count + 1) / 2) / (count * negatives))


def flagging(confidence: Sequence[float], quality: Sequence[float], share: float = 0.1) -> dict:
    """The share of the worst ``share`` of ``quality`` (every sentence at or below its
    ``share`` quantile) among the ``share`` of sentences of lowest ``confidence``."""
    confidence, quality = np.asarray(confidence), np.asarray(quality)
    flagged = set(np.argsort(confidence, kind="mergesort")[:math.ceil(share * len(quality))])
    worst = np.flatnonzero(quality <= np.quantile(quality, share, method="inverted_cdf"))
    caught = sum(1 for i in worst if i in flagged)
    return {"flagged": len(flagged), "worst": len(worst), "caught": caught,
            "recall": caught / len(worst) if len(worst) else float("nan")}


def reliability(confidence: Sequence[float], quality: Sequence[float], bins: int = BINS
                ) -> list[dict]:
    """Equal-width confidence bins over [0, 1]: sentences, mean confidence, mean chrF."""
    confidence, quality = np.asarray(confidence), np.asarray(quality)
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append({"low": b / bins, "high": (b + 1) / bins, "sentences": int(inside.sum()),
                         "confidence": float(confidence[inside].mean()),
                         "chrf": float(quality[inside].mean())})
    return rows


# ---------------------------------------------------------------------------- words

def _word_key(word: str) -> str:
    word = word.casefold().replace("\u2019", "'")
    stripped = word.strip("".join(c for c in set(word) if unicodedata.category(c)[0] == "P"))
    return stripped or word


def reference_words(reference: str) -> set[str]:
    """The reference's bag of words, as hypothesis words are compared with it."""
    return {_word_key(word) for word in reference.split()}


def word_rows(translations, references: Sequence[str]) -> tuple[list[float], list[bool]]:
    """(one minus each hypothesis word's confidence, whether the reference lacks it)."""
    scores, missing = [], []
    for t, reference in zip(translations, references):
        if t.confidence is None:
            continue
        bag = reference_words(reference)
        for word, value in zip(t.confidence.words, t.confidence.word_confidences):
            scores.append(1.0 - value)
            missing.append(_word_key(word) not in bag)
    return scores, missing


# ---------------------------------------------------------------------------- signals

def nbest_agreement(translation) -> float:
    """The mean token-bag F1 of the n-best list's other hypotheses with the best (1.0
    without any): how much the beam's alternatives agree with its choice."""
    best = translation.tokens
    others = [h.tokens for h in translation.alternatives[1:]]
    if not others or not best:
        return 1.0
    from collections import Counter

    def f1(a, b):
        common = sum((Counter(a) & Counter(b)).values())
        return 2 * common / (len(a) + len(b)) if a or b else 1.0

    return float(np.mean([f1(best, other) for other in others]))


def signals(translator, sources: Sequence[str], translations, batch_size: int) -> dict:
    """Each signal of :func:`keras_nmt.decoding.confidence.sentence_signals` per sentence (higher:
    surer), from one force-decoding pass of the best hypotheses, and the n-best list's
    agreement. A sentence with nothing decoded has None."""
    from keras_nmt.decoding.confidence import SIGNALS, sentence_signals
    from keras_nmt.core.constants import EOS_ID
    from keras_nmt.evaluation.forced import force_signals

    read = [translator.source(line) for line in sources]
    todo = [i for i, source in enumerate(read) if source.tokens]
    found = force_signals(translator.model, [read[i].ids for i in todo],
                          [translator.target_vocab.encode(translations[i].tokens) + [EOS_ID]
                           for i in todo], batch_size)
    out = {name: [None] * len(sources) for name in (*SIGNALS, "nbest_agreement")}
    for i, forced in zip(todo, found):
        for name, value in sentence_signals(forced.token_logprobs, forced.token_entropies,
                                            forced.attention).items():
            out[name][i] = value
        out["nbest_agreement"][i] = nbest_agreement(translations[i])
    return out


def correlations(values: Sequence[float], quality: Sequence[float]) -> dict:
    return {"spearman": spearman(values, quality), "pearson": pearson(values, quality),
            "flagging": flagging(values, quality)}


def cross_validated(table: np.ndarray, quality: np.ndarray, names: Sequence[str]) -> float:
    """The Spearman correlation with ``quality`` of combinations fitted on 4/5 of the
    sentences and applied to the other fifth (folds by sentence number modulo 5)."""
    predicted = np.empty(len(quality))
    fold = np.arange(len(quality)) % FOLDS
    for k in range(FOLDS):
        fitted = fit_combination(table[fold != k], quality[fold != k] / 100, names)
        predicted[fold == k] = fitted.apply(table[fold == k])
    return spearman(predicted, quality)


# ---------------------------------------------------------------------------- combinations

@dataclasses.dataclass(frozen=True)
class Combination:
    """``sigmoid(bias + sum of weight x (signal - mean) / scale)``, every weight >= 0."""

    names: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    bias: float

    def apply(self, table: np.ndarray) -> np.ndarray:
        """The figure of each row of ``table`` [sentences, len(names)], in (0, 1)."""
        z = (np.asarray(table, np.float64) - self.means) / self.scales
        return 1.0 / (1.0 + np.exp(-(z @ self.weights + self.bias)))

    @classmethod
    def from_json(cls, value: dict) -> "Combination":
        names = tuple(value["signals"])
        column = lambda key: np.array([value["signals"][n][key] for n in names], np.float64)
        return cls(names, column("mean"), column("scale"), column("weight"),
                   float(value["bias"]))

    def to_json(self) -> dict:
        return {"formula": "sigmoid(bias + sum(weight * (signal - mean) / scale))",
                "bias": self.bias,
                "signals": {name: {"weight": float(w), "mean": float(m), "scale": float(s)}
                            for name, m, s, w in zip(self.names, self.means, self.scales,
                                                     self.weights)}}


def fit_combination(table: np.ndarray, target: np.ndarray, names: Sequence[str],
                    steps: int = 4000, rate: float = 0.5) -> Combination:
    """The :class:`Combination` of the signals ``table`` [sentences, len(names)] that best
    predicts ``target`` (in [0, 1]) by cross-entropy: a logistic regression with
    fractional labels, its weights kept >= 0 (projected gradient descent on the
    standardized signals; the problem is convex)."""
    table = np.asarray(table, np.float64)
    target = np.asarray(target, np.float64)
    means, scales = table.mean(axis=0), table.std(axis=0)
    scales[scales == 0] = 1.0
    z = (table - means) / scales
    weights = np.zeros(z.shape[1])
    mean_target = float(np.clip(target.mean(), 1e-6, 1 - 1e-6))
    bias = math.log(mean_target / (1 - mean_target))
    for _ in range(steps):
        error = 1.0 / (1.0 + np.exp(-(z @ weights + bias))) - target
        weights = np.maximum(weights - rate * (z.T @ error) / len(target), 0.0)
        bias -= rate * float(error.mean())
    return Combination(tuple(names), means, scales, weights, float(bias))


# ---------------------------------------------------------------------------- the figure

def draw(rows: list[dict], path: str, title: str) -> None:
    """The reliability plot: in each confidence bin, its mean confidence against its mean
    sentence chrF, the point's area its share of the sentences."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, y = [r["confidence"] for r in rows], [r["chrf"] for r in rows]
    total = sum(r["sentences"] for r in rows)
    figure, axes = plt.subplots(figsize=(5.5, 4.5))
    axes.plot([0, 1], [0, 100], color="0.75", linewidth=1, label="chrF = 100 x confidence")
    axes.plot(x, y, "-", color="C0", linewidth=1)
    axes.scatter(x, y, s=[12 + 600 * r["sentences"] / total for r in rows], color="C0",
                 alpha=0.8, label="a bin (area: its sentences)")
    for r in rows:
        axes.annotate(str(r["sentences"]), (r["confidence"], r["chrf"]), fontsize=7,
                      textcoords="offset points", xytext=(6, -10))
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 100)
    axes.set_xlabel("sentence confidence (bins 0.1 wide: their mean)")
    axes.set_ylabel("mean sentence chrF")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    from keras_nmt.core.atomic import open_atomic

    with open_atomic(path, "wb") as f:
        figure.savefig(f, format="png", dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------------------- the run

def build_parser():
    parser = _common.parser(PROG, __doc__)
    _common.add_run_and_split(parser)
    parser.add_argument("--fit", action="store_true",
                        help="also fit a combination of the signals on these sentences and "
                             "report its correlation, in sample and cross-validated")
    parser.add_argument("--combination", metavar="REPORT",
                        help="a report of this benchmark made with --fit on other sentences: "
                             "its combination's figures on these")
    parser.add_argument("--export", metavar="DIR",
                        help="translate with this ONNX export of the run (its selection)")
    parser.add_argument("--int8", action="store_true", help="with --export: its int8 model")
    parser.add_argument("--dropout-samples", type=int, default=0, metavar="N",
                        help="the confidence from N passes with the model's dropout on")
    parser.add_argument("--figure", metavar="PNG", help="draw the reliability plot here")
    parser.add_argument("--title", default="", help="the figure's title")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.export and (args.fit or args.combination):
        parser.error("--export gives the confidence alone: no --fit, no --combination")
    if args.int8 and not args.export:
        parser.error("--int8 needs --export")
    if args.dropout_samples and args.export:
        parser.error("--dropout-samples needs the Keras model: an export has no dropout")
    bench = _common.Bench(PROG, args, argv)
    from sacrebleu.metrics import CHRF

    from keras_nmt.evaluation.scoring import read_parallel
    from keras_nmt.decoding.keras_translator import Translator

    sources, references = read_parallel(args.src, args.ref)
    if args.export:
        from keras_nmt.decoding.onnx_translator import OnnxTranslator

        translator = OnnxTranslator.from_export_dir(args.export, int8=args.int8)
        nbest = 1
    else:
        translator = Translator.from_run_dir(args.run_dir, weights=args.weights)
        nbest = args.beam
    seconds, translations = _common.timed(lambda: translator.translate(
        sources, beam_size=args.beam, nbest=nbest, batch_size=args.batch_size,
        split_sentences=False, confidence=True,
        **({"dropout_samples": args.dropout_samples} if args.dropout_samples else {})))
    bench.log(f"translated {len(sources)} sentences with their confidence in {seconds:.0f} s")
    chrf = CHRF()
    quality = np.array([chrf.sentence_score(t.text, [ref]).score
                        for t, ref in zip(translations, references)])
    found = {} if args.export else signals(translator, sources, translations, args.batch_size)
    scored = [i for i, t in enumerate(translations) if t.confidence is not None]
    names = list(found)
    table = np.array([[found[name][i] for name in names] for i in scored], np.float64)
    kept = quality[scored]
    api = np.array([translations[i].confidence.sentence for i in scored])
    baseline = np.array([math.exp(translations[i].confidence.mean_logprob) for i in scored])
    results: dict = {
        "sentences": len(sources), "scored": len(scored), "mean_chrf": float(quality.mean()),
        "confidence": correlations(api, kept),
        "baseline": correlations(baseline, kept),  # exp(mean token log-prob): the same
        #                                            unless the API's formula changes
        "signals": {name: correlations(table[:, k], kept) for k, name in enumerate(names)},
    }
    if args.fit:
        fitted = fit_combination(table, kept / 100, names)
        combined = fitted.apply(table)
        results["fit"] = {"combination": fitted.to_json(), "in_sample": correlations(
            combined, kept), "cross_validated_spearman": cross_validated(table, kept, names)}
    if args.combination:
        import json

        with open(args.combination, encoding="utf-8") as f:
            given = Combination.from_json(json.load(f)["results"]["fit"]["combination"])
        columns = [names.index(name) for name in given.names]
        results["combination"] = {"from": args.combination, **correlations(
            given.apply(table[:, columns]), kept)}
    scores, missing = word_rows(translations, references)
    results["words"] = {"words": len(scores), "not_in_reference": int(sum(missing)),
                        "auroc": auroc(scores, missing)}
    results["reliability"] = reliability(api, kept)
    rows = [{"name": "confidence (API)", **results["confidence"]},
            {"name": "exp(mean logprob)", **results["baseline"]},
            *({"name": name, **value} for name, value in results["signals"].items())]
    if args.fit:
        rows.append({"name": "fitted (in sample)", **results["fit"]["in_sample"]})
    if args.combination:
        rows.append({"name": "fitted elsewhere", **results["combination"]})
    for row in rows:
        row["recall"] = row["flagging"]["recall"]
    print(_common.table(rows, [("name", "confidence", ""), ("spearman", "Spearman", ".3f"),
                               ("pearson", "Pearson", ".3f"), ("recall", "worst-decile recall",
                                                               ".3f")]))
    print(f"words: AUROC {results['words']['auroc']:.3f} over {len(scores)} words "
          f"({results['words']['not_in_reference']} not in the reference)")
    if args.fit:
        print(f"fitted: cross-validated Spearman {results['fit']['cross_validated_spearman']:.3f}")
    if args.figure:
        draw(results["reliability"], args.figure, args.title)
    bench.write(results, {"run_dir": args.run_dir, "export": args.export, "int8": args.int8,
                          "weights": args.weights, "src": args.src,
                          "ref": args.ref, "beam": args.beam, "batch_size": args.batch_size,
                          "fit": args.fit, "dropout_samples": args.dropout_samples,
                          "combination": args.combination, "figure": args.figure, "seconds_translating": seconds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
