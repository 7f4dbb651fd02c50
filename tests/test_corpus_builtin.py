"""Tests for the built-in synthetic English-French corpus."""

from __future__ import annotations

import hashlib
import json
import pathlib
import random
import re
import signal
import subprocess
import sys

import pytest

from keras_nmt.corpus import builtin
from keras_nmt.corpus.builtin import (
    BuiltinCorpusSpec,
    SentencePair,
    generate_corpus,
    generate_pair,
    write_corpus,
)
from keras_nmt.corpus.builtin import dictionary, grammar, orthography
from keras_nmt.text.word import detokenize
from support import ROOT, child_env

SMALL = BuiltinCorpusSpec(seed=7, train_size=1000, valid_size=100, test_size=100)
PUNCT = ".,;:!?"
_ELISION_RE = re.compile(r"^((?:l|d|qu|j|n|s|c|lorsqu|jusqu)')(.+)$", re.IGNORECASE)


def _split(raw: str, lang: str) -> list[str]:
    """The project tokenizer's splitting rules, restated independently."""
    tokens: list[str] = []
    for word in raw.split():
        trailing: list[str] = []
        while word and word[-1] in PUNCT:
            trailing.append(word[-1])
            word = word[:-1]
        if word and lang == "fr":
            match = _ELISION_RE.match(word)
            if match:
                tokens.append(match.group(1))
                word = match.group(2)
        if word:
            tokens.append(word)
        tokens.extend(reversed(trailing))
    return tokens


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[SentencePair]]:
    return generate_corpus(SMALL)


@pytest.fixture(scope="module")
def all_pairs(corpus) -> list[SentencePair]:
    return [p for pairs in corpus.values() for p in pairs]


def _links(pair: SentencePair) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    src_to_tgt: dict[int, list[int]] = {}
    tgt_to_src: dict[int, list[int]] = {}
    for i, j in pair.alignment:
        src_to_tgt.setdefault(i, []).append(j)
        tgt_to_src.setdefault(j, []).append(i)
    return src_to_tgt, tgt_to_src


# ----------------------------------------------------------------- tokens/text
def test_detokenize_attaches_punctuation_and_elisions():
    assert detokenize(["L'", "homme", "dort", ",", "et", "l'", "enfant", "rit", "."], "fr") == \
        "L'homme dort, et l'enfant rit."
    assert detokenize(["parce", "qu'", "un", "chat", "dort", "."], "fr") == "parce qu'un chat dort."
    assert detokenize(["The", "man", "sleeps", ",", "but", "a", "dog", "runs", "."], "en") == \
        "The man sleeps, but a dog runs."


def test_round_trip_through_tokenizer_rules(all_pairs):
    for pair in all_pairs:
        assert _split(detokenize(pair.source, "en"), "en") == list(pair.source)
        assert _split(detokenize(pair.target, "fr"), "fr") == list(pair.target)


def test_agrees_with_the_project_tokenizer(all_pairs):
    # The real tokenizer may grow rules beyond the contract; where it exists it
    # must still split this corpus back into exactly its tokens.
    pytest.importorskip("regex")
    tokenizer = pytest.importorskip("keras_nmt.text.word")
    for pair in all_pairs[:500]:
        assert tokenizer.tokenize(detokenize(pair.source, "en"), "en") == list(pair.source)
        assert tokenizer.tokenize(detokenize(pair.target, "fr"), "fr") == list(pair.target)


def test_token_hygiene(all_pairs):
    elisions = set(orthography.ELISION_PREFIXES)
    for pair in all_pairs:
        assert pair.source[-1] == "." and pair.target[-1] == "."
        for tok in pair.source + pair.target:
            assert tok and not any(ch.isspace() for ch in tok)
        assert not any("'" in tok for tok in pair.source)
        for tok in pair.target:
            if "'" in tok:
                assert tok.lower() in elisions, tok
            assert "\u2019" not in tok


def test_unicode_and_vocabulary_sizes(all_pairs):
    src_vocab = {t for p in all_pairs for t in p.source}
    tgt_vocab = {t for p in all_pairs for t in p.target}
    assert len(src_vocab) < 600 and len(tgt_vocab) < 1000
    for word in ("économique", "européenne", "élève", "hôpital", "l'", "sœur"):
        assert word in tgt_vocab, word


