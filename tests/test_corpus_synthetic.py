"""The synthetic corpus of keras_nmt.corpus.synthetic: the shape of news text, from a
seed, at any size."""

from keras_nmt.corpus import synthetic
from keras_nmt.corpus.readers import find_corpus
from keras_nmt.corpus.scan import scan_training_split


def test_the_corpus_has_the_shape_of_news_text_and_follows_its_seed(tmp_path):
    facts = synthetic.write_corpus(tmp_path, 4000, types=50_000, seed=3)
    assert facts["pairs"] == 4000 and facts["types_per_side"] == 50_000
    splits = find_corpus(tmp_path, "en", "fr")
    assert splits["test"].check() == splits["valid"].check() == synthetic.HELD_OUT_PAIRS
    stats = scan_training_split(splits["train"], "en", "fr", 10_000)
    assert stats.pairs == 4000 and facts["train_bytes"] == sum(
        (tmp_path / f"train.{lang}").stat().st_size for lang in synthetic.LANGS)
    assert 25 <= stats.source_tokens / stats.kept <= 30
    assert 26 <= stats.target_tokens / stats.kept <= 32
    assert len(stats.source_counts) > 20_000  # a Zipfian draw over 50k types
    assert stats.empty >= 1  # a few empty lines, and a few very long ones
    assert max(map(len, (tmp_path / "train.en").read_text().splitlines())) > 1000
    assert (tmp_path / ".complete").exists()
    assert synthetic.write_corpus(tmp_path / "again", 4000, types=50_000, seed=3) == facts
    assert (tmp_path / "again" / "train.fr").read_bytes() == (tmp_path / "train.fr").read_bytes()
    other = synthetic.write_corpus(tmp_path / "other", 4000, types=50_000, seed=4)
    assert (tmp_path / "other" / "train.fr").read_bytes() != (tmp_path / "train.fr").read_bytes()
    assert other["pairs"] == 4000
