"""Constraints: phrases the output must include or avoid and a prefix it must start with,
in the compiled search (keras_nmt.search.constrained) and through the Translator
(keras_nmt.decoding.constraints), on tiny random models whose distributions are peaked."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt import search
from keras_nmt.core.constants import EOS_ID, UNK, UNK_ID
from keras_nmt.decoding.constraints import (
    Encoder, Glossary, LineConstraints, Phrase, SentenceConstraints, assign, find, padded_arrays,
    parse_constraints, read_constraints, read_output,
)
from keras_nmt.core.errors import ConstraintError
from keras_nmt.search import constrained
from keras_nmt.search.constrained import Constraints
from keras_nmt.decoding.keras_translator import Translator
from support import SOURCES, build_model, peaked_weights_run

VOCAB = 60


@pytest.fixture(scope="module")
def model():
    return build_model("search50", seed=1, tgt_vocab_size=VOCAB)


def rules(include=(), avoid=(), prefix=(), batch=len(SOURCES)) -> Constraints:
    """The same constraints for every sentence of the batch."""
    sentence = SentenceConstraints(tuple(Phrase(("x",) * len(p), tuple(p)) for p in include),
                                   tuple(Phrase(("x",) * len(p), tuple(p)) for p in avoid),
                                   Phrase(("x",) * len(prefix), tuple(prefix)))
    return Constraints(*padded_arrays([sentence] * batch))


def contains(row, phrase) -> bool:
    row = list(row)
    return any(row[i : i + len(phrase)] == list(phrase) for i in range(len(row) - len(phrase) + 1))


def outputs(out, n=0):
    """Each sentence's hypothesis n as a list of ids, EOS excluded."""
    ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
    return [list(ids[b, n, : lengths[b, n] - 1]) for b in range(len(ids))]


def absent_phrase(plain, length):
    """A phrase of ``length`` ids (no reserved ones) that no plain output holds."""
    rng = np.random.default_rng(length)
    while True:
        phrase = [int(x) for x in rng.integers(4, VOCAB, length)]
        if not any(contains(row, phrase) for row in plain):
            return phrase


# 1. The search.

@pytest.mark.parametrize("beam", [1, 5])
def test_phrases_the_plain_output_lacks_appear(model, beam):
    source = tf.constant(SOURCES, tf.int32)
    plain = outputs(search.beam_search(model, source, beam))
    first, second = absent_phrase(plain, 2), absent_phrase(plain, 1)
    out = search.beam_search(model, source, beam, nbest=1,
                             constraints=rules(include=[first, second]))
    for row in outputs(out):
        assert contains(row, first) and contains(row, second)
    assert (out["unmet"].numpy() == 0).all()
    # The scores are the hypotheses' own, without the ranking's penalty.
    lengths = out["lengths"].numpy().astype(np.float32)
    np.testing.assert_allclose(out["scores"].numpy(), out["log_probs"].numpy() / lengths,
                               rtol=1e-6)


def test_an_avoided_word_disappears_and_an_avoided_pair_never_occurs(model):
    source = tf.constant(SOURCES, tf.int32)
    plain = outputs(search.beam_search(model, source, 5))
    word = plain[0][0]
    pair = plain[2][:2]
    assert contains(plain[0], [word]) and contains(plain[2], pair)
    out = outputs(search.beam_search(model, source, 5, constraints=rules(avoid=[[word], pair])))
    for row in out:
        assert word not in row and not contains(row, pair)


def test_the_output_starts_with_the_prefix_and_its_score_covers_it(model):
    source = tf.constant(SOURCES, tf.int32)
    prefix = [30, 31, 32]
    out = search.beam_search(model, source, 4, nbest=2, constraints=rules(prefix=prefix))
    for n in range(2):
        for row in outputs(out, n):
            assert row[:3] == prefix
    # The log-probability is the whole output's: force-decoding it gives the same sum.
    ids = out["ids"].numpy()[:, 0]
    target_in = np.concatenate([np.full((len(ids), 1), 2, np.int32), ids[:, :-1]], axis=1)
    logits = model.forced(tf.constant(SOURCES, tf.int32), tf.constant(target_in))[0]
    logprobs = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()
    lengths = out["lengths"].numpy()[:, 0]
    for b in range(len(ids)):
        total = sum(logprobs[b, t, ids[b, t]] for t in range(lengths[b]))
        assert out["log_probs"].numpy()[b, 0] == pytest.approx(total, abs=1e-4)