# ----------------------------------------------------------------- alignment
def test_alignment_in_range_sorted_and_covering(all_pairs):
    for pair in all_pairs:
        links = pair.alignment
        assert list(links) == sorted(set(links))
        assert all(0 <= i < len(pair.source) and 0 <= j < len(pair.target) for i, j in links)
        assert {i for i, _ in links} == set(range(len(pair.source)))
        assert {j for _, j in links} == set(range(len(pair.target)))
        # The final periods align to each other.
        assert (len(pair.source) - 1, len(pair.target) - 1) in links


def test_pharaoh_format():
    pair = SentencePair(("a", "b"), ("x", "y", "z"), ((0, 0), (1, 1), (1, 2)))
    assert pair.pharaoh() == "0-0 1-1 1-2"


# ----------------------------------------------------------------- grammar
def _np(*args, **kwargs) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """(source, target, alignment) of one noun phrase, as lists."""
    pair = grammar.noun_phrase_pair(*args, **kwargs)
    return list(pair.source), list(pair.target), list(pair.alignment)


def test_definite_article_gender_number_and_elision():
    assert _np("the", "man")[1] == ["l'", "homme"]          # vowel-initial masculine
    assert _np("the", "hospital")[1] == ["l'", "hôpital"]   # mute h
    assert _np("the", "school")[1] == ["l'", "école"]       # vowel-initial feminine
    assert _np("the", "house")[1] == ["la", "maison"]
    assert _np("the", "garden")[1] == ["le", "jardin"]
    assert _np("the", "man", plural=True)[:2] == (["the", "men"], ["les", "hommes"])
    assert _np("the", "house", plural=True)[1] == ["les", "maisons"]


def test_other_determiners_agree_with_the_noun():
    assert _np("a", "garden")[1] == ["un", "jardin"]
    assert _np("a", "house")[1] == ["une", "maison"]
    assert _np("a", "idea")[:2] == (["an", "idea"], ["une", "idée"])
    assert _np("a", "university")[0] == ["a", "university"]
    assert _np("a", "car", ["European"])[0] == ["a", "European", "car"]
    assert _np("a", "car", ["interesting"])[0][0] == "an"
    assert _np("this", "garden")[1] == ["ce", "jardin"]
    assert _np("this", "hospital")[1] == ["cet", "hôpital"]
    assert _np("this", "house")[1] == ["cette", "maison"]
    assert _np("these", "house")[:2] == (["these", "houses"], ["ces", "maisons"])
    assert _np("his", "school")[1] == ["son", "école"]      # "sa" -> "son" before a vowel
    assert _np("her", "house")[1] == ["sa", "maison"]
    assert _np("their", "house", plural=True)[1] == ["leurs", "maisons"]
    assert _np("", "book")[:2] == (["books"], ["des", "livres"])


def test_adjectives_follow_the_noun_in_reverse_order_and_agree():
    src, tgt, links = _np("the", "area", ["European", "economic"])
    assert src == ["the", "European", "economic", "area"]
    assert tgt == ["la", "zone", "économique", "européenne"]
    assert links == [(0, 0), (1, 3), (2, 2), (3, 1)]
    assert _np("the", "house", ["white"])[1] == ["la", "maison", "blanche"]
    assert _np("the", "house", ["white"], plural=True)[1] == ["les", "maisons", "blanches"]
    assert _np("the", "car", ["French"], plural=True)[1] == \
        ["les", "voitures", "françaises"]
    assert _np("the", "man", ["happy"], plural=True)[1] == ["les", "hommes", "heureux"]
    assert _np("the", "woman", ["happy"])[1] == ["la", "femme", "heureuse"]
    assert _np("a", "policy", ["national"])[1] == \
        ["une", "politique", "nationale"]


