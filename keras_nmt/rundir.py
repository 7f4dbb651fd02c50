"""The run directory: everything a training run writes, and all that translation needs.

    RUN_DIR/config.json        the Config (written once, before training starts)
    RUN_DIR/data.json          languages, corpus location, split statistics
    RUN_DIR/vocab.SRC.txt      source shortlist, one token per line
    RUN_DIR/vocab.TGT.txt      target shortlist
    RUN_DIR/checkpoints/       model + optimizer + step + data position (for --resume)
    RUN_DIR/best/              the weights with the best development score
    RUN_DIR/tensorboard/       scalars
    RUN_DIR/summary.json       the final report (the paper's Table 2 columns)
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any

from keras_nmt import faults
from keras_nmt.config import Config
from keras_nmt.tokenizer import Vocabulary


class RunDirError(ValueError):
    """A run directory that cannot be used; the message says why."""


def write_text_atomic(path: pathlib.Path, content: str) -> None:
    """Write a text file so that a crash leaves either the old file or the new one, never half."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a normal file is world-readable
        faults.point(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: pathlib.Path, value: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    write_text_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)

    config_path = property(lambda self: self.path / "config.json")
    data_path = property(lambda self: self.path / "data.json")
    summary_path = property(lambda self: self.path / "summary.json")
    checkpoints = property(lambda self: self.path / "checkpoints")
    best = property(lambda self: self.path / "best")
    tensorboard = property(lambda self: self.path / "tensorboard")
    corpus = property(lambda self: self.path / "corpus")

    def vocab_path(self, lang: str) -> pathlib.Path:
        return self.path / f"vocab.{lang}.txt"

    def create(self) -> None:
        """Make the directory and prove it is writable, before any work is done."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as error:
            raise RunDirError(f"cannot write to run directory {self.path}: {error.strerror}") from None

    def is_initialised(self) -> bool:
        return self.config_path.is_file() and self.data_path.is_file()

    def has_checkpoint(self) -> bool:
        return (self.checkpoints / "checkpoint").is_file()

    def load_config(self) -> Config:
        try:
            return Config.from_dict(json.loads(self.config_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a run directory (no config.json)") from None

    def load_data_info(self) -> dict[str, Any]:
        try:
            return json.loads(self.data_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{self.path} is not a run directory (no data.json)") from None

    def load_vocabularies(self) -> tuple[Vocabulary, Vocabulary]:
        info = self.load_data_info()
        return (
            Vocabulary.load(self.vocab_path(info["src"])),
            Vocabulary.load(self.vocab_path(info["tgt"])),
        )
