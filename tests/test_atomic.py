"""Files written whole or not at all: the old file survives a failed write, temporary
files are cleaned up, JSON is strict, and a finished folder replaces the old one."""

import json
import math
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from support import ROOT, child_env, open_descriptors

from keras_nmt.core.atomic import (
    json_text, open_atomic, replace_folder, write_bytes_atomic, write_json_atomic,
    write_text_atomic,
)


def test_writers_replace_the_file_and_leave_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    write_text_atomic(path, "l'été\n")
    assert path.read_bytes() == "l'été\n".encode("utf-8")
    write_bytes_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_open_would_give_under_the_umask(tmp_path, umask, mode):
    """In a fresh process: the umask is the whole process's. A plain open() beside the
    atomic write is the reference; an existing file keeps its own mode, as open() keeps it."""
    script = textwrap.dedent(f"""
        import os, sys
        from keras_nmt.core.atomic import write_json_atomic, write_text_atomic
        os.umask({umask})
        folder = sys.argv[1]
        open(os.path.join(folder, "plain.txt"), "w").close()
        write_text_atomic(os.path.join(folder, "atomic.txt"), "new")
        write_json_atomic(os.path.join(folder, "atomic.json"), {{}})
        os.chmod(os.path.join(folder, "kept.txt"), 0o640)
        write_text_atomic(os.path.join(folder, "kept.txt"), "again")
    """)
    (tmp_path / "kept.txt").write_text("old")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, env=child_env(),
                   cwd=ROOT, timeout=60)

    def mode_of(name):
        return stat.S_IMODE(os.stat(tmp_path / name).st_mode)

    assert mode_of("plain.txt") == mode
    assert mode_of("atomic.txt") == mode_of("atomic.json") == mode
    assert mode_of("kept.txt") == 0o640 and (tmp_path / "kept.txt").read_text() == "again"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "atomic.json", "atomic.txt", "kept.txt", "plain.txt"]


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


def test_a_taken_temporary_name_is_passed_over_and_a_hundred_give_up(tmp_path, monkeypatch):
    from keras_nmt.core import atomic

    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _: next(names))
    path = tmp_path / "out.txt"
    (tmp_path / ".out.txt.aaaa.tmp").write_text("another writer's")
    write_text_atomic(path, "mine")
    assert path.read_text() == "mine"
    assert (tmp_path / ".out.txt.aaaa.tmp").read_text() == "another writer's"
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _: "aaaa")
    with pytest.raises(FileExistsError, match="no free temporary name"):
        write_text_atomic(path, "again")
    assert path.read_text() == "mine"


def test_a_mode_that_cannot_be_kept_leaves_no_temporary(tmp_path, monkeypatch):
    from keras_nmt.core import atomic

    path = tmp_path / "out.txt"
    path.write_text("old")

    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "chmod", refuse)
    with pytest.raises(PermissionError):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("code, raised", [("EINVAL", False), ("ENOTSUP", False), ("EIO", True)])
def test_a_folder_sync_refused_by_the_file_system_is_no_error(tmp_path, monkeypatch, code,
                                                              raised):
    import errno

    from keras_nmt.core import atomic

    def fsync(fd):
        raise OSError(getattr(errno, code), code)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    before = open_descriptors()
    if raised:
        with pytest.raises(OSError, match="EIO"):
            atomic._sync_folder(tmp_path)
    else:
        atomic._sync_folder(tmp_path)
    assert open_descriptors() == before  # the folder's descriptor is closed