def test_preposition_contractions_and_many_to_one():
    src, tgt, links = _np("the", "park", prep="of")
    assert tgt == ["du", "parc"] and links == [(0, 0), (1, 0), (2, 1)]
    assert _np("the", "man", plural=True, prep="of")[1] == ["des", "hommes"]
    assert _np("the", "house", prep="of")[1] == ["de", "la", "maison"]
    assert _np("the", "school", prep="of")[1] == ["de", "l'", "école"]
    assert _np("a", "school", prep="of")[1] == ["d'", "une", "école"]
    assert _np("some", "hospital", prep="of")[1] == ["d'", "hôpitaux"]
    assert _np("the", "king", prep="to")[1] == ["au", "roi"]
    assert _np("the", "king", plural=True, prep="to")[1] == ["aux", "rois"]
    assert _np("the", "queen", prep="to")[1] == ["à", "la", "reine"]
    assert _np("the", "uncle", prep="to")[1] == ["à", "l'", "oncle"]
    src, tgt, links = _np("the", "park", prep="near")
    assert tgt == ["près", "du", "parc"]
    assert links == [(0, 0), (0, 1), (1, 1), (2, 2)]
    src, tgt, links = _np("the", "church", prep="in front of")
    assert src == ["in", "front", "of", "the", "church"] and tgt == ["devant", "l'", "église"]
    assert {(0, 0), (1, 0), (2, 0)} <= set(links)


def test_corpus_contractions_align_to_the_and_a_preposition(all_pairs):
    seen = set()
    for pair in all_pairs:
        _, tgt_to_src = _links(pair)
        for j, tok in enumerate(pair.target):
            if tok.lower() in ("du", "au", "aux"):
                sources = [pair.source[i].lower() for i in tgt_to_src[j]]
                assert len(sources) == 2 and "the" in sources, (tok, sources)
                seen.add(tok.lower())
    assert seen == {"du", "au", "aux"}


def test_corpus_adjective_forms_and_reverse_order(all_pairs):
    forms = {a[0]: set(a[1:5]) for a in dictionary.ADJECTIVES}
    reversed_pairs = 0
    for pair in all_pairs:
        src_to_tgt, _ = _links(pair)
        for i, tok in enumerate(pair.source):
            if tok in forms:
                assert [pair.target[j] for j in src_to_tgt[i]][0] in forms[tok]
        for i in range(len(pair.source) - 2):
            a1, a2, noun = pair.source[i:i + 3]
            if a1 in forms and a2 in forms and noun not in forms:
                j1, j2, jn = src_to_tgt[i][0], src_to_tgt[i + 1][0], src_to_tgt[i + 2][0]
                assert jn < j2 < j1, pair
                reversed_pairs += 1
    assert reversed_pairs > 10


def test_corpus_subject_verb_agreement(all_pairs):
    singular = {}
    plural = {}
    for v in dictionary.VERBS:
        singular.setdefault(v.en_sg, set()).add(v.fr_sg[0])
        plural.setdefault(v.en_base, set()).add(v.fr_pl[0])
    singular["is"], plural["are"] = {"est"}, {"sont"}
    checked = 0
    for pair in all_pairs:
        src_to_tgt, _ = _links(pair)
        for i, tok in enumerate(pair.source):
            aligned = {pair.target[j].lower() for j in src_to_tgt[i]}
            if tok in singular:
                assert aligned & singular[tok], (tok, aligned)
                checked += 1
            elif tok in ("do",):  # "do not VERB": plural subject
                assert any(w in aligned for forms in plural.values() for w in forms)
    assert checked > 500


def test_clause_level_phenomena_occur(all_pairs):
    target_words = {t.lower() for p in all_pairs for t in p.target}
    source_words = {t.lower() for p in all_pairs for t in p.source}
    for word in ("qui", "que", "qu'", "et", "mais", "ne", "n'", "pas", "jamais", "près",
                 "lorsque", "lorsqu'", "parce", "d'", "cet", "cette", ","):
        assert word in target_words, word
    for word in ("who", "which", "that", "and", "but", "not", "does", "near", "because"):
        assert word in source_words, word


# ----------------------------------------------------------------- lengths
def test_length_distribution():
    rng = random.Random(2024)
    lengths = [len(generate_pair(rng).source) for _ in range(3000)]
    over_30 = sum(n > 30 for n in lengths) / len(lengths)
    over_50 = sum(n > 50 for n in lengths) / len(lengths)
    assert 0.35 <= over_30 <= 0.45, over_30
    assert over_50 >= 0.10, over_50
    assert max(lengths) >= 80 and max(lengths) <= 110
    assert min(lengths) >= 4
    assert sum(n <= 12 for n in lengths) / len(lengths) > 0.2


