"""Terminology: how often constrained decoding puts the asked terms in the output, what it
does to BLEU and chrF, and what it costs, on a development split.

Usage::

    python -m bench.terminology RUN_DIR --src report.en --ref report.fr \\
        [--export-dir EXPORT_DIR] [--beam 5] [--batch-size 64] [--terms 200] \\
        [--seed 1] [--sets-dir DIR] [--json terminology.json]

Two test sets are drawn from the split, with the run's lexical table (``keras-nmt
lexicon``) so that a term's source side is always in its sentence:

- the **terminology set**: per sentence, one or two words of the reference that the
  unconstrained output misses, among the reference words the lexical table lists as a
  translation (one of the ``--best`` most probable) of a word of the source; where the
  output misses none, one it already has. Sentences with no such word are left out;
- the **glossary set**: ``--terms`` source word -> target word pairs, each source word
  once, drawn with ``--seed`` among the source words outside the ``--skip-frequent`` most
  frequent (terms, not function words), each paired with its most probable translation by
  the table that a reference of its sentences holds; the whole split is then translated
  with that glossary.

For each path (the Keras ``Translator``; with ``--export-dir``, an export made with
``--onnx --int8 --constrained``, with ``--shortlist F,B`` or without: its SavedModel in
the TF1 session loader, as TF Serving runs it (``serving_default`` and
``translate_constrained``, text in and out, with the export's beam and vocabulary
selection if it has one; a glossary's terms are matched here and sent as phrases, as a
client would), its ONNX model decoding exactly and its int8 model with the export's
vocabulary selection if it has one; the rows' names say which) it reports the share of
the first 200 constrained lines translated as the Keras path translates them, the share
of terms in the output (term use), BLEU and chrF with and without the constraints, and
the time of both decodes of the terminology set's sentences with two terms (beam
``--beam``, batches of ``--batch-size``), timed side by side: ``--rounds`` rounds of the
two in turn, the ratio the median of the rounds'. ``--sets-dir`` writes the sets (JSON
lines aligned with the split, and the glossary TSV) for other tools.
"""

from __future__ import annotations

import json
import pathlib
import sys
from types import SimpleNamespace

import numpy as np

from bench import _common

PROG = "terminology"


