"""What the commands that translate stdin share (``keras-nmt translate``,
``onnx-translate``, ``tfserving-client``): the input translated a chunk at a time under a
progress line, the output lines (a translation, or its Moses n-best list) and the one
warning about truncated sentences. Importing it loads no TensorFlow.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence, TextIO

from keras_nmt.progress import Phase, Progress, format_duration
from keras_nmt.translation import Translation

# Sentences handed to the translator at a time: batch_size * CHUNK_BATCHES. They are
# sorted by length within a chunk, and a chunk's output is written before the next one
# starts (bounded memory).
CHUNK_BATCHES = 64


def translate_in_chunks(
    translate: Callable[..., Sequence[Translation]], lines: list[str], batch_size: int,
    stderr: TextIO, quiet: bool = False,
) -> Iterator[Translation]:
    """The Translation of each line, in order: ``translate(chunk, progress=callback)`` of
    a chunk of lines at a time, with a progress line on ``stderr`` unless ``quiet`` (the
    translator calls ``callback`` with the lines each batch finished)."""
    progress = Progress(stream=stderr, enabled=not quiet and bool(lines))
    phase = Phase(progress, "translating", total=len(lines), unit="sentences")
    chunk = batch_size * CHUNK_BATCHES
    for begin in range(0, len(lines), chunk):
        part = lines[begin : begin + chunk]
        yield from translate(part, progress=phase.advance)
        phase.reached(begin + len(part))  # empty lines, never decoded, are not counted
    seconds = phase.elapsed()
    rate = len(lines) / seconds if seconds > 0 else 0.0
    progress.message(f"translated {len(lines)} sentences in {format_duration(seconds)} "
                     f"({rate:.1f} sentences/s)")
    progress.close()


class Output:
    """Writes translations to ``stream`` in input order: a line each, its text (with
    ``scores``: ``SCORE<TAB>text``), or with ``nbest`` its n-best list in the Moses
    format, ``INDEX ||| text ||| score`` a hypothesis, best first. Counts the sentences
    that were cut to the maximum source length."""

    def __init__(self, stream: TextIO, nbest: bool = False, scores: bool = False):
        self.stream = stream
        self.nbest = nbest
        self.scores = scores
        self.index = 0  # of the next line
        self.truncated = 0

    def write_all(self, translations: Iterable[Translation]) -> None:
        for t in translations:
            self.write(t)

    def write(self, t: Translation) -> int:
        """Write one line's translation; returns its index."""
        if self.nbest:
            for h in t.hypotheses:
                self.stream.write(f"{self.index} ||| {h.text} ||| {h.score:.4f}\n")
        else:
            if self.scores:  # NaN from a model without scores
                self.stream.write(f"{float('nan') if t.score is None else t.score:.4f}\t")
            self.stream.write(t.text + "\n")
        self.truncated += t.truncated_sentences
        self.index += 1
        return self.index - 1

    def warn_truncated(self, prog: str, stderr: TextIO, limit: int | None = None) -> None:
        """The warning, if any sentence was cut: to ``limit`` tokens, or, where the limit
        is the server's and not known here (None), to the model's."""
        if not self.truncated:
            return
        if limit is None:
            print(f"{prog}: warning: the model truncated {self.truncated} over-long "
                  "sentence(s) to its maximum source length", file=stderr)
        else:
            print(f"{prog}: warning: {self.truncated} sentence(s) longer than {limit} tokens "
                  f"were truncated to their first {limit} tokens", file=stderr)
