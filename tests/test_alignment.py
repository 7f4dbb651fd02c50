"""Pharaoh files, argmax alignments from attention, and AER against hand-computed values."""

import numpy as np
import pytest

from keras_nmt.evaluation import alignment
from keras_nmt.core.errors import AlignmentError
from keras_nmt.evaluation.alignment import GoldAlignment


def test_parse_pharaoh_sure_and_possible_links():
    gold = alignment.parse_pharaoh("0-0 1-2 2?1\n")
    assert gold.sure == {(0, 0), (1, 2)}
    assert gold.possible == {(0, 0), (1, 2), (2, 1)}
    assert alignment.parse_pharaoh("") == GoldAlignment(frozenset(), frozenset())


@pytest.mark.parametrize("item", ["0-", "a-1", "1:2", "1-2-3", "-1-2"])
def test_parse_pharaoh_rejects_malformed_links(item):
    with pytest.raises(AlignmentError, match="Pharaoh"):
        alignment.parse_pharaoh(f"0-0 {item}")


def test_pharaoh_round_trip(tmp_path):
    sentences = [{(0, 0), (2, 1), (1, 2), (10, 11)}, set(), {(3, 0)}]
    assert alignment.format_pharaoh(sentences[0]) == "0-0 1-2 2-1 10-11"
    path = tmp_path / "test.align"
    alignment.write_pharaoh(path, sentences)
    assert path.read_text(encoding="utf-8") == "0-0 1-2 2-1 10-11\n\n3-0\n"
    assert [g.sure for g in alignment.read_pharaoh(path)] == sentences
    # Possible links survive the round trip too.
    line = alignment.format_pharaoh({(0, 0)}, possible={(1, 1)})
    assert line == "0-0 1?1"
    assert alignment.parse_pharaoh(line) == GoldAlignment(frozenset({(0, 0)}), frozenset({(0, 0), (1, 1)}))


def test_read_pharaoh_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "bad.align"
    path.write_text("0-0\n0-0 x\n", encoding="utf-8")
    with pytest.raises(AlignmentError, match=r"bad\.align, line 2: .*'x'"):
        alignment.read_pharaoh(path)
    with pytest.raises(AlignmentError, match="not found"):
        alignment.read_pharaoh(tmp_path / "missing.align")


def test_aer_perfect_and_disjoint():
    links = {(0, 0), (1, 2), (2, 1)}
    assert alignment.aer(links, links) == 0.0
    assert alignment.aer({(0, 1), (1, 0)}, {(0, 0), (1, 1)}) == 1.0
    assert alignment.aer(set(), {(0, 0)}) == 1.0


def test_aer_partial_hand_computed():
    predicted = {(0, 0), (1, 1), (2, 1)}
    sure = {(0, 0), (1, 1), (2, 2), (3, 3)}
    # |A & S| = 2 ((0,0) and (1,1)), |A| = 3, |S| = 4:
    # AER = 1 - 2*2 / (3 + 4) = 1 - 4/7 = 3/7 = 0.428571...
    assert alignment.aer(predicted, sure) == pytest.approx(3 / 7)
    # With (2,1) marked possible: |A & P| = 3, so AER = 1 - (2 + 3) / (3 + 4) = 2/7.
    assert alignment.aer(predicted, sure, possible={(2, 1)}) == pytest.approx(2 / 7)


def test_corpus_aer_sums_counts_before_dividing():
    gold = [alignment.parse_pharaoh("0-0 1-1"), alignment.parse_pharaoh("0-0 1-1 2-2 3-3")]
    predicted = [{(0, 0), (1, 1)}, {(0, 0), (1, 1), (2, 1)}]
    counts = alignment.corpus_aer(predicted, gold)
    # Sentence 1: |A|=2, |S|=2, |A&S|=2. Sentence 2: |A|=3, |S|=4, |A&S|=2.
    # Corpus: 1 - 2*(2+2) / (5 + 6) = 1 - 8/11 = 3/11 (not the mean of 0 and 3/7).
    assert (counts.predicted, counts.sure, counts.predicted_sure) == (5, 6, 4)
    assert counts.aer == pytest.approx(3 / 11)
    with pytest.raises(ValueError):
        alignment.corpus_aer(predicted[:1], gold)


def test_argmax_alignment_leaves_out_the_eos_row_and_column():
    # 2 output tokens + EOS row, 3 source tokens + EOS column.
    attention = np.array([
        [0.1, 0.6, 0.2, 0.1],
        [0.1, 0.2, 0.3, 0.4],  # EOS column is highest: the best real source token wins
        [0.9, 0.0, 0.0, 0.1],  # EOS row: no link
    ])
    assert alignment.argmax_alignment(attention, source_length=3, target_length=2) == {(1, 0), (2, 1)}
    assert alignment.argmax_alignment(attention, 0, 2) == set()
    with pytest.raises(ValueError, match="does not cover"):
        alignment.argmax_alignment(attention, 5, 2)


def test_check_in_range():
    gold = alignment.parse_pharaoh("0-0 2-1")
    assert alignment.check_in_range(gold, 3, 2) is None
    assert "source has 2 tokens" in alignment.check_in_range(gold, 2, 2)
    assert "reference has 1 tokens" in alignment.check_in_range(gold, 3, 1)
