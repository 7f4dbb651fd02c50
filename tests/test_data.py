"""The training pipeline's batching: the paper's sentence batches and token batches."""

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.data import pipelines as data
from keras_nmt.core.config import variant_config
from keras_nmt.corpus.readers import find_corpus
from keras_nmt.corpus.scan import scan_training_split
from keras_nmt.core.errors import ConfigError
from keras_nmt.text.word_graph import WordEncoder
from keras_nmt.text.vocab import Vocabulary

MAX_LEN = 30


@pytest.fixture(scope="module")
def noisy_corpus(tmp_path_factory):
    """600 pairs whose target/source length ratio varies from 0.5 to 1.8, as in real
    data: the length of one side says little about the other's."""
    rng = random.Random(0)
    directory = tmp_path_factory.mktemp("noisy")
    sides = {"en": [], "fr": []}
    for _ in range(600):
        n = rng.randint(1, 25)
        m = max(1, min(MAX_LEN, round(n * rng.uniform(0.5, 1.8))))
        sides["en"].append(" ".join(f"e{rng.randint(0, 50)}" for _ in range(n)))
        sides["fr"].append(" ".join(f"f{rng.randint(0, 50)}" for _ in range(m)))
    for split in ("train", "valid"):
        for lang, lines in sides.items():
            (directory / f"{split}.{lang}").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture(scope="module")
def pipeline(noisy_corpus):
    files = find_corpus(noisy_corpus, "en", "fr")["train"]
    stats = scan_training_split(files, "en", "fr", MAX_LEN)

    def batches(batch_size=16, batch_tokens=0, sort_batches=5):
        return data.training_batches(
            files,
            WordEncoder(Vocabulary.from_counts(stats.source_counts, 1000), "en"),
            WordEncoder(Vocabulary.from_counts(stats.target_counts, 1000), "fr"),
            data.Batching(max_len=MAX_LEN, batch_size=batch_size, sort_batches=sort_batches, seed=3,
                          shuffle_buffer=400, batch_tokens=batch_tokens,
                          mean_length=data.mean_pair_length(stats.summary())),
        )

    return batches, stats


def efficiency(batches, count):
    """Real tokens / padded slots: (source, target)."""
    real, slots = np.zeros(2), np.zeros(2)
    for (source, _), target_out in batches.take(count):
        for side, ids in enumerate((source.numpy(), target_out.numpy())):
            real[side] += np.count_nonzero(ids)
            slots[side] += ids.size
    return tuple(real / slots)


def test_token_batches_cut_a_sorted_window_greedily():
    lengths = [2, 2, 3, 3, 5, 5]
    source = tf.ragged.constant([[7] * n for n in lengths], tf.int32)
    target = tf.ragged.constant([[8] * (n - 1) for n in lengths], tf.int32)
    batched_source, batched_target = data._token_batches(8)(source, target)
    # rows x longest side <= 8: [2 2] [3 3] [5] [5]
    assert batched_source.row_lengths(axis=1).numpy().tolist() == [2, 2, 1, 1]
    assert batched_target.flat_values.shape[0] == sum(n - 1 for n in lengths)


def test_token_batches_respect_the_budget_and_pad_little(pipeline):
    batches, stats = pipeline
    budget = 400
    rows = []
    for (source, target_in), target_out in batches(batch_tokens=budget).take(40):
        assert source.shape[0] * max(source.shape[1], target_out.shape[1]) <= budget
        assert target_in.shape == target_out.shape
        rows.append(source.shape[0])
    assert len(set(rows)) > 3  # short sentences make big batches, long ones small
    assert min(efficiency(batches(batch_tokens=budget), 60)) > 0.76


def test_sentence_batches_keep_batch_size_and_pad_little(pipeline):
    batches, _ = pipeline
    for (source, _), _ in batches(batch_size=16).take(20):
        assert source.shape[0] == 16
    # Both sides count: sorting on the target length alone left 0.71 of the source
    # slots real here (and 0.85 of the target's); the longer-side-first key gives 0.79 / 0.81.
    assert min(efficiency(batches(batch_size=16), 60)) > 0.76


def test_batch_tokens_setting_is_checked():
    assert variant_config("search50").batch_tokens == 0
    assert variant_config("search50", {"batch_tokens": 51}).batch_tokens == 51
    with pytest.raises(ConfigError, match="cannot hold one sentence of max_len=50"):
        variant_config("search50", {"batch_tokens": 50})
    with pytest.raises(ConfigError, match="batch_tokens must be >= 0"):
        variant_config("search50", {"batch_tokens": -1})