@pytest.mark.parametrize("compact", [True, False])
def test_a_greedy_completion_of_the_greedy_output_s_own_start_is_that_output(model, compact):
    # The prefix is decoded before the beam loop, once per sentence: from the start of the
    # plain greedy output (each sentence cut elsewhere, none at all for one), greedy search
    # must give back that output with its score, attention and token log-probabilities.
    source = tf.constant(SOURCES, tf.int32)
    kwargs = dict(compact=compact, token_logprobs=True, alpha=0.6)
    plain = search.beam_search(model, source, 1, **kwargs)
    cuts = [(b * 3) % (plain["lengths"].numpy()[b, 0]) for b in range(len(SOURCES))]
    assert 0 in cuts and max(cuts) >= 3
    prefixes = [Phrase(("x",) * cut, tuple(int(i) for i in plain["ids"].numpy()[b, 0, :cut]))
                for b, cut in enumerate(cuts)]
    completed = search.beam_search(model, source, 1, constraints=Constraints(*padded_arrays(
        [SentenceConstraints((), (), prefix) for prefix in prefixes])), **kwargs)
    np.testing.assert_array_equal(completed["ids"], plain["ids"])
    np.testing.assert_array_equal(completed["lengths"], plain["lengths"])
    for key in ("scores", "log_probs", "attention", "token_logprobs"):
        np.testing.assert_allclose(completed[key], plain[key], atol=1e-5, err_msg=key)


@pytest.mark.parametrize("compact", [True, False])
def test_a_prefix_alone_takes_the_plain_steps_with_the_same_result(model, compact,
                                                                   monkeypatch):
    # Without a phrase to include or avoid, the beam after the prefix runs the plain
    # search's steps (no banks, no matches): the same hypotheses as the constrained
    # steps give, here made to run by avoiding UNK, which forbid_unk bans anyway.
    source = tf.constant(SOURCES, tf.int32)
    prefix = [30, 31]
    kwargs = dict(nbest=2, compact=compact, forbid_unk=True, token_logprobs=True, alpha=0.6)
    banked = search.beam_search(model, source, 4, constraints=rules(avoid=[[UNK_ID]],
                                                                    prefix=prefix), **kwargs)

    def no_banks(*args):
        raise AssertionError("a prefix alone ran the constrained steps")

    monkeypatch.setattr(constrained, "bank_select", no_banks)  # eager: only the branch taken runs
    alone = search.beam_search(model, source, 4, constraints=rules(prefix=prefix), **kwargs)
    for key in ("ids", "lengths", "unmet"):
        np.testing.assert_array_equal(alone[key], banked[key], err_msg=key)
    assert not alone["unmet"].numpy().any()
    for key in ("scores", "log_probs", "attention", "token_logprobs"):
        np.testing.assert_allclose(alone[key], banked[key], atol=1e-5, err_msg=key)


def test_a_prefix_past_the_length_limit_is_cut_for_the_limit_s_eos(model):
    source = tf.constant(SOURCES, tf.int32)
    prefix = [30, 31, 32, 33, 34]
    out = search.beam_search(model, source, 3, max_length=3, constraints=rules(prefix=prefix))
    assert (out["lengths"].numpy()[:, 0] == 3).all()
    for row in out["ids"].numpy()[:, 0]:
        assert list(row) == [30, 31, EOS_ID]


def test_a_constraint_the_length_limit_keeps_out_is_reported_unmet(model):
    source = tf.constant(SOURCES, tf.int32)
    out = search.beam_search(model, source, 3, max_length=3,
                             constraints=rules(include=[[10, 11], [12, 13]]))
    unmet = out["unmet"].numpy()[:, 0]
    assert (unmet >= 1).all()  # two phrases of two tokens cannot fit in two tokens + EOS
    assert (out["lengths"].numpy()[:, 0] == 3).all()


def test_vocabulary_selection_keeps_the_constraints_words(model):
    table = np.full((12, 4), 4, np.int32)  # every source word selects word 4 only
    shortlist = search.Shortlist(tf.constant(table), 1, 1)
    source = tf.constant(SOURCES, tf.int32)
    phrase = [40, 41]
    out = search.beam_search(model, source, 3, shortlist=shortlist,
                             constraints=rules(include=[phrase]))
    for row in outputs(out):
        assert contains(row, phrase)
        assert set(row) <= {4, 5, 40, 41, UNK_ID}  # the selection, the phrase, reserved


