"""The training split prepared once as token ids: the same ids as the Python mirror,
every epoch a permutation at any size, exact resume, atomic writes, moved runs, and the
sampled copies of subword regularisation."""

import io
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from support import TINY_SETTINGS
from keras_nmt.data import pipelines as data, prepared
from keras_nmt.runner import experiment
from keras_nmt.corpus.readers import ParallelFiles
from keras_nmt.core.errors import CorpusError, PreparedError
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.text import codecs, word
from keras_nmt.text.sentencepiece import (
    SegmentationSampler, SentencePieceCodec, train_sentencepiece,
)
from keras_nmt.runner.train_options import TrainOptions
from keras_nmt.text.vocab import Vocabulary

MAX_LEN = 12


def _prepare(files, directory, kind="word", models=None, vocab_size=40, max_len=MAX_LEN,
             sampling=None):
    models = models or {}

    def vocabularies(stats):
        if kind == codecs.SENTENCEPIECE:
            return tuple(SentencePieceCodec(models[lang], lang).vocabulary for lang in ("en", "fr"))
        return (Vocabulary.from_counts(stats.source_counts, vocab_size),
                Vocabulary.from_counts(stats.target_counts, vocab_size))

    tokenizers = tuple(codecs.graph_tokenizer(kind, lang, models.get(lang)) for lang in ("en", "fr"))
    return prepared.prepare_split(files, directory, ("en", "fr"), tokenizers, max_len, vocabularies,
                                  sampling=sampling)


def _kept(files, codecs_, max_len=MAX_LEN):
    """The pairs the Python mirror keeps, as its ids (no EOS), in file order."""
    kept = []
    for source, target in files.pairs():
        ids = [codec.encode(line) for codec, line in zip(codecs_, (source, target))]
        if all(0 < len(side) <= max_len for side in ids):
            kept.append(tuple(ids))
    return kept


@pytest.fixture(scope="module")
def text_corpus(tmp_path_factory):
    """300 pairs of varied text: punctuation, elision, numbers, accents, CRLF, empty
    and over-long lines."""
    rng = np.random.default_rng(4)
    words_en = ["the", "cat", "Mr.", "Smith", "isn't", "here", "3.5", "U.S.", "(big)", "naïve",
                "well,", "\u00a0", "emoji🙂", "don't", "x", "42%"]
    words_fr = ["l'homme", "aujourd'hui", "est", "là", "«", "oui", "»", "M.", "Dupont", "1,5",
                "?", "c'est", "très", "bien", "!", "qu'on"]
    directory = tmp_path_factory.mktemp("text")
    lines = {"en": [], "fr": []}
    for i in range(300):
        for lang, words in (("en", words_en), ("fr", words_fr)):
            n = 0 if i % 37 == 5 and lang == "fr" else int(rng.integers(1, 9))
            lines[lang].append(" ".join(rng.choice(words, n)))
    for lang, text in lines.items():
        (directory / f"train.{lang}").write_bytes("\r\n".join(text).encode() + b"\r\n")
    return ParallelFiles(directory / "train.en", directory / "train.fr")


def test_the_prepared_ids_are_the_python_mirrors(text_corpus, tmp_path):
    stats, (source_vocab, target_vocab) = _prepare(text_corpus, tmp_path / "p", vocab_size=20)
    mirror = (word.WordCodec(source_vocab, "en"), word.WordCodec(target_vocab, "fr"))
    kept = _kept(text_corpus, mirror)
    split = prepared.PreparedSplit(tmp_path / "p", "en", "fr")
    assert split.count == stats.kept == len(kept) and 200 < stats.kept < 290
    assert stats.pairs == 300 and stats.empty >= 9  # the French side of every 37th pair at least
    assert [split.pair(i) for i in range(split.count)] == kept
    assert 1 in np.concatenate(split.gather(np.arange(split.count))[::2])  # some UNKs
    # The counts are the Python scan's, so the vocabularies are too.
    from keras_nmt.corpus.scan import scan_training_split

    scan = scan_training_split(text_corpus, "en", "fr", MAX_LEN)
    assert scan.summary() == stats.summary()
    assert scan.source_counts == stats.source_counts and scan.target_counts == stats.target_counts
    assert split.info["sides"]["en"]["dtype"] == "<u2"