def test_target_length_is_followed():
    rng = random.Random(5)
    for target in (4, 8, 15, 25, 40, 60, 90):
        for _ in range(20):
            n = len(generate_pair(rng, target).source)
            assert target - 5 <= n <= target + 8, (target, n)


# ----------------------------------------------------------------- corpus
def test_generate_corpus_sizes_and_determinism(corpus):
    assert list(corpus) == ["train", "valid", "test"]
    assert [len(corpus[s]) for s in ("train", "valid", "test")] == [1000, 100, 100]
    spec = BuiltinCorpusSpec(seed=7, train_size=300, valid_size=20, test_size=20)
    assert generate_corpus(spec) == generate_corpus(spec)
    other = generate_corpus(BuiltinCorpusSpec(seed=8, train_size=300, valid_size=20, test_size=20))
    assert other["train"] != generate_corpus(spec)["train"]


def test_evaluation_splits_do_not_depend_on_train_size(corpus):
    fewer = generate_corpus(BuiltinCorpusSpec(seed=7, train_size=10, valid_size=100, test_size=100))
    assert fewer["test"] == corpus["test"] and fewer["valid"] == corpus["valid"]
    assert fewer["train"] == corpus["train"][:10]


def test_splits_disjoint_and_without_duplicates(corpus):
    for side in ("source", "target"):
        sets = {}
        for split, pairs in corpus.items():
            sentences = [getattr(p, side) for p in pairs]
            assert len(set(sentences)) == len(sentences), (split, side)
            sets[split] = set(sentences)
        assert not sets["train"] & sets["valid"]
        assert not sets["train"] & sets["test"]
        assert not sets["valid"] & sets["test"]


def test_spec_validation():
    with pytest.raises(ValueError):
        BuiltinCorpusSpec(train_size=-1)
    with pytest.raises(ValueError):
        BuiltinCorpusSpec(max_source_tokens=3)


def test_max_source_tokens_is_respected():
    spec = BuiltinCorpusSpec(seed=3, train_size=300, valid_size=20, test_size=20,
                             max_source_tokens=30)
    assert max(len(p.source) for pairs in generate_corpus(spec).values() for p in pairs) <= 30


# ----------------------------------------------------------------- files
TINY_SPEC = BuiltinCorpusSpec(seed=11, train_size=200, valid_size=30, test_size=40)


def _digest(directory: pathlib.Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def test_write_corpus_files_and_metadata(tmp_path):
    out = write_corpus(tmp_path / "corpus", TINY_SPEC)
    assert out == tmp_path / "corpus"
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(list(builtin.CORPUS_FILES) + ["builtin.json"])
    assert len(builtin.CORPUS_FILES) == 9
    corpus = generate_corpus(TINY_SPEC)
    for split, size in (("train", 200), ("valid", 30), ("test", 40)):
        texts = {}
        for ext in ("en", "fr", "align"):
            raw = (out / f"{split}.{ext}").read_bytes()
            assert b"\r" not in raw and raw.endswith(b"\n")
            texts[ext] = raw.decode("utf-8").split("\n")[:-1]
            assert len(texts[ext]) == size
        for k, pair in enumerate(corpus[split]):
            assert _split(texts["en"][k], "en") == list(pair.source)
            assert _split(texts["fr"][k], "fr") == list(pair.target)
            links = [tuple(map(int, item.split("-"))) for item in texts["align"][k].split()]
            assert tuple(links) == pair.alignment
    meta = json.loads((out / "builtin.json").read_text(encoding="utf-8"))
    assert meta["spec"] == {"seed": 11, "train_size": 200, "valid_size": 30,
                            "test_size": 40, "max_source_tokens": 100}
    stats = meta["stats"]
    assert stats["train"]["pairs"] == 200 and stats["test"]["pairs"] == 40
    assert stats["train"]["max_source_tokens"] == max(len(p.source) for p in corpus["train"])
    assert 0 < stats["source_vocabulary"] < stats["target_vocabulary"] < 1000


def test_write_corpus_byte_identical_and_seed_sensitive(tmp_path):
    a = _digest(write_corpus(tmp_path / "a", TINY_SPEC))
    b = _digest(write_corpus(tmp_path / "b", TINY_SPEC))
    assert a == b
    c = _digest(write_corpus(tmp_path / "c", BuiltinCorpusSpec(seed=12, train_size=200,
                                                                valid_size=30, test_size=40)))
    assert c["train.en"] != a["train.en"] and c["builtin.json"] != a["builtin.json"]


def test_output_identical_across_processes(tmp_path):
    code = ("import hashlib; from keras_nmt.corpus.builtin import *; "
            "c = generate_corpus(BuiltinCorpusSpec("
            "seed=11, train_size=200, valid_size=30, test_size=40)); "
            "print(hashlib.sha256(repr(c).encode()).hexdigest())")
    digests = set()
    for hash_seed in ("1", "2"):
        env = child_env(PYTHONHASHSEED=hash_seed)
        result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                                capture_output=True, text=True, check=True)
        digests.add(result.stdout.strip())
    digests.add(hashlib.sha256(repr(generate_corpus(TINY_SPEC)).encode()).hexdigest())
    assert len(digests) == 1