def test_constraints_of_each_sentence_are_its_own(model):
    source = tf.constant(SOURCES[:2], tf.int32)
    first = SentenceConstraints((Phrase(("a",), (20,)),))
    second = SentenceConstraints((), (), Phrase(("b", "c"), (21, 22)))
    out = outputs(search.beam_search(model, source, 3,
                                     constraints=Constraints(*padded_arrays([first, second]))))
    assert 20 in out[0] and out[1][:2] == [21, 22]


def test_a_compact_batch_gives_the_uncompacted_result(model):
    source = tf.constant(SOURCES, tf.int32)
    kwargs = dict(nbest=2, constraints=rules(include=[[20, 21]], avoid=[[22]]))
    a = search.beam_search(model, source, 4, compact=True, **kwargs)
    b = search.beam_search(model, source, 4, compact=False, **kwargs)
    for key in ("ids", "lengths", "unmet"):
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy(), err_msg=key)
    np.testing.assert_allclose(a["scores"].numpy(), b["scores"].numpy(), rtol=1e-5)


def test_matches_overlap_so_no_occurrence_is_missed():
    # Avoiding "7 7 8": after "7 7 7" the next 8 must be banned (a naive matcher that
    # restarts after a mismatch would have lost the overlapping "7 7").
    phrase = Constraints.of(np.zeros((1, 1, 1)), np.array([[[7, 7, 8]]]), np.zeros((1, 1)))
    state = constrained.start_state(phrase)
    for token in (7, 7, 7):
        state = constrained.advance(state, phrase, tf.constant([token]))
    assert constrained.banned_tokens(state, phrase).numpy().tolist() == [[8]]
    state = constrained.advance(state, phrase, tf.constant([5]))
    assert constrained.banned_tokens(state, phrase).numpy().tolist() == [[-1]]
    # To include "7 7 8": met after "7 7 7 8", and the next token offered continues the
    # longest partial match.
    include = Constraints.of(np.array([[[7, 7, 8]]]), np.zeros((1, 1, 1)), np.zeros((1, 1)))
    state = constrained.start_state(include)
    offered = []
    for token in (7, 7, 7, 8):
        offered.append(int(constrained.next_tokens(state, include).numpy()[0, 0]))
        state = constrained.advance(state, include, tf.constant([token]))
    assert offered == [7, 7, 8, 8]
    assert constrained.unmet(state).numpy().tolist() == [0]
    assert constrained.next_tokens(state, include).numpy().tolist() == [[-1]]


def _graph_met(cases):
    """The search's ``met`` [cases, P] after each case's output, fed token by token
    through :func:`constrained.advance` (its prefix's tokens ``in_prefix``)."""
    sentences = [SentenceConstraints(tuple(Phrase(tuple(map(str, p)), tuple(p)) for p in phrases),
                                     (), Phrase(tuple(map(str, prefix)), tuple(prefix)))
                 for phrases, prefix, _ in cases]
    rules_ = Constraints.of(*padded_arrays(sentences))
    state = constrained.start_state(rules_)
    width = max(len(output) for *_, output in cases)
    for t in range(width):
        tokens = tf.constant([output[t] if t < len(output) else 0 for *_, output in cases])
        for in_prefix in (True, False):
            rows = [t < len(prefix) and t < len(output) if in_prefix else
                    len(prefix) <= t < len(output) for _, prefix, output in cases]
            after = constrained.advance(state, rules_, tokens, in_prefix=in_prefix)
            state = tf.nest.map_structure(
                lambda new, old: tf.where(tf.reshape(rows, [-1] + [1] * (new.shape.rank - 1)),
                                          new, old), after, state)
    return state.met.numpy(), sentences


