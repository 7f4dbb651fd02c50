"""The built-in corpus's grammar: one English sentence and its French translation,
with their word alignment, from the lexicon (:mod:`.words`).

:class:`_Generator` emits English tokens in English order and French tokens in French
order, each French token carrying the indices of the English tokens it translates, so
the gold alignment is exact by construction. All reordering in this grammar is local,
so a phrase can always emit its English tokens before the matching French ones. French
elision and contraction (:mod:`.orthography`) are applied as each phrase's first word is
emitted (the word that triggers them is known then); a contraction merges the
alignments of the two words it fuses ("of" + "the" -> "du").

Sentence length is steered by a target length drawn first, so the length distribution
is predictable. Every draw comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from keras_nmt.corpus.builtin.orthography import (
    FR_CONTRACTIONS, FR_ELISIONS, FR_PRE_VOWEL, FR_TRIGGERS, FR_VOWEL_ONSET,
)
from keras_nmt.corpus.builtin.dictionary import (
    ADJECTIVES, ADJS_BY_CAT, ANY, DETERMINERS, EN_AN, GAP_VERBS, INDEFINITE, INTRANSITIVE,
    INTRANSITIVE_BY_SUBJECT, LOCATIVE_PREPOSITIONS, NOUN_POOLS, NOUN_ROWS, PLURAL_DET_DRAW,
    POST_ADVERBS, PRE_ADVERBS, PREPOSITIONS, SINGULAR_DET_DRAW, SUBJECT_VERBS, SUBORDINATORS,
    VERBS, Verb, rank,
)


@dataclasses.dataclass(frozen=True)
class SentencePair:
    """One English sentence, its French translation and their word alignment."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    # Sorted (source index, target index) pairs; every token of both sides
    # occurs in at least one link.
    alignment: tuple[tuple[int, int], ...]

    def pharaoh(self) -> str:
        """The alignment as one line of space-separated ``i-j`` items."""
        return " ".join(map(_LINK_TEXT.__getitem__, self.alignment))


class _LinkCache(dict):  # type: ignore[type-arg]
    # Formatting ~1M links per corpus is a noticeable share of write time;
    # there are only a few thousand distinct (i, j) pairs.
    def __missing__(self, key: tuple[int, int]) -> str:
        text = self[key] = f"{key[0]}-{key[1]}"
        return text


_LINK_TEXT = _LinkCache()

_MAX_DEPTH = 4

# Target-length bands: (cumulative probability, low, high), inclusive.  The
# realised length tracks the target to within a few tokens, so about 40% of
# sentences exceed 30 tokens and about 15% exceed 50.
_LENGTH_BANDS: tuple[tuple[float, int, int], ...] = (
    (0.30, 4, 12), (0.60, 13, 30), (0.85, 31, 50), (1.0, 51, 95),
)


def _randint(rng: random.Random, low: int, high: int) -> int:
    # random.randint is several times slower and this runs often per sentence.
    return low + int(rng.random() * (high - low + 1))


def _draw_target_length(rng: random.Random) -> int:
    u = rng.random()
    for cum, low, high in _LENGTH_BANDS:
        if u < cum:
            return _randint(rng, low, high)
    return _LENGTH_BANDS[-1][2]