def test_write_corpus_killed_while_writing_is_rewritten_whole(tmp_path):
    target = tmp_path / "corpus"
    code = ("import sys; from keras_nmt.corpus.builtin import *; "
            "write_corpus(sys.argv[1], BuiltinCorpusSpec("
            "seed=11, train_size=200, valid_size=30, test_size=40))")
    # Killed once valid.fr's new content is on disk under its temporary name.
    killed = subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT,
                            env=child_env(KERAS_NMT_TEST_HOOK="write:valid.fr"))
    assert killed.returncode == -signal.SIGKILL
    assert not (target / "valid.fr").exists() and not (target / "builtin.json").exists()
    leftovers = [p.name for p in target.iterdir() if p.name.startswith(".valid.fr.")]
    assert len(leftovers) == 1
    write_corpus(target, TINY_SPEC)
    fresh = _digest(write_corpus(tmp_path / "fresh", TINY_SPEC))
    assert {name: digest for name, digest in _digest(target).items()
            if name not in leftovers} == fresh


def test_write_corpus_is_idempotent_and_regenerates_on_new_spec(tmp_path):
    target = tmp_path / "corpus"
    write_corpus(target, TINY_SPEC)
    before = {p.name: p.stat().st_ino for p in target.iterdir()}
    mtimes = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    assert write_corpus(target, TINY_SPEC) == target
    assert {p.name: p.stat().st_ino for p in target.iterdir()} == before
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir()} == mtimes

    other = BuiltinCorpusSpec(seed=11, train_size=50, valid_size=5, test_size=5)
    (target / "unrelated.txt").write_text("keep me")
    write_corpus(target, other)
    meta = json.loads((target / "builtin.json").read_text())
    assert meta["spec"]["train_size"] == 50
    assert len((target / "train.en").read_text(encoding="utf-8").splitlines()) == 50
    assert (target / "unrelated.txt").read_text() == "keep me"
    assert not [p for p in target.iterdir() if p.name.endswith(".tmp")]


def test_write_corpus_survives_simulated_crashes(tmp_path):
    target = tmp_path / "corpus"
    # A crash between two files leaves some data files but no metadata.
    target.mkdir()
    (target / "train.en").write_text("stale\n")
    write_corpus(target, TINY_SPEC)
    assert _digest(target) == _digest(write_corpus(tmp_path / "fresh", TINY_SPEC))

    # A truncated data file under valid metadata is detected and rewritten.
    with open(target / "valid.fr", "r+b") as f:
        f.truncate(10)
    write_corpus(target, TINY_SPEC)
    assert _digest(target) == _digest(tmp_path / "fresh")
    # A corrupt metadata file is treated as no corpus.
    (target / "builtin.json").write_text("{not json")
    write_corpus(target, TINY_SPEC)
    assert _digest(target) == _digest(tmp_path / "fresh")
