"""Files written whole or not at all: the old file survives a failed write, temporary
files are cleaned up, JSON is strict, and a finished folder replaces the old one."""

import json
import math
import os

import pytest

from keras_nmt.atomic import (
    json_text, open_atomic, replace_folder, write_bytes_atomic, write_json_atomic,
    write_text_atomic,
)


def test_writers_replace_the_file_and_leave_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    write_text_atomic(path, "l'été\n")
    assert path.read_bytes() == "l'été\n".encode("utf-8")
    write_bytes_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_an_error_while_writing_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with open_atomic(path, "w", encoding="utf-8") as f:
            f.write("half of the new")
            raise RuntimeError("stopped")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_json_is_strict_sorted_and_indented(tmp_path):
    value = {"b": math.nan, "a": [math.inf, -math.inf, 1.5, (1, 2)]}
    assert json_text(value) == '{"b": null, "a": [null, null, 1.5, [1, 2]]}'
    write_json_atomic(tmp_path / "v.json", value)
    text = (tmp_path / "v.json").read_text()
    assert text == json.dumps({"a": [None, None, 1.5, [1, 2]], "b": None}, indent=2, sort_keys=True) + "\n"


def test_replace_folder_moves_the_old_one_aside(tmp_path):
    folder, work, aside = tmp_path / "data", tmp_path / ".data.new.tmp", tmp_path / ".data.old.tmp"
    folder.mkdir()
    (folder / "a").write_text("old")
    work.mkdir()
    (work / "a").write_text("new")
    (work / "b").write_text("new")
    replace_folder(work, folder, aside)
    assert sorted(p.name for p in folder.iterdir()) == ["a", "b"]
    assert (folder / "a").read_text() == "new" and (aside / "a").read_text() == "old"
    assert not work.exists()
    fresh = tmp_path / "fresh"
    work.mkdir()
    replace_folder(work, fresh, aside)  # no old folder: nothing is moved aside
    assert fresh.is_dir() and (aside / "a").read_text() == "old"