def test_the_search_and_python_agree_on_every_phrase_met():
    # The twins of one rule (issue: an <unk> met every unknown phrase word): 400
    # generated outputs over 4 words and <unk>, with phrases and prefixes that hold them.
    rng = np.random.default_rng(70)
    alphabet = [UNK_ID, 4, 5, 6, 7]
    cases = []
    for _ in range(400):
        phrases = [list(rng.choice(alphabet, rng.integers(1, 4)))
                   for _ in range(rng.integers(1, 4))]
        prefix = list(rng.choice(alphabet, rng.integers(0, 3)))
        output = prefix + list(rng.choice(alphabet, rng.integers(0, 9)))
        cases.append((phrases, prefix, output))
    met, sentences = _graph_met(cases)
    words = {UNK_ID: UNK, **{i: str(i) for i in alphabet[1:]}}
    for (phrases, _, output), sentence, row in zip(cases, sentences, met):
        _, unmet = read_output([words[i] for i in output], sentence)
        python = [" ".join(map(str, p)) not in unmet for p in phrases]
        assert row[: len(phrases)].tolist() == python, (phrases, output)
    assert met[:, 0].mean() not in (0.0, 1.0)  # the cases meet phrases and miss them


def test_one_unk_of_the_search_meets_one_unknown_phrase_word(model):
    # Two phrases of one word outside the vocabulary each (both <unk>): met only when the
    # output holds two <unk>, and the search's unmet counts agree with Python's.
    source = tf.constant(SOURCES, tf.int32)
    out = search.beam_search(model, source, 4, constraints=rules(include=[[UNK_ID], [UNK_ID]]))
    found = outputs(out)
    unmet = out["unmet"].numpy()[:, 0]
    sentence = SentenceConstraints((Phrase(("a",), (UNK_ID,)), Phrase(("b",), (UNK_ID,))))
    for row, count in zip(found, unmet):
        _, missed = read_output([UNK if i == UNK_ID else str(i) for i in row], sentence)
        assert len(missed) == count
        assert count > 0 or row.count(UNK_ID) >= 2, row
    assert (unmet == 0).any()


def test_bank_select_takes_the_banks_in_turn_fullest_first():
    lp = tf.constant([[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, constrained.DEAD]])
    banks = tf.constant([[0, 0, 1, 2, 2, 1, 2]], tf.int32)
    values, index = constrained.bank_select(lp, banks, 5)
    # Round 1: bank 2's best (3), bank 1's (2), bank 0's (0); round 2: 4, 5.
    assert index.numpy().tolist() == [[3, 2, 0, 4, 5]]
    np.testing.assert_allclose(values.numpy(), [[-4.0, -3.0, -1.0, -5.0, -6.0]])


def test_the_plain_signature_is_unchanged_and_the_constrained_one_adds_three_inputs(model):
    plain = search.make_translate_fn(model, autograph=False)
    guided = search.make_translate_fn(model, autograph=False, constrained=True)
    names = [spec.name for spec in plain.input_signature]
    assert names == ["source_ids", "beam_size", "alpha", "forbid_unk", "max_length"]
    assert [spec.name for spec in guided.input_signature] == names + [
        "include_ids", "avoid_ids", "prefix_ids"]
    graph = plain.get_concrete_function().graph
    assert not any("unmet" in op.name.lower() for op in graph.get_operations())


@pytest.mark.slow  # two tf2onnx conversions, ~1.5 min
def test_onnx_gives_the_constrained_search_of_tensorflow(model):
    tf2onnx = pytest.importorskip("tf2onnx")
    ort = pytest.importorskip("onnxruntime")
    table = np.random.default_rng(0).integers(4, VOCAB, size=(12, 6)).astype(np.int32)
    arrays = padded_arrays([SentenceConstraints(
        (Phrase(("a", "b"), (50, 51)), Phrase(("c",), (57,))),
        (Phrase(("d", "e"), (16, 19)),), Phrase(("f",), (30,)) if b == 0 else Phrase((), ()))
        for b in range(len(SOURCES))])
    for lexicon in (None, table):
        fn = search.make_translate_fn(model, nbest=2, autograph=False, constrained=True,
                                      lexicon_table=lexicon)
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=fn.input_signature,
                                                 opset=17)
        session = ort.InferenceSession(proto.SerializeToString())
        for beam in (1, 5):
            args = [np.array(SOURCES, np.int32), np.array(beam, np.int32),
                    np.array(1.0, np.float32), np.array(False), np.array(0, np.int32)]
            if lexicon is not None:
                args += [np.array(10, np.int32), np.array(3, np.int32)]
            args += list(arrays)
            feeds = dict(zip([i.name for i in session.get_inputs()], args))
            got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
            want = fn(*[tf.constant(a) for a in args])
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value.numpy(), atol=1e-4, err_msg=key)
            assert (got["unmet"] == 0).all()


# 2. From text: parsing, checking, glossaries, sentences, placeholders.

