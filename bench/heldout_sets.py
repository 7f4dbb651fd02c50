"""Test sets cut from a corpus's reported development half, never trained or selected on.

From ``--data DIR`` (``train.SRC/.TGT``, ``valid.SRC/.TGT``) this writes into ``--out``:

- ``report.SRC/.TGT``: the development half that is only reported
  (:mod:`keras_nmt.corpus.heldout`, the same half training reports on);
- ``rare.SRC/.TGT``: the pairs of the report half whose source holds a word seen at most
  ``--rare-count`` (2) times in the training source, or never (words as the word
  tokenizer cuts them, punctuation and numbers not counted); and the same pairs in two
  parts by their rarest such word: ``rare-unseen.SRC/.TGT``, never seen in training, and
  ``rare-seen.SRC/.TGT``, seen 1 to ``--rare-count`` times;
- ``select-rare.SRC/.TGT``: the same rule on the development half that selects: for
  choices made on rare words (a shortlist's sizes), so that ``rare`` stays only reported;
- ``joined.SRC/.TGT``: the report half's consecutive pairs joined 2, 3, 2, 3, ... at a
  time into one line each (a space between sentences), and ``joined.groups``, how many
  pairs each joined line holds, so the same pairs translated one by one can be joined the
  same way and scored against the same references.

It prints how many rare-word pairs have a rare source word unchanged in their reference
(``rare_copied_pairs``; with a never-seen one, ``rare_unseen_copied_pairs``): the most
that copying unknown words through the attention could get right.

Usage::

    python -m bench.heldout_sets --data data/anki-fra-eng --out sets/anki

then, for a run ``RUN``::

    keras-nmt evaluate RUN --src sets/anki/rare.en --ref sets/anki/rare.fr --beam 5
    python -m bench.heldout_sets --score-joined RUN --out sets/anki --beam 5

The second command translates ``joined.SRC`` as whole lines (split into sentences, as
``translate`` does by default, and not split) and the report half pair by pair, joins the
pair-by-pair translations by ``joined.groups``, and prints BLEU and chrF of the three
against ``joined.TGT``.

Cost: one pass over the training source (a word counter: memory grows with the number
of distinct words, not with the corpus) and one over the development split.
"""

from __future__ import annotations

import collections
import itertools
import json
import pathlib
import sys

from bench import _common
from keras_nmt.corpus import heldout
from keras_nmt.corpus.readers import ParallelFiles, find_split
from keras_nmt.text import word

PROG = "heldout_sets"

GROUP_SIZES = (2, 3)


def counted_word(token: str) -> bool:
    """Words the rare-word rule looks at: those with a letter (not punctuation or numbers)."""
    return any(c.isalpha() for c in token)