@pytest.fixture(scope="module")
def text_models(text_corpus):
    """A SentencePiece model of 60 pieces per side of text_corpus."""
    return {lang: train_sentencepiece((pair[side] for pair in text_corpus.pairs()), 60)
            for side, lang in enumerate(("en", "fr"))}


def test_sentencepiece_ids_are_the_python_mirrors(text_corpus, text_models, tmp_path):
    models = text_models
    stats, vocabularies = _prepare(text_corpus, tmp_path / "p", "sentencepiece", models)
    mirror = tuple(SentencePieceCodec(models[lang], lang) for lang in ("en", "fr"))
    split = prepared.PreparedSplit(tmp_path / "p", "en", "fr")
    assert [split.pair(i) for i in range(split.count)] == [
        tuple(p) for p in _kept(text_corpus, mirror)]
    assert sum(stats.source_counts.values()) == stats.source_tokens


def _sampled(text_corpus, models, directory, copies=3, seed=11, alpha=0.1):
    sampling = prepared.Sampling(
        copies=copies, seed=seed,
        resegment=tuple(SegmentationSampler(models[lang], alpha, MAX_LEN) for lang in ("en", "fr")))
    _prepare(text_corpus, directory, "sentencepiece", models, sampling=sampling)
    return prepared.PreparedSplit(directory, "en", "fr")


@pytest.fixture(scope="module")
def sampled_split(text_corpus, text_models, tmp_path_factory):
    """text_corpus prepared with 3 sampled copies (seed 11)."""
    return _sampled(text_corpus, text_models, tmp_path_factory.mktemp("sampled") / "p")


def _rows(split, indices, epochs=None):
    """Pairs by index as (source ids, target ids) lists, from :meth:`gather`."""
    source, source_lengths, target, target_lengths = split.gather(np.asarray(indices), epochs)
    cut = [np.split(ids, np.cumsum(lengths)[:-1]) for ids, lengths in
           ((source, source_lengths), (target, target_lengths))]
    return [(s.tolist(), t.tolist()) for s, t in zip(*cut)]


def test_sampled_copies_are_the_same_sentences_cut_otherwise(sampled_split, text_models):
    split, everything = sampled_split, np.arange(sampled_split.count)
    mirror = [SentencePieceCodec(text_models[lang], lang) for lang in ("en", "fr")]
    best = _rows(split, everything)
    assert best == [split.pair(i) for i in everything]  # no epochs: the best segmentation
    copies = [_rows(split, everything, np.full(split.count, epoch)) for epoch in range(3)]
    for copy in copies:
        changed = 0
        for (best_source, best_target), (source, target) in zip(best, copy):
            for codec, ids, sampled in ((mirror[0], best_source, source), (mirror[1], best_target, target)):
                assert codec.decode(sampled) == codec.decode(ids)  # the same text
                assert 0 < len(sampled) <= MAX_LEN
                changed += sampled != ids
        assert changed > split.count // 4  # 60 pieces cut most sentences many ways
    assert copies[0] != copies[1] != copies[2] != copies[0]
    # Epoch E reads copy E mod 3, whatever the other pairs of the call read.
    assert _rows(split, everything, np.full(split.count, 4)) == copies[1]
    mixed = np.arange(split.count) % 5
    assert _rows(split, everything, mixed) == [copies[e % 3][i] for i, e in enumerate(mixed)]
    assert split.info["samples"]["copies"] == 3
    assert split.info["samples"]["tokens"]["en"][0] > split.info["sides"]["en"]["tokens"]


def test_sampled_copies_are_a_function_of_the_seed(text_corpus, text_models, sampled_split, tmp_path):
    again = _sampled(text_corpus, text_models, tmp_path / "again")
    other = _sampled(text_corpus, text_models, tmp_path / "other", seed=12)
    name = "train.fr.sample1.ids"
    assert (again.directory / name).read_bytes() == (sampled_split.directory / name).read_bytes()
    assert (other.directory / name).read_bytes() != (sampled_split.directory / name).read_bytes()
    (again.directory / "train.fr.sample1.ids").write_bytes(b"\0\0")
    with pytest.raises(PreparedError, match="train.fr.sample1.ids holds 2 bytes, train.json says"):
        prepared.PreparedSplit(again.directory, "en", "fr")
    shutil.copy(sampled_split.directory / name, again.directory / name)
    (again.directory / "train.en.sample2.offsets").unlink()
    with pytest.raises(PreparedError, match="lacks train.en.sample2.offsets, which train.json lists"):
        prepared.PreparedSplit(again.directory, "en", "fr")


