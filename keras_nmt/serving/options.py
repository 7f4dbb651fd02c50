"""The server's options: every limit a request and a connection meet, in one place
(:class:`ServerOptions`, ``keras-nmt serve``'s flags), and their check.

The limits on what a request costs are read by :mod:`keras_nmt.serving.work_plan`; those on
connections and bodies by :mod:`keras_nmt.serving.http_guard`.
"""

from __future__ import annotations

import dataclasses
import math

from keras_nmt.serving import priority
from keras_nmt.serving.http_guard import check_allowed_hosts


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    # Host names the server answers to (any port) beside the loopback names with its port;
    # required beyond loopback; ("*",): any.
    allowed_hosts: tuple[str, ...] = ()
    port: int = 8501  # TF Serving's REST port; 0: any free one
    batch_size: int = 32  # sentences a batch (an onnxruntime run) holds at most
    max_wait: float = 0.02  # seconds the oldest request waits for others to join it, at most
    batch_gap: float = 0.005  # a batch runs once no request has come for this long (0: off)
    queue_size: int = 1024  # sentences waiting, at most; more: 503
    # Characters of text a request, at most, counted before its lines are split: what
    # splitting and tokenizing cost grows with. 16 a token at --max-tokens.
    max_chars: int = 131_072
    max_sentences: int = 256  # sentences a request, at most, once its lines are split
    max_tokens: int = 8192  # source tokens a request, at most (as the model reads them)
    max_alignment_cells: int = 262_144  # cells a request's alignments may hold, at most
    # The largest tensor a step of a request's constrained search may build, in cells
    # (keras_nmt.serving.work_plan.search_cells): 16 MiB of float32.
    max_search_cells: int = 4_194_304
    max_body_bytes: int = 1 << 20
    max_beam: int = 32
    batch_threads: int = 1  # batches run at once
    request_timeout: float = 30.0  # seconds a request may take, from its head to its answer
    read_timeout: float = 10.0  # seconds a client gets to send a request (and idle after one)
    # Connections open at once. At the cap a newcomer replaces the oldest that holds no
    # request; when all hold one, it is answered 503 and closed.
    max_connections: int = 512
    max_body_memory: int = 64 << 20  # bytes of request bodies held at once, all together
    poll_seconds: float = 1.0  # how often the model directories are read for versions; 0: never
    shutdown_timeout: float = 30.0  # seconds given to the requests held at shutdown
    # Added to the event loop's nice value for the threads that decode, parse large bodies
    # and load new versions (keras_nmt.serving.priority); 0: they share its priority.
    work_niceness: int = 0

    def check(self) -> None:
        """ValueError (one line) for options that do not fit together."""
        check_allowed_hosts(self.host, self.allowed_hosts)
        for name in ("batch_size", "queue_size", "max_chars", "max_sentences", "max_tokens",
                     "max_alignment_cells", "max_search_cells", "max_body_bytes", "max_beam", "batch_threads",
                     "max_connections", "max_body_memory"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_sentences > self.queue_size:
            raise ValueError(f"max_sentences ({self.max_sentences}) cannot exceed the queue "
                             f"size ({self.queue_size}): such a request could never be queued")
        if self.max_body_bytes > self.max_body_memory:
            raise ValueError(f"max_body_bytes ({self.max_body_bytes}) cannot exceed "
                             f"max_body_memory ({self.max_body_memory}): such a body could "
                             "never be read")
        for name in ("max_wait", "batch_gap", "shutdown_timeout", "poll_seconds"):
            if not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be finite and >= 0")
        for name in ("request_timeout", "read_timeout"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be finite and > 0")
        if not 0 <= self.work_niceness <= priority.MAX_NICE:
            raise ValueError(f"work_niceness must be between 0 and {priority.MAX_NICE}")
