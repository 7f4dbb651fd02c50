"""What the commands that translate stdin share (``keras-nmt translate``,
``onnx-translate``, ``tfserving-client``): the input read and translated a chunk at a time
under a progress line, the output lines (a translation, or its Moses n-best list) and the
one warning about truncated sentences. Importing it loads no TensorFlow.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Sequence, TextIO

from keras_nmt.core.atomic import json_text
from keras_nmt.cli.common import LOW_CONFIDENCE_MARK
from keras_nmt.decoding.confidence import line_fields
from keras_nmt.decoding.constraints import (
    Glossary, LineConstraints, read_constraints, read_prefixes,
)
from keras_nmt.core.errors import ConstraintError
from keras_nmt.core.progress import Phase, Progress, format_duration
from keras_nmt.decoding.translation import Translation

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


class LineRules:
    """The constraints of each input line from ``--constraints FILE`` and ``--prefix FILE``
    (aligned with the input) and ``--glossary TSV``, handed out as the input is read
    (:meth:`take`), with the counts checked (:class:`~keras_nmt.core.errors.ConstraintError`)."""

    def __init__(self, constraints: str | None, prefix: str | None, glossary: str | None):
        self.glossary = Glossary.read(glossary) if glossary else None
        files = [(read_constraints(constraints), "constraints") if constraints else None,
                 (read_prefixes(prefix), "prefixes") if prefix else None]
        self.files = [found for found in files if found is not None]
        self.start = 0
        self.unmet = 0  # lines whose translation misses a phrase (written at the end)

    def __bool__(self) -> bool:
        return bool(self.files or self.glossary)

    def take(self, count: int) -> list[LineConstraints] | None:
        """The constraints of the next ``count`` input lines (None: no file gives any)."""
        if not self.files:
            return None
        end = self.start + count
        merged = [LineConstraints()] * count
        for found, what in self.files:
            if len(found) < end:
                raise ConstraintError(f"the {what} file has {len(found)} line(s), the input "
                                      "more")
            merged = [a.merged(b) for a, b in zip(merged, found[self.start : end])]
        self.start = end
        return merged

    def check_all_read(self, lines: int) -> None:
        for found, what in self.files:
            if len(found) != lines:
                raise ConstraintError(f"the {what} file has {len(found)} line(s), the input "
                                      f"{lines}")

    def count(self, translations: Sequence[Translation]) -> Sequence[Translation]:
        self.unmet += sum(bool(t.unmet) for t in translations)
        return translations

    def warn_unmet(self, prog: str, stderr: TextIO) -> None:
        if self.unmet:
            stderr.write(f"{prog}: warning: {self.unmet} line(s) miss a constraint: the "
                         "length limit came first\n")

    def translating(self, translate: Callable[..., Sequence[Translation]]
                    ) -> Callable[..., Sequence[Translation]]:
        """``translate(lines, **options)`` given each chunk's constraints and glossary."""
        if not self:
            return translate

        def constrained(lines: list[str], **options) -> Sequence[Translation]:
            return self.count(translate(lines, constraints=self.take(len(lines)),
                                        glossary=self.glossary, **options))

        return constrained


class Output:
    """Writes translations to ``stream`` in input order: a line each, its text (with
    ``scores``: ``SCORE<TAB>text``), or with ``nbest`` its n-best list in the Moses
    format, ``INDEX ||| text ||| score`` a hypothesis, best first. Counts the sentences
    that were cut to the maximum source length.

    With ``confidence``, a line is a JSON object instead (:meth:`confidence_record`).
    With ``min_confidence``, a line whose confidence is below it is marked: its text
    starts with :data:`~keras_nmt.cli.common.LOW_CONFIDENCE_MARK` (JSON: ``"low": true``),
    or with ``drop_below`` it is withheld: an empty line (JSON: ``"text": ""``,
    ``"withheld": true``). A line without a confidence (empty input) is never marked.

    With ``attention``, each line's attention record (:meth:`attention_record`) goes to
    that stream as a JSON line; with ``flush_each``, both streams are flushed after every
    line (a person typing the input sees each translation at once)."""

    def __init__(self, stream: TextIO, nbest: bool = False, scores: bool = False,
                 confidence: bool = False, min_confidence: float | None = None,
                 drop_below: bool = False, attention: TextIO | None = None,
                 flush_each: bool = False):
        self.stream = stream
        self.attention = attention
        self.flush_each = flush_each
        self.nbest = nbest
        self.scores = scores
        self.confidence = confidence
        self.min_confidence = min_confidence
        self.drop_below = drop_below
        self.index = 0  # of the next line
        self.truncated = 0

    def write_all(self, translations: Iterable[Translation]) -> None:
        for t in translations:
            self.write(t)

    def flush(self) -> None:
        self.stream.flush()
        if self.attention is not None:
            self.attention.flush()

    def write(self, t: Translation) -> int:
        """Write one line's translation; returns its index."""
        if self.nbest:
            for h in t.hypotheses:
                self.stream.write(f"{self.index} ||| {h.text} ||| {h.score:.4f}\n")
        elif self.confidence:
            self.stream.write(json_text(self.confidence_record(t), ensure_ascii=False) + "\n")
        else:
            if self.scores:  # NaN from a model without scores
                self.stream.write(f"{float('nan') if t.score is None else t.score:.4f}\t")
            low = self.below(t)
            text = "" if low and self.drop_below else LOW_CONFIDENCE_MARK * low + t.text
            self.stream.write(text + "\n")
        if self.attention is not None:
            record = self.attention_record(t)
            self.attention.write(json_text(record, ensure_ascii=False) + "\n")
        if self.flush_each:
            self.flush()
        self.truncated += t.truncated_sentences
        self.index += 1
        return self.index - 1

    def attention_record(self, t: Translation) -> dict:
        """``{"index", "source", "target", "attention" (a row per target token), "score",
        "truncated"}`` of line ``t``; all empty for an empty input (nothing decoded)."""
        if t.attention is None:
            return {"index": self.index, "source": [], "target": [], "attention": [],
                    "score": 0.0, "truncated": 0}
        target, source = t.attention_labels()
        return {"index": self.index, "source": source, "target": target,
                "attention": t.attention.astype(float).round(6).tolist(),
                "score": round(t.score, 6), "truncated": t.truncated}

    def below(self, t: Translation) -> bool:
        """Whether ``t``'s confidence is below ``min_confidence``."""
        return (self.min_confidence is not None and t.confidence is not None
                and t.confidence.sentence < self.min_confidence)

    def confidence_record(self, t: Translation) -> dict:
        """``{"index", "text", "confidence" (null for an empty line), "sentences" (each
        sentence's figure; one for a line of one sentence), "words" ([word, figure] per
        word of the text)}``, and with ``min_confidence`` ``"low"`` (and with
        ``drop_below`` ``"withheld"``), and ``"unmet"`` when constraints were missed."""
        record = {"index": self.index, "text": t.text, **line_fields(
            t.confidence, [part.confidence for part in t.sentences or (t,)])}
        if t.unmet:  # constraints the length limit kept out
            record["unmet"] = list(t.unmet)
        if self.min_confidence is not None:
            record["low"] = self.below(t)
            if self.drop_below:
                record["withheld"] = record["low"]
                if record["low"]:
                    record.update(text="", words=[])
        return record

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