def test_a_sampled_copy_keeps_the_best_cut_of_a_sentence_it_would_make_too_long(text_models):
    sampler = SegmentationSampler(text_models["en"], 0.0001, max_len=6)
    codec = SentencePieceCodec(text_models["en"], "en")
    short, long_ = codec.encode("the cat"), codec.encode("the cat isn't here well")
    assert len(short) <= 6 < len(long_)
    draws = sampler([short, long_, [], [1, *short]], [np.random.default_rng(k) for k in range(20)])
    assert all(len(d[0]) <= 6 and codec.decode(d[0]) == codec.decode(short) for d in draws)
    assert {tuple(d[0]) for d in draws} != {tuple(short)}  # alpha near 0: nearly uniform
    assert all(d[1] == long_ and d[2] == [] and d[3] == [1, *short] for d in draws)


def test_each_generator_draws_as_if_it_drew_alone(text_models, text_corpus):
    """Copies are drawn together, a sentence's candidates searched once for all: each
    copy must still be what its generator alone would draw."""
    sampler = SegmentationSampler(text_models["fr"], 0.1, MAX_LEN)
    codec = SentencePieceCodec(text_models["fr"], "fr")
    lines = text_corpus.target.read_text(encoding="utf-8").splitlines()[:40]
    rows = [codec.encode(line)[:MAX_LEN] for line in lines]
    together = sampler(rows, [np.random.default_rng([5, k]) for k in range(3)])
    alone = [sampler(rows, [np.random.default_rng([5, k])])[0] for k in range(3)]
    assert together == alone and together[0] != together[1] != together[2]


def test_the_pipeline_reads_epoch_e_from_copy_e_mod_copies(sampled_split):
    split, window = sampled_split, 64
    indices = np.concatenate(list(data.pair_indices(split.count, 5, window).take(12)
                                  .as_numpy_iterator()))
    epochs = np.arange(len(indices)) // split.count
    assert epochs[-1] >= 3  # four epochs: copy 0 comes back
    expected = _rows(split, indices, epochs)
    read = []
    for source, target in data.prepared_pairs(split, 5, window).take(12):
        read += [(s[:-1].tolist(), t[:-1].tolist()) for s, t in zip(source.numpy(), target.numpy())]
    assert read == expected and read != _rows(split, indices)


def test_wide_vocabularies_take_four_bytes_an_id():
    assert prepared.ids_dtype(65536).itemsize == 2 and prepared.ids_dtype(65537).itemsize == 4


def test_a_length_the_16_bit_lengths_cannot_hold_is_refused(text_corpus, tmp_path):
    """Cast to uint16, a length of 65,536 would be 0: every later pair would read another
    pair's ids, and the file sizes would still match train.json."""
    with pytest.raises(PreparedError, match=r"max_len 65,536 does not fit .*\(at most 65,535\)"):
        _prepare(text_corpus, tmp_path / "p", max_len=prepared.MAX_LENGTH + 1)
    assert not (tmp_path / "p").exists()
    side = prepared._Side(tmp_path, "en", tokens=False)
    side.add(np.arange(3), np.array([1, 2]))
    with pytest.raises(PreparedError, match="a en side of 65,536 tokens does not fit"):
        side.add(np.zeros(prepared.MAX_LENGTH + 1, np.int64), np.array([prepared.MAX_LENGTH + 1]))
    side.close()
    assert np.frombuffer(side.lengths_path.read_bytes(), "<u2").tolist() == [1, 2]