def build_parser():
    parser = _common.parser(PROG, __doc__)
    _common.add_run_and_split(parser)
    parser.add_argument("--export-dir", help="an export with --onnx (and its constrained models)")
    parser.add_argument("--terms", type=int, default=200, help="glossary pairs (default 200)")
    parser.add_argument("--best", type=int, default=3,
                        help="a term must be among the table's B best translations (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="draws of terms (default 1)")
    parser.add_argument("--skip-frequent", type=int, default=100,
                        help="glossary terms are not among the N most frequent source words "
                        "(default 100)")
    parser.add_argument("--sets-dir", help="write the test sets here")
    _common.add(parser, "rounds", default=3,
                help="timed rounds, each both decodes in turn (default %(default)s)")
    return parser


def lexical_terms(source_ids, reference_tokens, target_vocab, targets, best):
    """The reference's words (alphabetic, in the vocabulary) that the table lists among
    the ``best`` translations of one of ``source_ids``, each with that source id."""
    found = {}
    for source_id in source_ids:
        for target_id in targets[source_id, :best]:
            word = target_vocab.tokens[int(target_id)] if target_id > 3 else None
            if word and word.isalpha() and word in reference_tokens and word not in found:
                found[word] = int(source_id)
    return found


def terminology_set(translator, sources, references, plain, best, rng):
    """Per sentence, the terms asked (a list, empty where none qualifies)."""
    targets = np.asarray(translator.lexicon.targets)
    sets = []
    for source, reference, output in zip(sources, references, plain):
        ids = translator.source(source).ids[:-1]
        reference_tokens = set(translator.target_codec.tokenize(reference))
        candidates = sorted(lexical_terms(ids, reference_tokens, translator.target_vocab,
                                          targets, best))
        missed = [w for w in candidates if w not in output.tokens]
        if missed:
            chosen = list(rng.choice(missed, size=min(2, len(missed)), replace=False))
        elif candidates:
            chosen = [str(rng.choice(candidates))]
        else:
            chosen = []
        sets.append([str(w) for w in chosen])
    return sets


def glossary_pairs(translator, sources, references, count, best, skip, rng):
    """``count`` (source word, target word) pairs, each source word once: terms, so not
    the ``skip`` most frequent source words (function words), each paired with its most
    probable translation by the table among those its sentences' references hold."""
    targets = np.asarray(translator.lexicon.targets)
    pairs: dict[str, tuple[int, str]] = {}
    for source, reference in zip(sources, references):
        ids = [i for i in translator.source(source).ids[:-1] if i >= 4 + skip]
        reference_tokens = set(translator.target_codec.tokenize(reference))
        for source_id in ids:
            term = translator.source_vocab.tokens[source_id]
            for rank, target_id in enumerate(targets[source_id, :best]):
                word = translator.target_vocab.tokens[int(target_id)] if target_id > 3 else None
                if term.isalpha() and word and word.isalpha() and word in reference_tokens:
                    if term not in pairs or rank < pairs[term][0]:
                        pairs[term] = (rank, word)
                    break
    terms = sorted(pairs)
    chosen = rng.choice(len(terms), size=min(count, len(terms)), replace=False)
    return [(terms[i], pairs[terms[i]][1]) for i in sorted(chosen)]


class SavedModelPath:
    """The newest SavedModel of EXPORT_DIR/NAME as TF Serving runs it, behind the part of
    the translators' interface this bench calls. Its answers are text: their tokens, for
    counting terms, are the run's target tokenizer's (``like``'s codecs)."""

    def __init__(self, export_dir, name, like):
        from keras_nmt.export import layout
        from keras_nmt.export.loaders import SessionModel

        model_dir = pathlib.Path(export_dir) / name
        self.session = SessionModel(model_dir / str(layout.versions(model_dir)[-1]))
        self.source_codec, self.source = like.source_codec, like.source
        self.target_codec = like.target_codec

    def translate(self, lines, constraints=None, glossary=None, batch_size=64, **_):
        from keras_nmt.decoding.constraints import LineConstraints

        if glossary is not None:
            terms_of = glossary.matcher(self.source_codec.tokenize)
            constraints = [terms_of(self.source(line).tokens) for line in lines]
        found = []
        for start in range(0, len(lines), batch_size):
            batch = np.array(lines[start : start + batch_size], object)
            if constraints is None:
                answer = self.session.run("serving_default", sentences=batch)
                unmet = [0] * len(batch)
            else:
                rules = [c or LineConstraints() for c in constraints[start : start + batch_size]]
                answer = self.session.run(
                    "translate_constrained", sentences=batch,
                    include=padded([c.include for c in rules]),
                    avoid=padded([c.avoid for c in rules]),
                    prefix=np.array([c.prefix for c in rules], object))
                unmet = answer["unmet"].tolist()
            for text, missing in zip(answer["translations"], unmet):
                text = text.decode("utf-8")
                found.append(SimpleNamespace(text=text, unmet=missing,
                                             tokens=tuple(self.target_codec.tokenize(text))))
        return found


def padded(phrases) -> np.ndarray:
    """Each row's phrases, "" after its last: a string matrix at least one wide."""
    widest = max(1, *map(len, phrases))
    return np.array([list(row) + [""] * (widest - len(row)) for row in phrases], object)


def term_use(translations, asked) -> tuple[int, int]:
    """(terms in their output, terms asked)."""
    met = total = 0
    for t, terms in zip(translations, asked):
        for term in terms:
            total += 1
            met += term in t.tokens
    return met, total


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    from keras_nmt.decoding.constraints import Glossary, LineConstraints
    from keras_nmt.evaluation.scoring import bleu, chrf, read_parallel
    from keras_nmt.decoding.keras_translator import Translator

    sources, references = read_parallel(args.src, args.ref)
    keras_translator = Translator.from_run_dir(args.run_dir, weights=args.weights)
    if keras_translator.lexicon is None:
        raise SystemExit(f"{PROG}: error: {args.run_dir} has no lexical table (keras-nmt lexicon)")
    options = dict(beam_size=args.beam, batch_size=args.batch_size)
    bench.log(f"unconstrained decode of {len(sources)} sentences (Keras)")
    plain = keras_translator.translate(sources, **options)
    rng = np.random.default_rng(args.seed)
    asked = terminology_set(keras_translator, sources, references, plain, args.best, rng)
    pairs = glossary_pairs(keras_translator, sources, references, args.terms, args.best,
                           args.skip_frequent, rng)
    glossary = Glossary(tuple(pairs))
    in_set = [i for i, terms in enumerate(asked) if terms]
    pairs_of_two = [i for i in in_set if len(asked[i]) == 2]
    bench.log(f"terminology set: {len(in_set)} sentences, {sum(map(len, asked))} terms "
              f"({len(pairs_of_two)} with two); glossary: {len(pairs)} pairs")
    if args.sets_dir:
        out = pathlib.Path(args.sets_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "terminology.jsonl").write_text(
            "".join(json.dumps(terms, ensure_ascii=False) + "\n" for terms in asked),
            encoding="utf-8")
        (out / "glossary.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs),
                                          encoding="utf-8")

    paths = [("keras", keras_translator, {})]
    if args.export_dir:
        from keras_nmt.decoding.onnx_translator import OnnxTranslator

        int8 = OnnxTranslator.from_export_dir(args.export_dir, int8=True)
        # The SavedModel and the int8 model select words when the export was made with
        # --shortlist, and decode exactly otherwise: the rows say which.
        selects = "-selection" if int8.shortlist else "-exact"
        paths.append(("savedmodel" + selects, SavedModelPath(args.export_dir, "nmt",
                                                             keras_translator), {}))
        paths.append(("onnx", OnnxTranslator.from_export_dir(args.export_dir),
                      {"shortlist": False}))
        paths.append(("onnx-int8" + selects, int8, {"shortlist": True}))

    def lines_of(indices):
        return [sources[i] for i in indices]

    rows = []
    keras_texts: list[str] = []
    for name, translator, extra in paths:
        set_sources, set_refs = lines_of(in_set), [references[i] for i in in_set]
        constraints = [LineConstraints(tuple(asked[i])) for i in in_set]
        unconstrained = translator.translate(set_sources, **options, **extra)
        constrained = translator.translate(set_sources, constraints=constraints, **options,
                                           **extra)
        met, total = term_use(constrained, [asked[i] for i in in_set])
        texts = [t.text for t in constrained]
        keras_texts = keras_texts or texts
        before, _ = term_use(unconstrained, [asked[i] for i in in_set])
        glossed = translator.translate(sources, glossary=glossary, **options, **extra)
        plain_all = translator.translate(sources, **options, **extra)
        terms_of = glossary.matcher(translator.source_codec.tokenize)
        applied = [terms_of(translator.source(s).tokens).include for s in sources]
        g_met, g_total = term_use(glossed, applied)
        g_before, _ = term_use(plain_all, applied)
        # The cost: the sentences with two terms, decoded both ways, side by side.
        timed_sources = lines_of(pairs_of_two)
        timed_constraints = [LineConstraints(tuple(asked[i])) for i in pairs_of_two]
        translator.translate(timed_sources[: args.batch_size], **options, **extra)
        translator.translate(timed_sources[: args.batch_size],
                             constraints=timed_constraints[: args.batch_size], **options, **extra)
        # Rounds of both decodes in turn: each round's ratio is of two neighbours in time,
        # and the median of the rounds leaves out a minute when the machine slowed.
        plain_rounds, guided_rounds = [], []
        for _ in range(args.rounds):
            plain_rounds.append(_common.timed(lambda: translator.translate(
                timed_sources, **options, **extra))[0])
            guided_rounds.append(_common.timed(lambda: translator.translate(
                timed_sources, constraints=timed_constraints, **options, **extra))[0])
        ratios = [p / g for p, g in zip(plain_rounds, guided_rounds)]
        row = {
            "path": name,
            "sentences": len(in_set), "terms": total,
            "term_use": met / max(total, 1), "term_use_unconstrained": before / max(total, 1),
            "bleu": bleu([t.text for t in constrained], set_refs)[0],
            "bleu_unconstrained": bleu([t.text for t in unconstrained], set_refs)[0],
            "chrf": chrf([t.text for t in constrained], set_refs)[0],
            "chrf_unconstrained": chrf([t.text for t in unconstrained], set_refs)[0],
            "unmet_lines": sum(bool(t.unmet) for t in constrained),
            # The first 200 constrained lines, as the Keras path translated them.
            "same_as_keras_200": sum(a == b for a, b in zip(texts[:200], keras_texts[:200]))
            / max(1, min(200, len(texts))),
            "glossary_terms": g_total, "glossary_term_use": g_met / max(g_total, 1),
            "glossary_term_use_unconstrained": g_before / max(g_total, 1),
            "glossary_bleu": bleu([t.text for t in glossed], references)[0],
            "glossary_bleu_unconstrained": bleu([t.text for t in plain_all], references)[0],
            "timed_sentences": len(timed_sources),
            "seconds_unconstrained": plain_rounds, "seconds_constrained": guided_rounds,
            "throughput_ratios": ratios, "throughput_ratio": float(np.median(ratios)),
        }
        rows.append(row)
        bench.log(f"{name}: term use {row['term_use']:.4f} (unconstrained "
                  f"{row['term_use_unconstrained']:.4f}), BLEU {row['bleu']:.2f} vs "
                  f"{row['bleu_unconstrained']:.2f}, glossary term use "
                  f"{row['glossary_term_use']:.4f}, throughput x{row['throughput_ratio']:.2f}")
    print(_common.table(rows, [
        ("path", "path", ""), ("term_use", "term use", ".4f"),
        ("term_use_unconstrained", "without", ".4f"), ("bleu", "BLEU", ".2f"),
        ("bleu_unconstrained", "without", ".2f"), ("chrf", "chrF", ".2f"),
        ("chrf_unconstrained", "without", ".2f"), ("glossary_term_use", "glossary use", ".4f"),
        ("glossary_bleu", "gloss. BLEU", ".2f"), ("glossary_bleu_unconstrained", "without", ".2f"),
        ("throughput_ratio", "speed x", ".2f")]))
    bench.write(rows, {"run_dir": args.run_dir, "weights": args.weights, "src": args.src,
                       "ref": args.ref, "beam": args.beam, "batch_size": args.batch_size,
                       "export_dir": args.export_dir, "terms": args.terms, "best": args.best,
                       "seed": args.seed, "rounds": args.rounds, "sentences": len(sources)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
