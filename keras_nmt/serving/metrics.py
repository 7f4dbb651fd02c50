"""The Prometheus metrics of one server, at TF Serving's path
``/monitoring/prometheus/metrics`` (``prometheus-client``; a registry of its own, so two
servers in one process count apart).

``keras_nmt_serve_requests_total{endpoint, code}``: requests answered, by endpoint
(the route's name: translate, predict, health, ...; ``other`` for a path that matches
none) and HTTP status; ``keras_nmt_serve_request_seconds{endpoint}``: their latency;
``keras_nmt_serve_queue_sentences``: sentences waiting for a batch now;
``keras_nmt_serve_batch_sentences``: the sentences of each batch run;
``keras_nmt_serve_sentences_total``: sentences translated (its rate is sentences/s);
``keras_nmt_serve_dropped_sentences_total``: queued sentences never run because their
request stopped waiting; ``keras_nmt_serve_open_connections``;
``keras_nmt_serve_version_changes_total{model, change}``: versions loaded, unloaded or
failed by the poll of the model directory.
"""

from __future__ import annotations

import logging
from typing import Callable, TextIO

from prometheus_client import (
    CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest,
)
from prometheus_client.core import CounterMetricFamily

PATH = "/monitoring/prometheus/metrics"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _CounterOf:
    """A counter whose value another object keeps (read when scraped)."""

    def __init__(self, name: str, documentation: str, value: Callable[[], float]):
        self.name, self.documentation, self.value = name, documentation, value

    def collect(self):
        yield CounterMetricFamily(self.name, self.documentation, value=self.value())


class Metrics:
    def __init__(self, batch_size: int, queued: Callable[[], float],
                 dropped: Callable[[], float], connections: Callable[[], float]):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("keras_nmt_serve_requests", "Requests answered, by endpoint "
                                "and HTTP status.", ["endpoint", "code"], registry=self.registry)
        self.latency = Histogram("keras_nmt_serve_request_seconds", "Seconds from a request's "
                                 "head to its answer.", ["endpoint"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.queue = Gauge("keras_nmt_serve_queue_sentences", "Sentences waiting for a batch.",
                           registry=self.registry)
        self.queue.set_function(queued)
        sizes, size = [], 1
        while size < batch_size:
            sizes.append(size)
            size *= 2
        self.batch = Histogram("keras_nmt_serve_batch_sentences", "Sentences in each batch run.",
                               buckets=(*sizes, batch_size), registry=self.registry)
        self.sentences = Counter("keras_nmt_serve_sentences", "Sentences translated.",
                                 registry=self.registry)
        self.registry.register(_CounterOf("keras_nmt_serve_dropped_sentences", "Queued "
                                          "sentences never run: their request stopped "
                                          "waiting first.", dropped))
        self.connections = Gauge("keras_nmt_serve_open_connections", "Open client connections.",
                                 registry=self.registry)
        self.connections.set_function(connections)
        self.connection_errors = Counter(
            "keras_nmt_serve_connection_errors", "Errors on a connection outside any handler "
            "(a body that cannot be decoded, a broken request), by kind: logged once a kind.",
            ["kind"], registry=self.registry)
        self.versions = Counter("keras_nmt_serve_version_changes", "Model versions loaded, "
                                "unloaded or failed to load by the poll of the model directory.",
                                ["model", "change"], registry=self.registry)

    def answered(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def batch_ran(self, sentences: int) -> None:
        """Thread-safe: called from the batch threads."""
        self.batch.observe(sentences)
        self.sentences.inc(sentences)

    def exposition(self) -> tuple[bytes, str]:
        """The text format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class ConnectionErrorLog(logging.Logger):
    """What aiohttp logs of a connection outside the handlers (a refused body that cannot
    be decoded while its rest is read and dropped, say): counted by kind in the metrics,
    and one line on the log the first time a kind is seen. aiohttp's own logger writes a
    traceback for each, which a client can repeat at will until the log fills a disk or
    a pipe nobody reads blocks the event loop."""

    def __init__(self, stream: TextIO, prog: str, metrics: Metrics):
        super().__init__("keras_nmt.serve.connections", logging.WARNING)  # unregistered
        self.stream, self.prog, self.metrics = stream, prog, metrics
        self.seen: set[str] = set()

    def handle(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        kind = type(error).__name__ if error is not None else "message"
        self.metrics.connection_errors.labels(kind).inc()
        if kind in self.seen:
            return
        self.seen.add(kind)
        what = f"{kind}: {' '.join(str(error).split())[:300]}" if error is not None else ""
        print(f"{self.prog}: on a connection: {' '.join(record.getMessage().split())[:200]}"
              f"{': ' + what if what else ''} (logged once; counted in "
              "keras_nmt_serve_connection_errors)", file=self.stream, flush=True)
