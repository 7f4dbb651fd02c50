"""What the commands that translate stdin share (``keras-nmt translate``,
``onnx-translate``, ``tfserving-client``): the input read and translated a chunk at a time
under a progress line, the output lines (a translation, or its Moses n-best list) and the
one warning about truncated sentences. Importing it loads no TensorFlow.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Sequence, TextIO

from keras_nmt.progress import Phase, Progress, format_duration
from keras_nmt.translation import Translation

# Lines read and handed to the translator at a time: batch_size * CHUNK_BATCHES. They
# are sorted by length within a chunk, and a chunk's output is written and flushed before
# the next one is read.
CHUNK_BATCHES = 64


def translate_in_chunks(
    translate: Callable[..., Sequence[Translation]], lines: Iterable[str], batch_size: int,
    output: Output, stderr: TextIO, quiet: bool = False,
) -> int:
    """Write the translation of each of ``lines`` with ``output``, in order; returns how
    many lines there were. ``lines`` are read a chunk at a time as they come (stdin: see
    :func:`keras_nmt.corpus.readers.stream_lines`), each chunk translated by
    ``translate(chunk, progress=callback)`` (the translator calls ``callback`` with the
    lines each batch finished) and its output written and flushed before the next chunk
    is read: memory holds one chunk whatever the input's size, and the first
    translations come out while the input still flows. A progress line on ``stderr``
    unless ``quiet``, without a total or ETA: a stream's length is not known."""
    lines = iter(lines)
    chunk_size = batch_size * CHUNK_BATCHES
    progress = Progress(stream=stderr, enabled=not quiet)
    phase = None
    while chunk := list(itertools.islice(lines, chunk_size)):
        if phase is None:  # no progress at all for an empty input
            phase = Phase(progress, "translating", unit="sentences")
        done = phase.done
        output.write_all(translate(chunk, progress=phase.advance))
        output.flush()
        phase.reached(done + len(chunk))  # empty lines, never decoded, are not counted
    if phase is None:
        return 0
    seconds = phase.elapsed()
    rate = phase.done / seconds if seconds > 0 else 0.0
    progress.message(f"translated {phase.done} sentences in {format_duration(seconds)} "
                     f"({rate:.1f} sentences/s)")
    progress.close()
    return phase.done


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

    def flush(self) -> None:
        self.stream.flush()

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
