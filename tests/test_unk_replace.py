"""keras_nmt.decoding.unk_replace: attention-based UNK replacement and dictionary files."""

import numpy as np
import pytest

from keras_nmt.core.errors import DictionaryError
from keras_nmt.lexicon.unk_dictionary import load_dictionary
from keras_nmt.decoding.unk_replace import replace_unknowns

SOURCE = ("Mr", "Smith", "sees", "Jones", ".")


def attention_rows(*peaks, width=len(SOURCE) + 1):
    """One row per output step (plus the EOS row), a clear peak at each given column."""
    rows = []
    for peak in list(peaks) + [width - 1]:
        row = np.full(width, 0.05)
        row[peak] = 0.6
        rows.append(row / row.sum())
    return np.array(rows)


def test_each_unk_takes_the_most_attended_source_word():
    tokens = ("M.", "<unk>", "voit", "<unk>", ".")
    attention = attention_rows(0, 1, 2, 3, 4)
    assert replace_unknowns(tokens, SOURCE, attention) == ("M.", "Smith", "voit", "Jones", ".")


def test_dictionary_maps_the_copied_word_and_misses_copy_it():
    tokens = ("<unk>", "<unk>")
    attention = attention_rows(1, 3)
    out = replace_unknowns(tokens, SOURCE, attention, {"Smith": "Schmidt"})
    assert out == ("Schmidt", "Jones")


def test_source_eos_column_is_never_chosen():
    # The EOS column holds the largest weight; the best real word is "sees".
    attention = np.array([[0.1, 0.1, 0.25, 0.05, 0.0, 0.5], [0, 0, 0, 0, 0, 1.0]])
    assert replace_unknowns(("<unk>",), SOURCE, attention) == ("sees",)


def test_ties_go_left_and_rows_without_attention_keep_unk():
    flat = np.full((2, len(SOURCE) + 1), 1.0 / (len(SOURCE) + 1))
    assert replace_unknowns(("<unk>",), SOURCE, flat) == ("Mr",)
    encdec = np.zeros((2, len(SOURCE) + 1))  # RNNencdec reports no attention
    assert replace_unknowns(("<unk>",), SOURCE, encdec) == ("<unk>",)
    assert replace_unknowns(("<unk>",), (), np.ones((2, 1))) == ("<unk>",)


def test_no_unk_needs_no_attention_and_bad_shapes_are_rejected():
    assert replace_unknowns(("a", "b"), SOURCE, None) == ("a", "b")
    with pytest.raises(ValueError, match="does not cover"):
        replace_unknowns(("<unk>", "<unk>"), SOURCE, np.ones((1, 6)))
    with pytest.raises(ValueError, match="does not cover"):
        replace_unknowns(("<unk>",), SOURCE, np.ones((2, 3)))


def test_load_dictionary(tmp_path):
    path = tmp_path / "dict.tsv"
    path.write_bytes("Smith\tSchmidt\r\n\n  Jones \t Jones-Dupont \nSmith\tForgeron\npotato\tpomme de terre\n"
                     .encode("utf-8"))
    assert load_dictionary(path) == {
        "Smith": "Schmidt", "Jones": "Jones-Dupont", "potato": "pomme de terre",
    }
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    assert load_dictionary(empty) == {}


@pytest.mark.parametrize("content, expected", [
    (b"a\tb\nno tab here\n", "line 2: expected 'source<TAB>target', got 'no tab here'"),
    (b"a\tb\tc\n", "line 1: expected 'source<TAB>target'"),
    (b"\tb\n", "line 1"),
    (b"a\t \n", "line 1"),
    (b"caf\xe9\tcoffee\n", "is not UTF-8 text"),
])
def test_bad_dictionary_files_say_where(tmp_path, content, expected):
    path = tmp_path / "dict.tsv"
    path.write_bytes(content)
    with pytest.raises(DictionaryError, match=expected.replace("(", r"\(")) as info:
        load_dictionary(path)
    assert "\n" not in str(info.value)


def test_missing_dictionary_and_directory(tmp_path):
    with pytest.raises(DictionaryError, match="dictionary file not found"):
        load_dictionary(tmp_path / "nowhere.tsv")
    with pytest.raises(DictionaryError, match="is a directory"):
        load_dictionary(tmp_path)