def source_counts(files: ParallelFiles, lang: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for source, _ in files.pairs():
        counts.update(t for t in word.tokenize(source, lang) if counted_word(t))
    return counts


def rarest_count(source: str, counts: collections.Counter, lang: str) -> int | None:
    """How often training saw the source's rarest counted word (None: no counted word)."""
    return min((counts[t] for t in word.tokenize(source, lang) if counted_word(t)), default=None)


def rare_pairs(pairs, counts: collections.Counter, lang: str,
               rare_count: int) -> list[tuple[tuple[str, str], int]]:
    """The pairs whose source holds a counted word seen at most ``rare_count`` times,
    each with that word's count."""
    return [(pair, rarest) for pair in pairs
            if (rarest := rarest_count(pair[0], counts, lang)) is not None
            and rarest <= rare_count]


def copied_pairs(pairs, counts: collections.Counter, src: str, tgt: str, most: int) -> int:
    """How many of ``pairs`` have a source word seen at most ``most`` times in training
    standing unchanged in the reference: what copying such words could get right."""
    def rare_words(source):
        return {t for t in word.tokenize(source, src) if counted_word(t) and counts[t] <= most}
    return sum(bool(rare_words(source) & set(word.tokenize(target, tgt))) for source, target in pairs)


def non_empty(pairs) -> list[tuple[str, str]]:
    """The pairs with text on both sides, stripped: what the joined lines are made of."""
    return [(s.strip(), t.strip()) for s, t in pairs if s.strip() and t.strip()]


def joined_pairs(pairs) -> tuple[list[tuple[str, str]], list[int]]:
    """Consecutive non-empty pairs joined 2, 3, 2, 3, ... at a time (a shorter last group
    when the pairs run out); returns the joined pairs and each one's group size."""
    pairs = non_empty(pairs)
    joined, groups, start = [], [], 0
    for size in itertools.cycle(GROUP_SIZES):
        group = pairs[start:start + size]
        if not group:
            break
        joined.append((" ".join(s for s, _ in group), " ".join(t for _, t in group)))
        groups.append(len(group))
        start += size
    return joined, groups


def _write(directory: pathlib.Path, name: str, src: str, tgt: str, pairs) -> int:
    pairs = list(pairs)
    for index, lang in enumerate((src, tgt)):
        (directory / f"{name}.{lang}").write_text(
            "".join(pair[index] + "\n" for pair in pairs), encoding="utf-8")
    return len(pairs)


def write_sets(data: pathlib.Path, out: pathlib.Path, src: str, tgt: str,
               rare_count: int = 2) -> dict:
    valid, train = (find_split(data, split, src, tgt) for split in ("valid", "train"))
    if valid is None or train is None:
        raise SystemExit(f"{data}: expected train.{src}/.{tgt} and valid.{src}/.{tgt}")
    pairs = list(valid.pairs())
    # Only the reported half is a test set here: the pairs training reports on.
    report = [pair for pair in pairs if heldout.half_of(pair[0]) == heldout.REPORT]
    if not 0 < len(report) < len(pairs):
        raise SystemExit(f"{valid.source}: too few lines for two halves")
    out.mkdir(parents=True, exist_ok=True)
    _write(out, heldout.REPORT, src, tgt, report)
    counts = source_counts(train, src)
    joined, groups = joined_pairs(report)
    (out / "joined.groups").write_text("".join(f"{g}\n" for g in groups), encoding="utf-8")
    rare = rare_pairs(report, counts, src, rare_count)
    select = [pair for pair in pairs if heldout.half_of(pair[0]) != heldout.REPORT]
    summary = {
        "data": str(data), "rule": heldout.RULE, "rare_count": rare_count,
        "report_pairs": len(report),
        "rare_pairs": _write(out, "rare", src, tgt, [pair for pair, _ in rare]),
        "rare_unseen_pairs": _write(out, "rare-unseen", src, tgt, [p for p, n in rare if n == 0]),
        "rare_seen_pairs": _write(out, "rare-seen", src, tgt, [p for p, n in rare if n > 0]),
        # Pairs whose reference holds one of their rare (never-seen) source words as it is.
        "rare_copied_pairs": copied_pairs([p for p, _ in rare], counts, src, tgt, rare_count),
        "rare_unseen_copied_pairs": copied_pairs([p for p, n in rare if n == 0], counts, src,
                                                 tgt, 0),
        "select_rare_pairs": _write(out, "select-rare", src, tgt,
                                    [p for p, _ in rare_pairs(select, counts, src, rare_count)]),
        "joined_lines": _write(out, "joined", src, tgt, joined),
        "joined_pairs": sum(groups),
        "training_source_types": len(counts),
    }
    return summary


def score_joined(run: str, out: pathlib.Path, src: str, tgt: str, beam: int) -> dict:
    """BLEU and chrF on the joined lines: translated whole with and without sentence
    splitting, and pair by pair then joined."""
    from keras_nmt.evaluation import scoring
    from keras_nmt.decoding.keras_translator import Translator

    def read(name):
        return (out / name).read_text(encoding="utf-8").splitlines()

    joined, references, parts = read(f"joined.{src}"), read(f"joined.{tgt}"), read(f"report.{src}")
    groups = [int(g) for g in read("joined.groups")]
    parts = [source for source, _ in non_empty(zip(parts, read(f"report.{tgt}")))]
    summary = json.loads((pathlib.Path(run) / "summary.json").read_text())
    # The weights the run reported with (averaged ones with --recipe budget).
    translator = Translator.from_run_dir(run, weights=summary.get("report_weights", "best"))
    alpha = translator.model.config.length_alpha

    def texts(lines, **options):
        return [t.text for t in translator.translate(lines, beam_size=beam, alpha=alpha, **options)]

    one_by_one, start = [], 0
    single = texts(parts, split_sentences=False)
    for size in groups:
        one_by_one.append(" ".join(single[start:start + size]))
        start += size
    result = {"lines": len(joined), "pairs": len(parts), "beam": beam}
    for name, hypotheses in (("split", texts(joined)),
                             ("not_split", texts(joined, split_sentences=False)),
                             ("one_by_one", one_by_one)):
        result[name] = {"bleu": scoring.bleu(hypotheses, references)[0],
                        "chrf": scoring.chrf(hypotheses, references)[0]}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", help="corpus directory (train and valid splits)")
    parser.add_argument("--out", required=True, help="where the sets go")
    _common.add(parser, "src_lang")
    _common.add(parser, "tgt_lang")
    parser.add_argument("--rare-count", type=int, default=2,
                        help="a source word seen at most this often in training is rare (default 2)")
    parser.add_argument("--score-joined", metavar="RUN", help="score RUN on the joined lines")
    _common.add(parser, "beam")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    out = pathlib.Path(args.out)
    if args.score_joined:
        result = score_joined(args.score_joined, out, args.src, args.tgt, args.beam)
    elif args.data:
        result = write_sets(pathlib.Path(args.data), out, args.src, args.tgt, args.rare_count)
    else:
        parser.error("give --data (write the sets) or --score-joined RUN")
    print(json.dumps(result, indent=1))
    bench.write(result, {"data": args.data, "out": args.out, "score_joined": args.score_joined,
                         "beam": args.beam})
    return 0


if __name__ == "__main__":
    sys.exit(main())