class Codec:
    """A target codec of whitespace tokens over a fixed vocabulary."""

    def __init__(self, words):
        from keras_nmt.text.vocab import Vocabulary

        self.vocabulary = Vocabulary(["<pad>", "<unk>", "<s>", "</s>", *words])

    def tokenize(self, text):
        return text.lower().split()


def test_parse_constraints_reads_lists_and_objects_and_refuses_the_rest():
    assert parse_constraints(["a b", "c"]) == LineConstraints(("a b", "c"))
    assert parse_constraints({"constraints": ["a"], "avoid": ["b"], "prefix": "c"}) == \
        LineConstraints(("a",), ("b",), "c")
    assert parse_constraints(None) == LineConstraints()
    for bad, says in [("a", "expected a list"), ({"must": ["a"]}, "unknown key"),
                      ({"avoid": "a"}, "list of strings"), ({"prefix": 3}, "string")]:
        with pytest.raises(ConstraintError, match=says):
            parse_constraints(bad)


def test_read_constraints_names_the_bad_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('["a"]\n\n{"avoid": ["b"]}\nnot json\n')
    with pytest.raises(ConstraintError, match=r"c.jsonl:4: not JSON"):
        read_constraints(path)
    path.write_text('["a"]\n\n{"avoid": ["b"]}\n')
    assert read_constraints(path) == [LineConstraints(("a",)), LineConstraints(),
                                      LineConstraints(avoid=("b",))]


@pytest.mark.parametrize("found,says", [
    (LineConstraints(("  ",)), "empty once tokenized"),
    (LineConstraints(tuple(f"w{i}" for i in range(17))), "17 phrases to include"),
    (LineConstraints(("le chat noir",), ("chat",)), "holds 'chat', a phrase to avoid"),
    (LineConstraints(prefix="le chat", avoid=("chat",)), "the prefix holds 'chat'"),
    (LineConstraints((" ".join(["chat"] * 9),)), "need 9 tokens, more than an output"),
    (LineConstraints(("a </s> b",)), "reserved token"),
])
def test_bad_constraints_fail_in_one_line(found, says):
    encoder = Encoder(Codec(["le", "chat", "noir"]), max_output=9)
    with pytest.raises(ConstraintError, match=says) as error:
        encoder.encode(found)
    assert "\n" not in str(error.value)


def test_a_word_outside_the_vocabulary_comes_out_as_given():
    encoder = Encoder(Codec(["le", "chat"]), max_output=20)
    found = encoder.encode(LineConstraints(("le Zorglub",), prefix="Ploum le"))
    assert found.include[0].ids == (4, UNK_ID) and found.prefix.ids == (UNK_ID, 4)
    # The search put <unk> where the phrase's unknown word goes; the phrase fills it.
    output = ("<unk>", "le", "chat", "le", UNK, UNK)
    assert read_output(output, found) == (("ploum", "le", "chat", "le", "zorglub", UNK), ())
    # The prefix's <unk> is the prefix's word: "le Zorglub" is not met by "<unk> le".
    assert read_output(("<unk>", "le", "chat"), found) == (("ploum", "le", "chat"),
                                                          ("le zorglub",))


def test_one_unk_stands_for_one_word_outside_the_vocabulary():
    # "Herr Grzegorczyk besuchte Wroclaw" with "Breslau" and "Danzig" to include: one
    # <unk> met both (and its word was written over whichever <unk> came first).
    encoder = Encoder(Codec(["le", "chat"]), max_output=20)
    found = encoder.encode(LineConstraints(("Breslau", "Danzig")))
    assert read_output(("le", UNK, "chat"), found) == (("le", "breslau", "chat"), ("danzig",))
    assert read_output(("le", UNK, "chat", UNK), found) == (
        ("le", "breslau", "chat", "danzig"), ())
    # A phrase of two unknown words takes two <unk>, and the first phrase the <unk>
    # continues owns it.
    found = encoder.encode(LineConstraints(("le Ploum", "Ploum Zorglub")))
    assert read_output(("le", UNK, UNK, "chat"), found) == (("le", "ploum", UNK, "chat"),
                                                            ("ploum zorglub",))


