"""What a training run says as it goes: the status line, the line of each evaluation,
and for a run with no budget the expected time of an epoch."""

from __future__ import annotations

import time

from keras_nmt.core.progress import format_duration
from keras_nmt.training.budget import TrainingBudget


class EpochEstimate:
    """For a run with no budget: the expected time of an epoch, from the rate of the
    session's first updates. The first update (which builds the graph) is not timed;
    then ``steps`` updates, or at least 2 taking ``seconds`` (a slow model on a CPU)."""

    def __init__(self, train_pairs: int, steps: int = 20, seconds: float = 60.0, clock=time.monotonic):
        self.train_pairs, self.steps, self.seconds, self.clock = train_pairs, steps, seconds, clock
        self.start: tuple[float, int] | None = None  # (time, sentences) after the first update
        self.timed = 0
        self.said = False

    def update(self, sentences: int) -> str | None:
        """After an update, with the sentences trained on so far: the estimate, once."""
        if self.said:
            return None
        if self.start is None:
            self.start = (self.clock(), sentences)
            return None
        self.timed += 1
        seconds = self.clock() - self.start[0]
        if self.timed < self.steps and (self.timed < 2 or seconds < self.seconds):
            return None
        self.said = True
        epoch = seconds / max(sentences - self.start[1], 1) * self.train_pairs
        return (f"no --max-steps or --max-minutes: an epoch ({self.train_pairs:,} pairs) takes "
                f"about {format_duration(epoch)} at the rate of the first {self.timed} updates; "
                "training goes on until early stopping (Ctrl-C stops it, --resume continues)")


def status_line(step: int, epochs: float, loss: float, tokens_per_second: float,
                limits: TrainingBudget, elapsed: float) -> str:
    """The line that shows where training is after update ``step``, with the time left
    when there is a limit."""
    remaining = []
    if limits.max_steps is not None and tokens_per_second > 0:
        rate = step / max(elapsed, 1e-9)
        remaining.append((limits.max_steps - step) / max(rate, 1e-9))
    if limits.max_minutes is not None:
        remaining.append(limits.max_minutes * 60 - elapsed)
    eta = f"  ETA {format_duration(min(remaining))}" if remaining else ""
    total = f"/{limits.max_steps}" if limits.max_steps is not None else ""
    return (
        f"step {step}{total}  epoch {epochs:.2f}  loss {loss:.2f}  "
        f"{tokens_per_second:,.0f} tgt tok/s  elapsed {format_duration(elapsed)}{eta}"
    )


def evaluation_line(step: int, train_nll: float, dev_nll: float, dev_bleu: float | None,
                    improved: bool) -> str:
    bleu_text = f"  dev BLEU {dev_bleu:.2f}" if dev_bleu is not None else ""
    return (
        f"step {step}: train NLL {train_nll:.2f}  dev NLL {dev_nll:.2f}{bleu_text}"
        f"{'  (best, saved)' if improved else ''}"
    )