@pytest.fixture(scope="module")
def sorted_corpus(tmp_path_factory):
    """1,000 pairs sorted by length, as Anki's files are: pair i has i // 40 + 1 words."""
    directory = tmp_path_factory.mktemp("sorted")
    pairs = [(" ".join(f"e{i}" for _ in range(i // 40 + 1)), f"f{i}") for i in range(1000)]
    for lang, side in (("en", 0), ("fr", 1)):
        (directory / f"train.{lang}").write_text("".join(p[side] + "\n" for p in pairs))
    return find_corpus_files(directory)


def find_corpus_files(directory):
    from keras_nmt.corpus.readers import ParallelFiles

    return ParallelFiles(directory / "train.en", directory / "train.fr")


def _order(dataset, count):
    return [int(target.numpy().decode()[1:]) for _, target in dataset.take(count)]


def test_every_epoch_is_a_new_permutation_of_the_whole_corpus(sorted_corpus):
    order = _order(data.permuted_pairs(sorted_corpus, seed=5), 3000)
    epochs = [order[:1000], order[1000:2000], order[2000:]]
    for epoch in epochs:
        assert sorted(epoch) == list(range(1000))  # every pair exactly once
    assert epochs[0] != epochs[1] != epochs[2]
    assert _order(data.permuted_pairs(sorted_corpus, seed=5), 1000) == epochs[0]  # seeded
    assert _order(data.permuted_pairs(sorted_corpus, seed=6), 1000) != epochs[0]


def test_the_order_is_uncorrelated_with_length_on_a_sorted_corpus(sorted_corpus):
    """Lengths grow along the file. A permutation of the whole corpus has no trend in
    the first epoch; a 100-pair streaming buffer keeps the file's order."""
    lengths = np.arange(1000) // 40 + 1
    permuted = lengths[_order(data.permuted_pairs(sorted_corpus, seed=5), 1000)]
    streamed = lengths[_order(data.text_pairs(sorted_corpus).shuffle(100, seed=5), 1000)]
    position = np.arange(1000)
    assert abs(np.corrcoef(position, permuted)[0, 1]) < 0.1
    assert np.corrcoef(position, streamed)[0, 1] > 0.9
    # The first tenth of the epoch spans nearly every length.
    assert len(set(permuted[:100])) > 20 and len(set(streamed[:100])) < 8


@pytest.mark.end_to_end
def test_resume_continues_the_same_permutation(pipeline, noisy_corpus, tmp_path):
    _, stats = pipeline
    files = find_corpus(noisy_corpus, "en", "fr")["train"]

    def batches(shuffle_buffer=0):
        return iter(data.training_batches(
            files, WordEncoder(Vocabulary.from_counts(stats.source_counts, 1000), "en"),
            WordEncoder(Vocabulary.from_counts(stats.target_counts, 1000), "fr"),
            data.Batching(max_len=MAX_LEN, batch_size=16, sort_batches=5, seed=3,
                          shuffle_buffer=shuffle_buffer),
        ))

    first = batches()
    for _ in range(50):  # past the first epoch (600 pairs, 37 batches)
        next(first)
    saved = tf.train.Checkpoint(iterator=first).write(str(tmp_path / "ckpt"))
    expected = [next(first) for _ in range(10)]
    resumed = batches()
    tf.train.Checkpoint(iterator=resumed).read(saved).assert_consumed()
    for ((s0, t0), o0), ((s1, t1), o1) in zip(expected, (next(resumed) for _ in range(10))):
        for a, b in ((s0, s1), (t0, t1), (o0, o1)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The permutation's state is a counter: the checkpoint holds only the batching
    # stages' buffers, several times less than a buffer as large as the corpus. How
    # full those buffers are when the checkpoint is written depends on how far the
    # prefetching threads got: on a busy machine the ratio once came out at 2.9, so the
    # bound leaves that room.
    streamed = batches(shuffle_buffer=600)
    next(streamed)
    tf.train.Checkpoint(iterator=streamed).write(str(tmp_path / "streamed" / "ckpt"))
    size = lambda d: sum(p.stat().st_size for p in d.iterdir() if p.is_file())  # noqa: E731
    assert 2 * size(tmp_path) < size(tmp_path / "streamed")