@pytest.fixture(scope="module")
def sorted_split(tmp_path_factory):
    """2,000 pairs sorted by length (pair i has i // 80 + 1 words), prepared."""
    directory = tmp_path_factory.mktemp("sorted")
    for lang in ("en", "fr"):
        (directory / f"train.{lang}").write_text(
            "".join(" ".join([f"w{i}"] * (i // 80 + 1)) + "\n" for i in range(2000)))
    files = ParallelFiles(directory / "train.en", directory / "train.fr")
    _prepare(files, directory / "prepared", vocab_size=3000, max_len=50)
    return prepared.PreparedSplit(directory / "prepared", "en", "fr")


def _indices(split, count, seed=5):
    """Pair indices in the order the pipeline reads them (the pair's word id - 4 is its
    line, since every word of line i is w{i} and ids follow falling frequency)."""
    line_of_id = {}
    order = []
    for source, _ in prepared_iterator(split, seed).take(count // 500):
        for row in source.numpy():
            order.append(row[0])
    for i in range(split.count):
        line_of_id[split.pair(i)[0][0]] = i
    return [line_of_id[token] for token in order]


def prepared_iterator(split, seed):
    return data.prepared_pairs(split, seed).rebatch(500)


def test_every_epoch_is_a_permutation_uncorrelated_with_the_file_order(sorted_split):
    order = _indices(sorted_split, 6000)
    epochs = [order[:2000], order[2000:4000], order[4000:]]
    for epoch in epochs:
        assert sorted(epoch) == list(range(2000))  # every pair exactly once
    assert epochs[0] != epochs[1] != epochs[2]
    assert _indices(sorted_split, 2000) == epochs[0]  # seeded
    assert _indices(sorted_split, 2000, seed=6) != epochs[0]
    lengths = np.arange(2000) // 80 + 1
    position = np.arange(2000)
    assert abs(np.corrcoef(position, lengths[epochs[0]])[0, 1]) < 0.1
    assert abs(np.corrcoef(position, epochs[0])[0, 1]) < 0.1
    assert len(set(lengths[epochs[0][:200]])) > 18  # the first tenth spans nearly every length


def test_a_large_corpus_is_permuted_too(tiny_corpus, tmp_path, monkeypatch, capsys):
    """The in-memory limit of the text pipeline does not apply to prepared data: a
    corpus over it still gets a permutation, not a streaming buffer. (The run stops
    where its training batches are made: what follows is every run's.)"""
    monkeypatch.setattr(data, "PERMUTATION_MAX_BYTES", 1)
    calls = []

    class BatchesMade(Exception):
        pass

    def spy(split, batching):
        calls.append((split.count, batching.shuffle_buffer))
        raise BatchesMade

    monkeypatch.setattr(data, "prepared_batches", spy)
    with pytest.raises(BatchesMade):
        experiment.train(TrainOptions(
            variant="search30", data=str(tiny_corpus), out=str(tmp_path / "run"), max_steps=1,
            quiet=True, lexicon=False, overrides=dict(TINY_SETTINGS)))
    kept = json.loads((tmp_path / "run" / "data.json").read_text())["train"]["kept"]
    assert calls == [(kept, 0)]
    assert "streaming buffer" not in capsys.readouterr().err


def _batches(split, shuffle_buffer=0, batch_tokens=0):
    return iter(data.prepared_batches(
        split, data.Batching(max_len=split.info["max_len"], batch_size=16, sort_batches=5, seed=3,
                             shuffle_buffer=shuffle_buffer, batch_tokens=batch_tokens,
                             mean_length=8.0)))


@pytest.mark.parametrize("shuffle_buffer,batch_tokens,sampled",
                         [(0, 0, False), (0, 200, False), (300, 0, False), (0, 0, True), (100, 0, True)])
def test_resume_continues_with_exactly_the_next_batch(sorted_split, sampled_split, tmp_path,
                                                      shuffle_buffer, batch_tokens, sampled):
    split = sampled_split if sampled else sorted_split
    first = _batches(split, shuffle_buffer, batch_tokens)
    for _ in range(140 if not sampled else 40):  # past the first epoch (2,000 or 271 pairs)
        next(first)
    saved = tf.train.Checkpoint(iterator=first).write(str(tmp_path / "ckpt"))
    expected = [next(first) for _ in range(10)]
    resumed = _batches(split, shuffle_buffer, batch_tokens)
    tf.train.Checkpoint(iterator=resumed).read(saved).assert_consumed()
    for ((s0, t0), o0), ((s1, t1), o1) in zip(expected, (next(resumed) for _ in range(10))):
        for a, b in ((s0, s1), (t0, t1), (o0, o1)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_batches_from_prepared_ids_are_those_from_text(text_corpus, tmp_path):
    """Same pairs, same ids, same bucketing as the text pipeline's batches."""
    _, vocabularies = _prepare(text_corpus, tmp_path / "p")
    split = prepared.PreparedSplit(tmp_path / "p", "en", "fr")
    from keras_nmt.text.word_graph import WordEncoder

    encoders = [WordEncoder(v, lang) for v, lang in zip(vocabularies, ("en", "fr"))]
    batching = data.Batching(max_len=MAX_LEN, batch_size=8, sort_batches=4, seed=1,
                             length_multiple=8)
    text = data.training_batches(text_corpus, *encoders, batching)
    ids = data.prepared_batches(split, batching)

    def rows(dataset, batches):
        out = []
        for (source, _), target_out in dataset.take(batches):
            assert source.shape[1] % 8 == 0 and source.shape[1] == target_out.shape[1]
            out += [(tuple(s[s > 0]), tuple(t[t > 0])) for s, t in
                    zip(source.numpy(), target_out.numpy())]
        return out

    # Over two epochs every kept pair comes, and nothing else, with the same ids.
    batches = 2 * split.count // 8
    everything = {tuple(tuple(side) + (3,) for side in split.pair(i)) for i in range(split.count)}
    assert set(rows(ids, batches)) == set(rows(text, batches)) == everything


def test_a_killed_preparation_leaves_nothing_half_valid(text_corpus, tmp_path, monkeypatch):
    target = tmp_path / "prepared"
    _prepare(text_corpus, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def crash(self, vocabulary, directory):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepared._Side, "write_final", crash)
    with pytest.raises(KeyboardInterrupt):
        _prepare(text_corpus, target, vocab_size=20)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before  # the old set, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]  # no temporary left

    (target / "train.fr.ids").write_bytes(b"\0\0")
    with pytest.raises(PreparedError, match="train.fr.ids holds 2 bytes"):
        prepared.PreparedSplit(target, "en", "fr")
    shutil.rmtree(target)
    with pytest.raises(PreparedError, match="no prepared training data"):
        prepared.PreparedSplit(target, "en", "fr")


def test_bad_corpora_fail_in_one_line_naming_the_file(tmp_path):
    (tmp_path / "train.en").write_text("a b\nc d\ne\n")
    (tmp_path / "train.fr").write_text("a b\nc d\n")
    files = ParallelFiles(tmp_path / "train.en", tmp_path / "train.fr")
    with pytest.raises(CorpusError, match=r"line counts differ: .*train.en has 3 lines, .*train.fr has 2$"):
        _prepare(files, tmp_path / "p")
    (tmp_path / "train.fr").write_bytes(b"a b\nc \xff d\ne")
    with pytest.raises(CorpusError, match=r"train.fr: line 2 is not UTF-8 text \(bad byte at column 3\)"):
        _prepare(files, tmp_path / "p")
    assert not (tmp_path / "p").exists() and len(list(tmp_path.iterdir())) == 2


def test_a_moved_run_finds_its_prepared_data(tiny_run, tmp_path):
    info = json.loads((tiny_run / "data.json").read_text())
    assert info["prepared"] == "prepared"
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(tiny_run, moved)
    split = RunDir(moved).prepared_split(needed_for="a test")
    assert split.directory == moved / "prepared" and split.count == info["train"]["kept"]
    from keras_nmt.cli import train as train_cli

    shutil.rmtree(moved / "prepared")
    err = io.StringIO()
    assert train_cli.main(["--variant", "search30", "--out", str(moved), "--resume",
                           "--max-steps", "12", "--quiet"], stdout=io.StringIO(), stderr=err) == 2
    [line] = err.getvalue().strip().splitlines()
    assert line == (f"keras-nmt train: error: no prepared training data in {moved / 'prepared'} "
                    f"(train.json is missing) (needed for --resume)")