class _Generator:
    """Emits one sentence: English tokens plus aligned French tokens.

    French is stored as parallel lists: ``fw`` (words), ``fs`` (for each word
    the English index it mainly translates) and ``fx`` (further
    (English, French) links for words with several sources).  Most words have
    one source, so this avoids a tuple per word and lets the alignment be
    built with ``zip`` at the end.

    Every phrase-building method takes a budget of English tokens and tries to
    use about that many; callers pass the leftover on, so a sentence ends up
    close to its drawn target length.  The code favours speed (local aliases,
    positional calls): the default corpus is ~7 noun phrases x 31,500
    sentences.
    """

    __slots__ = ("rng", "rand", "en", "fw", "fs", "fx")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rand = rng.random
        self.en: list[str] = []
        self.fw: list[str] = []
        self.fs: list[int] = []
        self.fx: list[tuple[int, int]] = []

    def fr_start(self, word: str, src: int) -> None:
        """Appends the first word of a phrase, contracting with or eliding the
        preposition/complementizer/negation before it."""
        fw = self.fw
        if fw:
            prev = fw[-1]
            merged = FR_CONTRACTIONS.get((prev, word))
            if merged is not None:
                fw[-1] = merged
                self.fx.append((src, len(fw) - 1))
                return
            elided = FR_ELISIONS.get(prev)
            if elided is not None and word[0] in FR_VOWEL_ONSET:
                fw[-1] = elided
        fw.append(word)
        self.fs.append(src)

    def fr_multi(self, word: str, src: Sequence[int]) -> None:
        """Appends a French word translating several English tokens."""
        j = len(self.fw)
        self.fw.append(word)
        self.fs.append(src[0])
        for i in src[1:]:
            self.fx.append((i, j))

    # ------------------------------------------------------------ noun phrases
    def noun_core(self, noun: tuple[Any, ...], plural: bool, det: str,
                  adjectives: Sequence[tuple[Any, ...]]) -> int:
        """Determiner, adjectives and noun: English order, then French order.

        Returns the number of English tokens emitted.
        """
        en, fw, fs = self.en, self.fw, self.fs
        row = DETERMINERS[det]
        if plural:
            det_en, det_fr, noun_en, noun_fr = row[1], row[4], noun[1], noun[3]
            form = 4 if noun[4] == "f" else 3  # index into an adjective row
        else:
            det_en, noun_en, noun_fr = row[0], noun[0], noun[2]
            if noun[4] == "f":
                det_fr, form = row[3], 2
            else:
                det_fr, form = row[2], 1
            if noun[6]:
                det_fr = FR_PRE_VOWEL.get(det_fr, det_fr)
        d = len(en)
        if det_en:
            if det_en == "a" and (adjectives[0][0] if adjectives else noun_en) in EN_AN:
                det_en = "an"
            en.append(det_en)
            first_adj = d + 1
        else:
            first_adj = d
        n = first_adj
        if adjectives:
            for adj in adjectives:
                en.append(adj[0])
            n += len(adjectives)
        en.append(noun_en)
        if fw and fw[-1] in FR_TRIGGERS:
            self.fr_start(det_fr, d if det_en else n)
            # "de" is last only after "de des" -> "de": "d'hôpitaux".
            if noun[6] and fw[-1] == "de":
                fw[-1] = "d'"
        else:
            fw.append(det_fr)
            fs.append(d if det_en else n)
        fw.append(noun_fr)
        fs.append(n)
        if adjectives:
            for k in range(len(adjectives) - 1, -1, -1):
                fw.append(adjectives[k][form])
                fs.append(first_adj + k)
        return n + 1 - d

    def noun_phrase(self, budget: int, cats: str, depth: int, plural: bool | None = None,
                    bare_ok: bool = False, indef_ok: bool = True) -> tuple[bool, bool, str]:
        """Returns (feminine, plural, category) of the head, for agreement."""
        rand, en = self.rand, self.en
        pool = NOUN_POOLS[cats]
        noun = pool[int(rand() * len(pool))]
        if plural is None:
            plural = rand() < 0.3
        det = (PLURAL_DET_DRAW if plural else SINGULAR_DET_DRAW)[int(rand() * 1000)]
        if det in INDEFINITE and (not indef_ok or det == "bare" and not bare_ok):
            det = "the"
        spare = budget - (1 if det == "bare" else 2)
        adjectives: Sequence[tuple[Any, ...]] = ()
        if spare > 0:
            r = rand()
            if r >= 0.62:
                adjectives = []
                count = 1 if r < 0.89 else 2 if r < 0.98 else 3
                pool_a = ADJS_BY_CAT[noun[5]]
                ranks = []
                for _ in range(min(count, spare)):
                    adj = pool_a[int(rand() * len(pool_a))]
                    # One adjective per rank avoids "French German" and
                    # duplicates, and keeps the English order well defined.
                    if adj[5] not in ranks:
                        ranks.append(adj[5])
                        adjectives.append(adj)
                if len(adjectives) > 1:
                    adjectives.sort(key=rank)
        spare = budget - self.noun_core(noun, plural, det, adjectives)
        fem, cat = noun[4] == "f", noun[5]
        mods = 0
        while spare >= 3 and depth < _MAX_DEPTH and mods < 2:
            sub = spare if mods == 1 or spare < 8 else 3 + int(rand() * (spare - 2))
            before = len(en)
            r = rand()
            if r < 0.3:
                self.prepositional_phrase(sub, depth + 1, PREPOSITIONS)
            elif r < 0.5 and cat != "A":
                self.genitive(sub, depth + 1)
            else:
                self.relative_clause(fem, plural, cat, sub, depth + 1)
                # A second modifier after a relative clause would attach
                # ambiguously; stop here.
                break
            spare -= len(en) - before
            mods += 1
        return fem, plural, cat

    def prepositional_phrase(self, budget: int, depth: int,
                             preps: Sequence[tuple[tuple[str, ...], tuple[str, ...], str]]) -> None:
        prep = preps[int(self.rand() * len(preps))]
        en_words = prep[0]
        if len(en_words) + 2 > budget:
            prep = preps[0]
            en_words = prep[0]
        self.emit_fixed(en_words, prep[1], pairwise=False)
        # "sans des livres" is wrong French; keep "without" definite.
        self.noun_phrase(budget - len(en_words), prep[2], depth, None, False,
                         en_words[0] != "without")

    def genitive(self, budget: int, depth: int) -> None:
        self.fs.append(len(self.en))
        self.en.append("of")
        self.fw.append("de")
        self.noun_phrase(budget - 1, ANY, depth)

    def relative_clause(self, fem: bool, plural: bool, cat: str, budget: int,
                        depth: int) -> None:
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        r = rand()
        subject_verbs = SUBJECT_VERBS[cat]
        gap_verbs = GAP_VERBS[cat]
        fs.append(len(en))
        if r < 0.45 and subject_verbs:
            verb = subject_verbs[int(rand() * len(subject_verbs))]
            if verb.min_cost + 1 > budget:
                pool = INTRANSITIVE_BY_SUBJECT[cat]
                verb = pool[int(rand() * len(pool))]
            en.append(("who" if rand() < 0.6 else "that") if cat == "H"
                      else ("which" if rand() < 0.5 else "that"))
            fw.append("qui")
            self.verb_group(verb, plural, budget - 1, depth)
        elif r < 0.8 and gap_verbs and budget >= 4:
            verb = gap_verbs[int(rand() * len(gap_verbs))]
            en.append(("whom" if rand() < 0.2 else "that") if cat == "H"
                      else ("which" if rand() < 0.5 else "that"))
            fw.append("que")
            rest = budget - 1 - (verb.min_cost - 2)
            sub_budget = 2 + (int(rand() * (rest - 1)) if rest > 2 else 0) // 2
            start = len(en)
            sub_plural = self.noun_phrase(sub_budget, verb.subjects, depth + 1)[1]
            self.verb_group(verb, sub_plural, budget - 1 - (len(en) - start), depth, True)
        else:
            en.append("who" if cat == "H" else ("which" if rand() < 0.5 else "that"))
            fw.append("qui")
            self.predicate(fem, plural, cat, budget - 1, depth)

    # ---------------------------------------------------------------- clauses
    def verb_group(self, verb: Verb, plural: bool, budget: int, depth: int,
                   gap: bool = False) -> None:
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        start = len(en)
        # 0 plain, 1 "does not", 2 "never", 3 preverbal adverb.
        slack = budget - verb.min_cost
        r = rand()
        mode = 0
        if r < 0.19 and slack >= 3:
            mode = 1 if r < 0.08 and slack >= 4 else 2 if r < 0.11 else 3
        neg = adv = -1
        extra_src: tuple[int, ...] = ()
        if mode == 0:
            v = start
            en.append(verb.en_base if plural else verb.en_sg)
        elif mode == 1:
            en.append("do" if plural else "does")
            en.append("not")
            en.append(verb.en_base)
            neg, v = start + 1, start + 2
            extra_src = (start,)
        else:
            if mode == 2:
                en.append("never")
                neg = start
            else:
                adverb = PRE_ADVERBS[int(rand() * len(PRE_ADVERBS))]
                en.append(adverb[0])
                adv = start
            v = start + 1
            en.append(verb.en_base if plural else verb.en_sg)
        if verb.particle and not gap:
            extra_src += (len(en),)
            en.append(verb.particle)
        fr_forms = verb.fr_pl if plural else verb.fr_sg
        if neg >= 0:
            fw.append("ne")
            fs.append(neg)
            self.fr_start(fr_forms[0], v)
        else:
            fw.append(fr_forms[0])
            fs.append(v)
        if extra_src:
            j = len(fw) - 1
            for i in extra_src:
                self.fx.append((i, j))
        if neg >= 0:
            fw.append("pas" if mode == 1 else "jamais")
            fs.append(neg)
        elif adv >= 0:
            fw.append(adverb[1])
            fs.append(adv)
        if len(fr_forms) > 1:
            for w in fr_forms[1:]:
                self.fr_multi(w, (v, *extra_src))

        comps = verb.complements
        if gap:
            comps = comps[1:]
        extra = budget - (len(en) - start) - verb.prep_tokens - 2 * len(comps)
        adjunct = 0
        if extra >= 3 and (not comps or rand() < 0.3):
            adjunct = extra if not comps else 3 + int(rand() * (extra - 2))
            extra -= adjunct
        # Direct objects of a negated verb take "de" in French ("ne lit pas de
        # livre"); keeping them definite sidesteps that rule.
        indef_ok = mode == 0 or mode == 3
        last = len(comps) - 1
        for k, (ep, fp, cats) in enumerate(comps):
            if fp:
                if ep:
                    fs.append(len(en))
                    en.append(ep)
                    fw.append(fp)
                else:
                    self.fr_multi(fp, (v, *extra_src))
                share = extra if k == last else int(rand() * (extra + 1)) if extra > 0 else 0
                before = len(en)
                self.noun_phrase(2 + share, cats, depth + 1)
            else:
                share = extra if k == last else int(rand() * (extra + 1)) if extra > 0 else 0
                before = len(en)
                self.noun_phrase(2 + share, cats, depth + 1, None,
                                 indef_ok and not ep, indef_ok)
            extra -= len(en) - before - 2
        left = budget - (len(en) - start)
        if left >= 1 and rand() < 0.12:
            adv_en, adv_fr = POST_ADVERBS[int(rand() * len(POST_ADVERBS))]
            self.emit_fixed(adv_en, adv_fr)
            left -= len(adv_en)
        if left >= 3 and depth < _MAX_DEPTH and (adjunct or rand() < 0.5):
            self.prepositional_phrase(left, depth + 1, PREPOSITIONS)

    def emit_fixed(self, en_words: Sequence[str], fr_words: Sequence[str],
                   pairwise: bool = True) -> None:
        """A fixed expression.  Equal-length ones align word by word when
        ``pairwise``; otherwise every English word aligns to every French one."""
        en, fw, fs = self.en, self.fw, self.fs
        base = len(en)
        en.extend(en_words)
        if len(en_words) == 1 or pairwise and len(en_words) == len(fr_words):
            for k, w in enumerate(fr_words):
                fw.append(w)
                fs.append(base if len(en_words) == 1 else base + k)
        else:
            idx = tuple(range(base, base + len(en_words)))
            for w in fr_words:
                self.fr_multi(w, idx)

    def predicate(self, fem: bool, plural: bool, cat: str, budget: int, depth: int) -> None:
        """Copula: "is/are ADJ [and ADJ]" agreeing with the subject, or "is/are PP"."""
        rand, en, fw, fs = self.rand, self.en, self.fw, self.fs
        start = v = len(en)
        en.append("are" if plural else "is")
        r = rand()
        if r < 0.11 and budget >= 4:
            en.append("not" if r < 0.08 else "never")
            fw.append("ne")
            fs.append(v + 1)
            self.fr_start("sont" if plural else "est", v)
            fw.append("pas" if r < 0.08 else "jamais")
            fs.append(v + 1)
        else:
            fw.append("sont" if plural else "est")
            fs.append(v)
            if r < 0.19 and budget >= 4:
                adv_en, adv_fr = PRE_ADVERBS[int(rand() * len(PRE_ADVERBS))]
                fs.append(len(en))
                en.append(adv_en)
                fw.append(adv_fr)
        left = budget - (len(en) - start)
        if left >= 3 and depth < _MAX_DEPTH and rand() < 0.35:
            self.prepositional_phrase(left, depth + 1, LOCATIVE_PREPOSITIONS)
            return
        pool = ADJS_BY_CAT[cat]
        form = (3 if plural else 1) + (1 if fem else 0)
        first = pool[int(rand() * len(pool))]
        a = len(en)
        en.append(first[0])
        fw.append(first[form])
        fs.append(a)
        if left >= 3 and rand() < 0.25:
            second = pool[int(rand() * len(pool))]
            if second is not first:
                en.append("and")
                en.append(second[0])
                fw.append("et")
                fw.append(second[form])
                fs.append(a + 1)
                fs.append(a + 2)

    def clause(self, budget: int, depth: int) -> None:
        rand, en = self.rand, self.en
        start = len(en)
        if budget >= 3 and rand() < 0.14:
            extra = budget - 3
            sb = 2 + (int(rand() * (extra + 1)) if extra > 0 and rand() < 0.5 else 0)
            fem, plural, cat = self.noun_phrase(sb, ANY, depth)
            self.predicate(fem, plural, cat, budget - (len(en) - start), depth)
            return
        verb = VERBS[int(rand() * len(VERBS))]
        if verb.min_cost + 2 > budget:
            verb = INTRANSITIVE[int(rand() * len(INTRANSITIVE))]
        extra = budget - verb.min_cost - 2
        if extra >= 5 and rand() < 0.07:
            # Coordinated subject: French verb goes plural, and masculine
            # unless both conjuncts are feminine.
            half = int(rand() * ((extra - 1) // 2 + 1))
            self.noun_phrase(2 + half // 2, verb.subjects, depth + 1)
            self.fs.append(len(en))
            en.append("and")
            self.fw.append("et")
            self.noun_phrase(2 + half - half // 2, verb.subjects, depth + 1)
            plural = True
        else:
            if extra > 0 and rand() < 0.35:
                share = int(rand() * (extra + 1))
            else:
                share = int(rand() * (extra // 3 + 1)) if extra >= 3 else 0
            plural = self.noun_phrase(2 + share, verb.subjects, depth)[1]
        self.verb_group(verb, plural, budget - (len(en) - start), depth)

    def sentence(self, target: int) -> None:
        rng, rand, en, fw, fs = self.rng, self.rand, self.en, self.fw, self.fs
        limit = target - 1  # the final "."
        if limit >= 14 and rand() < 0.12:
            word, fr_words = SUBORDINATORS[int(rand() * len(SUBORDINATORS))]
            self.emit_fixed((word,), fr_words)
            self.clause(_randint(rng, 3, min(15, limit - 10)), 1)
            fs.append(len(en))
            en.append(",")
            fw.append(",")
        left = limit - len(en)
        self.clause(left if left <= 30 else _randint(rng, 12, 30), 0)
        while True:
            left = limit - len(en)
            if left < 5:
                break
            r = rand()
            if r < 0.55:
                c = len(en)
                en.append(",")
                en.append("and" if r < 0.4 else "but")
                fw.append(",")
                fw.append("et" if r < 0.4 else "mais")
                fs.append(c)
                fs.append(c + 1)
            else:
                word, fr_words = SUBORDINATORS[int(rand() * len(SUBORDINATORS))]
                self.emit_fixed((word,), fr_words)
            left = limit - len(en)
            self.clause(left if left <= 32 else _randint(rng, 10, 30), 1)
        fs.append(len(en))
        en.append(".")
        fw.append(".")

    def finish(self, capitalize: bool) -> SentencePair:
        en, fw = self.en, self.fw
        if capitalize and en:
            en[0] = en[0][:1].upper() + en[0][1:]
            fw[0] = fw[0][:1].upper() + fw[0][1:]
        links = list(zip(self.fs, range(len(fw))))
        if self.fx:
            links += self.fx
        links.sort()
        return SentencePair(tuple(en), tuple(fw), tuple(links))


def generate_pair(rng: random.Random, target_length: int | None = None, *,
                  max_source_tokens: int | None = None) -> SentencePair:
    """One sentence pair; its source length lands within a few tokens of
    ``target_length`` (drawn from the built-in length distribution if None).
    """
    if target_length is None:
        target_length = _draw_target_length(rng)
    if max_source_tokens is not None:
        # Leave room for the small overshoot of the budgeted grammar.
        target_length = min(target_length, max_source_tokens - 4)
    gen = _Generator(rng)
    gen.sentence(max(4, target_length))
    return gen.finish(capitalize=True)


def noun_phrase_pair(det: str, noun: str, adjectives: Sequence[str] = (),
                     plural: bool = False, prep: str | None = None) -> SentencePair:
    """A single noun phrase, for tests and inspection.

    ``det`` is an English determiner ("the", "a", "some", "this", "these",
    "his", "their", "two", "every", ...; "" for a bare plural), ``noun`` an
    English singular noun, ``adjectives`` English adjectives in the order
    given, ``prep`` an optional English preposition ("of", "to", "from",
    "near", "in front of", ...).  No capitalization, no final period.
    """
    det_keys = {"the": ("the", None), "a": ("a", False), "an": ("a", False),
                "some": ("a", True), "this": ("this", False), "these": ("this", True),
                "his": ("his", None), "her": ("her", None), "its": ("its", None),
                "their": ("their", None), "two": ("two", True), "three": ("three", True),
                "several": ("several", True), "every": ("every", False), "": ("bare", True)}
    key, fixed = det_keys[det]
    if fixed is not None:
        plural = fixed
    nouns = {n[0]: n for n in NOUN_ROWS}
    adjs = {a[0].lower(): a for a in ADJECTIVES}
    gen = _Generator(random.Random(0))
    if prep is not None:
        words = tuple(prep.split())
        simple = {("of",): ("de",), ("to",): ("à",), ("from",): ("de",), ("about",): ("de",)}
        fr_words = simple.get(words) or next(p[1] for p in PREPOSITIONS if p[0] == words)
        gen.emit_fixed(words, fr_words, pairwise=False)
    gen.noun_core(nouns[noun], plural, key, [adjs[a.lower()] for a in adjectives])
    return gen.finish(capitalize=False)

