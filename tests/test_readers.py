"""Corpus files: discovery, line alignment, encodings and the training-split scan."""

import gzip

import pytest

from keras_nmt.corpus.readers import ParallelFiles, find_corpus
from keras_nmt.corpus.scan import scan_training_split
from keras_nmt.core.errors import CorpusError


def write_split(directory, split, src_lines, tgt_lines, src="en", tgt="fr", newline="\n"):
    (directory / f"{split}.{src}").write_bytes(newline.join(src_lines).encode() + newline.encode())
    (directory / f"{split}.{tgt}").write_bytes(newline.join(tgt_lines).encode() + newline.encode())


def test_finds_splits_and_gz(tmp_path):
    write_split(tmp_path, "train", ["a b", "c"], ["A B", "C"])
    write_split(tmp_path, "valid", ["a"], ["A"])
    with gzip.open(tmp_path / "test.en.gz", "wt") as f:
        f.write("x y\n")
    with gzip.open(tmp_path / "test.fr.gz", "wt") as f:
        f.write("X Y\n")
    splits = find_corpus(tmp_path, "en", "fr")
    assert set(splits) == {"train", "valid", "test"}
    assert list(splits["test"].pairs()) == [("x y", "X Y")]


def test_missing_pieces_are_named(tmp_path):
    with pytest.raises(CorpusError, match="corpus directory not found"):
        find_corpus(tmp_path / "nope", "en", "fr")
    write_split(tmp_path, "train", ["a"], ["A"])
    with pytest.raises(CorpusError, match=r"expected valid\.en and valid\.fr"):
        find_corpus(tmp_path, "en", "fr")
    (tmp_path / "valid.en").write_text("a\n")
    with pytest.raises(CorpusError, match=r"found one side of the valid split but not valid\.fr"):
        find_corpus(tmp_path, "en", "fr")


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    write_split(tmp_path, "train", ["a", "b", "c"], ["A", "B"])
    files = ParallelFiles(tmp_path / "train.en", tmp_path / "train.fr")
    with pytest.raises(CorpusError) as error:
        files.check()
    message = str(error.value)
    assert "train.en has 3 lines" in message and "train.fr has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "train.en").write_bytes(b"ok\nbad \xff byte\n")
    (tmp_path / "train.fr").write_bytes(b"ok\nfine\n")
    files = ParallelFiles(tmp_path / "train.en", tmp_path / "train.fr")
    with pytest.raises(CorpusError, match=r"train\.en: line 2 is not UTF-8 text \(bad byte at column 5\)"):
        files.check()


def test_crlf_gives_the_same_pairs_as_lf(tmp_path):
    (tmp_path / "lf").mkdir()
    (tmp_path / "crlf").mkdir()
    write_split(tmp_path / "lf", "train", ["a b.", "c"], ["A B.", "C"])
    write_split(tmp_path / "crlf", "train", ["a b.", "c"], ["A B.", "C"], newline="\r\n")
    lf = list(ParallelFiles(tmp_path / "lf/train.en", tmp_path / "lf/train.fr").pairs())
    crlf = list(ParallelFiles(tmp_path / "crlf/train.en", tmp_path / "crlf/train.fr").pairs())
    assert lf == crlf == [("a b.", "A B."), ("c", "C")]


def test_scan_counts_kept_dropped_and_empty(tmp_path):
    write_split(tmp_path, "train", ["a b c", "", "a b c d e f", "x", "  "],
                ["A B C", "Z", "A", "", "Y"])
    stats = scan_training_split(ParallelFiles(tmp_path / "train.en", tmp_path / "train.fr"), "en", "fr", 5)
    assert stats.summary() == {"pairs": 5, "kept": 1, "dropped_too_long": 1, "skipped_empty": 3,
                               "source_tokens": 3, "target_tokens": 3}
    assert stats.source_counts == {"a": 1, "b": 1, "c": 1}


def test_count_lines_counts_as_pairs_numbers_them(tmp_path):
    from keras_nmt.corpus.readers import count_lines

    for name, data, lines in (("end", b"a\nb\n", 2), ("no-end", b"a\nb", 2), ("empty", b"", 0),
                              ("blank", b"\n\n", 2), ("crlf", b"a\r\nb\r\n", 2)):
        (tmp_path / name).write_bytes(data)
        assert count_lines(tmp_path / name) == lines, name
    with gzip.open(tmp_path / "text.gz", "wb") as f:
        f.write(b"x\n" * 2500)
    assert count_lines(tmp_path / "text.gz") == 2500


def test_scan_reports_its_progress(tmp_path):
    write_split(tmp_path, "train", ["a"] * 2500, ["b"] * 2500)
    seen = []
    scan_training_split(ParallelFiles(tmp_path / "train.en", tmp_path / "train.fr"), "en", "fr",
                        5, progress=seen.append)
    assert seen == [1000, 2000, 2500]


def test_file_lines_split_as_stdin_is_split(tmp_path):
    from keras_nmt.corpus.readers import file_lines, read_lines

    for name, data in (("end", b"a\n\nb\n"), ("no-end", b"a\n\nb"), ("crlf", b"a\r\n\r\nb\r\n"),
                       ("empty", b""), ("separator", "a\u2028b\x85c\n".encode())):
        (tmp_path / name).write_bytes(data)
        assert list(file_lines(tmp_path / name)) == read_lines(data), name
    assert read_lines(b"a\n\nb") == ["a", "", "b"]
    assert read_lines("a\u2028b\x85c\n".encode()) == ["a\u2028b\x85c"]  # "\n" alone ends a line
    with gzip.open(tmp_path / "text.gz", "wb") as f:
        f.write("l'été\nx\n".encode())
    assert list(file_lines(tmp_path / "text.gz")) == ["l'été", "x"]


def test_file_lines_name_the_file_and_line_of_bad_bytes(tmp_path):
    from keras_nmt.corpus.readers import file_lines
    from keras_nmt.core.errors import InputError

    (tmp_path / "bad.txt").write_bytes(b"ok\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"bad\.txt: line 2 is not UTF-8 text \(bad byte at column 5\)"):
        list(file_lines(tmp_path / "bad.txt"))
    assert list(file_lines(tmp_path / "bad.txt", errors="replace")) == ["ok", "bad \ufffd byte"]
    with pytest.raises(FileNotFoundError):
        list(file_lines(tmp_path / "missing.txt"))