def test_the_glossary_applies_only_where_its_source_term_occurs(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("# terms\nred car\tvoiture rouge\ndog\tchien\n\n")
    glossary = Glossary.read(path)
    tokenize = str.split
    assert glossary.for_line("the red car".split(), tokenize) == LineConstraints(
        ("voiture rouge",), sources=("red car",))
    assert glossary.for_line("a car that is red".split(), tokenize) == LineConstraints()
    assert glossary.for_line("dog and red car".split(), tokenize).include == (
        "voiture rouge", "chien")
    # Tokenized once for many lines: the same terms, a term that starts after a false
    # start ("red red car") included, in the glossary's order.
    match = glossary.matcher(tokenize)

    def scanned(tokens):  # every term looked for in the line, one by one
        include = [t for s, t in glossary.terms if find(tokens, s.split()) >= 0]
        return LineConstraints(tuple(include), sources=tuple(
            s for s, t in glossary.terms if t in include))

    for line in ("the red car", "a car that is red", "dog and red car", "red red car dog"):
        assert match(line.split()) == scanned(line.split())
    assert match("red red car dog".split()).include == ("voiture rouge", "chien")
    path.write_text("only one field\n")
    with pytest.raises(ConstraintError, match="terms.tsv:1: expected"):
        Glossary.read(path)


def test_a_constraint_lands_in_the_sentence_of_its_source_term():
    encoder = Encoder(Codec(["le", "chien", "chat", "noir"]), max_output=20)
    sentences = ["the cat sleeps .".split(), "a dog runs .".split()]
    found = LineConstraints(("le chien", "chat"), avoid=("noir",), sources=("dog", None))

    def sources_of(ids):  # chat <- cat
        return [{"cat"} if i == 6 else set() for i in ids]

    first, second = assign(found, encoder, sentences, str.split, sources_of)
    assert [p.tokens for p in first.include] == [("chat",)]
    assert [p.tokens for p in second.include] == [("le", "chien")]
    assert first.avoid == second.avoid == (Phrase(("noir",), (7,)),)
    # A phrase no sentence can be told for, or a prefix: the line is translated whole.
    assert assign(LineConstraints(("chat",)), encoder, sentences, str.split, None) is None
    assert assign(LineConstraints(prefix="le"), encoder, sentences, str.split, sources_of) is None
    assert len(assign(LineConstraints(prefix="le"), encoder, sentences[:1], str.split)) == 1


def test_glossary_terms_beyond_a_line_s_room_are_left_out_and_named():
    """A line's own constraints stand as given; the glossary's terms join them while the
    line has room (16 phrases, the output's length, none holding a phrase to avoid), and
    the rest are returned to be reported unmet instead of failing the line."""
    words = [f"w{i}" for i in range(30)]
    encoder = Encoder(Codec(["noir", *words]), max_output=12)
    own = LineConstraints(("w0 w1",), avoid=("noir",))
    terms = LineConstraints(("w2", "w3 noir", "w4 w5 w6", "w7", "w8 w9 w10 w11 w12", "w13"),
                            sources=("a", "b", "c", "d", "e", "f"))
    found, left = encoder.fitting(own, terms)
    # Room for 11 tokens: w0 w1 (2), w2 (1), w4 w5 w6 (3), w7 (1), w13 (1) = 8.
    assert found == LineConstraints(("w0 w1", "w2", "w4 w5 w6", "w7", "w13"), avoid=("noir",),
                                    sources=(None, "a", "c", "d", "f"))
    assert left == ("w3 noir", "w8 w9 w10 w11 w12")
    many = LineConstraints(tuple(words[:20]), sources=tuple("abcdefghijklmnopqrst"))
    found, left = Encoder(Codec(words), max_output=40).fitting(LineConstraints(), many)
    assert found.include == tuple(words[:16]) and left == tuple(words[16:20])


# 3. Through the Translator.

@pytest.fixture(scope="module")
def translator(tiny_run, tmp_path_factory):
    run = peaked_weights_run(tiny_run, tmp_path_factory.mktemp("peaked") / "run")
    return Translator.from_run_dir(run)


def words_absent(translator, text, count):
    vocab = translator.target_vocab.tokens[4:]
    return [w for w in vocab if w not in text.split() and w.isalpha()][:count]


def test_translate_includes_avoids_and_starts_with_the_prefix(translator):
    line = "The man is here."
    [plain] = translator.translate([line], beam_size=4)
    wanted = words_absent(translator, plain.text, 2)
    [out] = translator.translate([line], beam_size=4, constraints=[
        LineConstraints((" ".join(wanted),))])
    assert " ".join(wanted) in out.text and out.unmet == ()
    avoided = plain.tokens[0]
    [out] = translator.translate([line], beam_size=4, constraints=[
        LineConstraints(avoid=(avoided,))])
    assert avoided not in out.tokens
    [out] = translator.translate([line], beam_size=4, constraints=[
        LineConstraints(prefix=" ".join(wanted))])
    assert out.tokens[:2] == tuple(wanted)
    # A word outside the vocabulary: the placeholder comes out as the word given.
    [out] = translator.translate([line], beam_size=4, constraints=[
        LineConstraints(("zorglub",))], unk_replace=True)
    assert "zorglub" in out.tokens and out.unmet == ()


def test_translate_with_a_glossary_and_split_lines(translator, tmp_path):
    first, second = "The man is here.", "A dog sleeps on the table."
    plain = translator.translate([first, second], beam_size=3)
    [term] = words_absent(translator, plain[0].text + " " + plain[1].text, 1)
    source_tokens = translator.source_codec.tokenize(second)
    path = tmp_path / "g.tsv"
    path.write_text(f"{source_tokens[1]}\t{term}\n")
    glossary = Glossary.read(path)
    out = translator.translate([first, second, f"{first} {second}"], beam_size=3,
                               glossary=glossary)
    assert term not in out[0].tokens  # its source term is not in the first line
    assert term in out[1].tokens
    # The split line: the term lands in the second sentence, the first is as before.
    assert len(out[2].sentences) == 2
    assert out[2].sentences[0].text == plain[0].text
    assert term in out[2].sentences[1].tokens


def test_a_line_matching_more_glossary_terms_than_fit_is_translated_with_them_unmet(
        translator, tmp_path):
    """20 terms for one line (16 fit): the job goes on, the line is translated with the
    16 and names the other 4 unmet; the next line is translated as ever (the whole batch
    failed mid-stream on the first such line)."""
    line, other = "A dog sleeps on the table.", "The man is here."
    source_word = translator.source_codec.tokenize(line)[1]
    terms = [w for w in translator.target_vocab.tokens[4:] if w.isalpha()][:20]
    path = tmp_path / "many.tsv"
    path.write_text("".join(f"{source_word}\t{term}\n" for term in terms))
    out = translator.translate([line, other], beam_size=2, glossary=Glossary.read(path))
    assert set(terms[16:]) <= set(out[0].unmet) <= set(terms)
    assert out[1].text == translator.translate([other], beam_size=2)[0].text
    assert out[1].unmet == ()


def test_translate_checks_its_constraints(translator):
    with pytest.raises(ConstraintError, match="empty once tokenized"):
        translator.translate(["A dog."], constraints=[LineConstraints(("",))])
    with pytest.raises(ValueError, match="1 constraints for 2 lines"):
        translator.translate(["A dog.", "A cat."], constraints=[None])
    # An empty line is never decoded: its phrases are all unmet.
    [out] = translator.translate([""], constraints=[LineConstraints(("chien",))])
    assert out.text == "" and out.unmet == ("chien",)


def test_cli_translate_takes_constraints_prefixes_and_a_glossary(cli_runner, tiny_run, tmp_path):
    text = "The man is here.\nA dog.\n"
    constraints = tmp_path / "c.jsonl"
    constraints.write_text(json.dumps({"constraints": ["zorglub"]}) + "\n\n")
    ran = cli_runner("translate", tiny_run, "--constraints", constraints, "--beam", "3",
                     stdin=text)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert "zorglub" in lines[0] and "zorglub" not in lines[1] and len(lines) == 2
    prefixes = tmp_path / "p.txt"
    prefixes.write_text("zorglub ploum\n\n")
    ran = cli_runner("translate", tiny_run, "--prefix", prefixes, "--confidence", stdin=text)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[0])["text"].startswith("zorglub ploum")
    glossary = tmp_path / "g.tsv"
    glossary.write_text("dog\tzorglub\n")
    ran = cli_runner("translate", tiny_run, "--glossary", glossary, stdin=text)
    first, second = ran.stdout.splitlines()
    assert "zorglub" not in first and "zorglub" in second
    constraints.write_text('["a"]\n')
    ran = cli_runner("translate", tiny_run, "--constraints", constraints, stdin=text)
    assert ran.returncode == 2
    assert "the constraints file has 1 line(s), the input more" in ran.stderr
