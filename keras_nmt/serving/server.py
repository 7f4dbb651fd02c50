"""The HTTP translation server of ``keras-nmt serve`` (aiohttp, onnxruntime; no TensorFlow).

Endpoints:

- ``POST /v1/models/NAME[/versions/N | /labels/L]:predict``: TF Serving's REST predict
  API for the export's ``serving_default`` and ``translate`` signatures
  (:mod:`keras_nmt.serving.rest_formats`); an input of several sentences is split into
  them, or not, as the export's SavedModel does;
- ``GET /v1/models/NAME[/versions/N]`` (status) and ``.../metadata`` (signatures), as
  TF Serving answers them;
- ``POST /translate``: ``{"text": [...], "model", "version", "beam", "alpha", "nbest",
  "no_unk", "alignment", "confidence", "split_sentences", "constraints", "avoid",
  "prefix", "glossary"}`` (all but ``text`` optional) -> ``{"model", "version", "beam", "alpha",
  "translations": [{"text", "score", "truncated", "nbest": [{"text", "score",
  "tokens"}]}]}``; with ``"alignment": true`` each translation also has
  ``"alignment"``: ``{"sentences": [{"source_start", "target_start", "source_tokens",
  "target_tokens", "token_logprobs", "attention"}, ...]}``, a block for each sentence of
  the line (:meth:`OnnxTranslator.translate`'s ``align``; ``attention`` has a row per
  target token and a column per source token, EOS last on both; null for RNNencdec;
  ``source_start`` and ``target_start`` are where the sentence's tokens begin among the
  line's), null for an empty line. With ``"confidence": true`` each translation also has
  ``"confidence"`` (the line's figure; null for an empty line), ``"sentences"`` (each
  sentence's) and ``"words"`` (``[word, figure]`` pairs), what ``onnx-translate
  --confidence`` writes (:mod:`keras_nmt.decoding.confidence`). A text of several sentences is split into them and
  their translations joined, as the export does (``GET /models`` says);
  ``"split_sentences": false`` translates each text whole. ``"constraints"`` and
  ``"avoid"`` (per text a list of target phrases, or null), ``"prefix"`` (per text a
  string, or null), each a list aligned with ``text``, and ``"glossary"`` (``[[source
  term, target term], ...]`` for the whole request: a term is a phrase to include of each
  text whose source tokens hold its source term) say what the translations must respect
  (:mod:`keras_nmt.decoding.constraints`; an export with the constrained search); a translation
  that misses a phrase (its length limit came first) has ``"unmet"``, the phrases. TF
  Serving's predict API takes the same per instance (:mod:`~keras_nmt.serving.rest_formats`);
- ``GET /health`` (200 while serving), ``GET /models`` (each model's languages, search
  settings and limits, ``"constraints"``: whether it takes them, and ``"confidence"``:
  whether it can give it), ``GET /stats`` (the batcher's counters), and Prometheus metrics
  at TF Serving's ``GET /monitoring/prometheus/metrics`` (:mod:`keras_nmt.serving.metrics`);
- ``GET /``: a page to try the models (a text box, the translation, its n-best list and
  scores, each word coloured by the model's confidence in it, and the alignment as the
  paper's Fig. 3 heat map), from the package's
  ``static/`` files alone. With the constrained search, the translation can be edited:
  the model completes it from the cursor on (the text before it sent as the prefix), and
  glossary terms entered beside the text are sent with each request.

What a request costs is bounded before any of it is queued: its text is at most
``max_chars`` characters (what splitting and tokenizing it cost grows with), its lines are
split into sentences here (the export's rules, :func:`keras_nmt.text.sentences.split_sentences`),
and the sentences (``max_sentences``), their source tokens and the target tokens of their
constraints (``max_tokens``) and the cells its alignments could hold, an output grown to
fit its constraints included (``max_alignment_cells``; a confidence from an export
whose search does not return its tokens' log-probabilities runs the same force-decoding
pass as an alignment, and its cells count alike), are counted; constraints are
checked (:class:`keras_nmt.decoding.constraints.Encoder`) before anything is queued. The sentences go through
one :class:`~keras_nmt.serving.batcher.Batcher` (requests that arrive together share an
onnxruntime run; a large request runs as several batches, and nothing more of it runs
once it no longer waits), each translated whole, and each line's translation is joined
from its sentences' (:func:`keras_nmt.decoding.translation.join_translations`). A line with
constraints goes through whole (:class:`ConstrainedLine`): the translator places its
phrases in its sentences (:func:`keras_nmt.decoding.constraints.assign`). Parsing a large
body, splitting it and writing a large answer run in worker threads, so the event loop
keeps answering (``/health`` included) while they run; an alignment is written a sentence
at a time, its numbers converted by numpy.

What a request gets wrong is a 4xx answer ``{"error": REASON}`` (one line), never a
crash: a ``Host`` other than the server's own names on loopback (421), a POST from
another origin (403) or whose body is not declared JSON (415), a body over the size
limit (413) or not sent within ``read_timeout`` (408), bytes that are not UTF-8, JSON that
is not the API's, too many characters, sentences, tokens or alignment cells, constraints that
cannot be decoded (an empty phrase, more than 16, longer than an output may be, a phrase
to include holding one to avoid) or asked of an export without the constrained search,
a glossary of more than :data:`MAX_GLOSSARY_TERMS` terms, a beam outside
1..max_beam, an n-best list longer than the beam or than the export returns (400), an
unknown model, version or path (404). A full queue, or too many request bodies or
connections holding requests at once, answers 503 at once (a connection that holds no
request gives its place to a newcomer); a request not answered within
``request_timeout`` gets 504 and its queued work is dropped, as is that of a client that
goes away. The models' directories are polled for new versions (``poll_seconds``;
:meth:`Registry.poll`). On SIGTERM or SIGINT the server stops listening, answers the
requests it holds for at most ``shutdown_timeout`` seconds (503 for what is still queued
then), and returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import json
import logging
import math
import pathlib
import signal
import sys
import time
from typing import Callable, Sequence, TextIO

import numpy as np
from aiohttp import web
# What aiohttp does for a route without an expect handler of its own: private, so
# tests/test_server.py checks that it still answers 100 Continue.
from aiohttp.web_urldispatcher import _default_expect_handler as _CONTINUE

from keras_nmt.decoding.confidence import line_fields
from keras_nmt.decoding.constraints import Glossary, LineConstraints
from keras_nmt.core.errors import ConstraintError, RequestError, UsageError
from keras_nmt.serving import priority, rest_formats as rest
from keras_nmt.serving.batcher import Batcher, DaemonThreads
from keras_nmt.serving.http_guard import (
    BodyBudget, LimitedSite, RequestGuard, Requests, check_allowed_hosts, must_close,
)
from keras_nmt.serving.metrics import PATH as METRICS_PATH, Metrics
from keras_nmt.serving.registry import Registry, Servable
from keras_nmt.text.sentences import split_sentences
from keras_nmt.decoding.translation import Translation, join_translations

# The page at / and its files: in the package, nothing fetched from elsewhere (offline).
STATIC = pathlib.Path(__file__).resolve().parent / "static"
STATIC_FILES = ("page.js", "page.css")
MAX_ALPHA = 10.0  # length normalisation exponents beyond this only overflow
TRANSLATE_KEYS = {"text", "model", "version", "beam", "alpha", "nbest", "no_unk", "alignment",
                  "confidence", "split_sentences", *rest.CONSTRAINT_INPUTS, "glossary"}
# Terms of a request's glossary, at most: each is looked for in every line.
MAX_GLOSSARY_TERMS = 64
BODY_ROUTES = {"predict", "translate"}  # the routes that read a JSON body
# Above these a request's parsing, splitting and answer run in a worker thread; below,
# on the event loop (a thread's hand-off costs more than the work).
BIG_BODY = 16 << 10
BIG_SENTENCES = 32
BIG_CELLS = 4096
SPLIT_PREFIX = 16 << 10  # characters of a long line split first (then 4 times as many)
LINGERING_TIME = 1.0  # seconds the rest of a refused body is read before closing
ALIGNMENT_DECIMALS = 6  # attention weights lie in [0, 1]: 6 decimals are ±5e-7


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
    # splitting and tokenizing cost grows with (a 1 MB line of one sentence took 5-8 s
    # of CPU to be read, nothing decoded). 16 a token at --max-tokens.
    max_chars: int = 131_072
    max_sentences: int = 256  # sentences a request, at most, once its lines are split
    max_tokens: int = 8192  # source tokens a request, at most (as the model reads them)
    max_alignment_cells: int = 262_144  # cells a request's alignments may hold, at most
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
                     "max_alignment_cells", "max_body_bytes", "max_beam", "batch_threads",
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


@dataclasses.dataclass(frozen=True)
class Search:
    """What one batch shares: the model and the search settings of its sentences."""

    servable: Servable
    beam: int
    alpha: float
    forbid_unk: bool = False
    align: bool = False  # also force-decode each best hypothesis (its attention matrix)
    confidence: bool = False  # also its confidence (the search's log-probabilities)


@dataclasses.dataclass(frozen=True)
class ConstrainedLine:
    """A line with constraints, one item of the batcher: translated by itself, split into
    its sentences when ``split`` (the translator places each phrase in its sentence, or
    translates the line whole: :func:`keras_nmt.decoding.constraints.assign`), and its result is
    the line's Translation."""

    text: str
    constraints: LineConstraints
    split: bool = False


@dataclasses.dataclass(frozen=True)
class Sentences:
    """A request's lines split into the items the batcher translates: a sentence (text),
    or a :class:`ConstrainedLine`."""

    sentences: list[str | ConstrainedLine]
    counts: list[int]  # items of each line, in order
    # The most cells their force decoding (alignments, confidence) can hold; 0 without.
    cells: int = 0
    split_count: int = 0  # sentences once the lines are split (what the answer costs)

    def lines(self, results: Sequence[Translation]) -> list[list[Translation]]:
        """``results`` (one per item) cut into each line's; :class:`RequestError` 400 for a
        line whose constraints the translator refused (:meth:`TranslationServer._run`)."""
        for result in results:
            if isinstance(result, ConstraintError):
                raise rest.bad(str(result))
        found, start = [], 0
        for count in self.counts:
            found.append(list(results[start : start + count]))
            start += count
        return found

    @property
    def heavy(self) -> bool:
        """Whether the answer is worth a worker thread."""
        return (max(len(self.sentences), self.split_count) > BIG_SENTENCES
                or self.cells > BIG_CELLS)


@dataclasses.dataclass(frozen=True)
class _Ask:
    """A ``POST /translate`` read and checked."""

    search: Search
    nbest: int
    work: Sentences


class TranslationServer:
    """The aiohttp application over a :class:`Registry`, its batcher, and its life:
    :meth:`start`, :meth:`stop`, or :meth:`run` until a signal."""

    def __init__(self, registry: Registry, options: ServerOptions = ServerOptions(),
                 log: TextIO | None = None, prog: str = "keras-nmt serve"):
        options.check()
        self.registry = registry
        self.options = options
        self.log = sys.stderr if log is None else log
        self.prog = prog
        for servable in registry.servables():
            self.check_servable(servable)
        self.batcher = Batcher(self._translate_batch, options.batch_size, options.max_wait,
                               options.queue_size, options.batch_threads, options.batch_gap)
        self.bodies = BodyBudget(options.max_body_memory)
        self.metrics = Metrics(options.batch_size, lambda: self.batcher.stats.waiting,
                               lambda: self.batcher.stats.dropped, self._open_connections)
        self.serving = False
        self._runner: web.AppRunner | None = None
        self._site: LimitedSite | None = None
        self._requests = Requests()  # which connections hold a request (LimitedSite)
        self._guard: RequestGuard | None = None
        self._workers: concurrent.futures.ThreadPoolExecutor | None = None
        self._poller: asyncio.Task | None = None
        self._polls = DaemonThreads("poll")
        self.url: str | None = None

    def check_servable(self, servable: Servable) -> None:
        """:class:`UsageError` (one line) for a version the options cannot serve: its own
        beam above ``max_beam`` would refuse every request that takes the default."""
        beam = servable.translator.beam_size
        if beam > self.options.max_beam:
            raise UsageError(f"model {servable.name!r} version {servable.version} searches "
                             f"with beam {beam}, above --max-beam {self.options.max_beam}: "
                             "raise --max-beam or export with a smaller --beam")

    # ---- the application ---------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.options.max_body_bytes,
                              middlewares=[self._requests.middleware, self._answered,
                                           self._checked, self._deadline])
        model = r"/v1/models/{name:[^/:]+}"
        which = r"{which:(/versions/\d+|/labels/[^/:]+)?}"
        app.router.add_post(model + which + ":predict", self.predict, name="predict",
                            expect_handler=self._expect)
        app.router.add_get(model + r"{which:(/versions/\d+)?}", self.status, name="status")
        app.router.add_get(model + r"{which:(/versions/\d+)?}/metadata", self.metadata,
                           name="metadata")
        app.router.add_post("/translate", self.translate, name="translate",
                            expect_handler=self._expect)
        app.router.add_get("/health", self.health, name="health")
        app.router.add_get("/models", self.models, name="models")
        app.router.add_get("/stats", self.stats, name="stats")
        app.router.add_get(METRICS_PATH, self.prometheus, name="metrics")
        app.router.add_get("/", self.page, name="page")
        app.router.add_get("/static/{file}", self.static_file, name="static")
        return app

    @web.middleware
    async def _answered(self, request: web.Request, handler):
        """Every refusal as ``{"error": REASON}`` with its status, aiohttp's own (no route,
        wrong method) included; an unforeseen error is logged and is a 500 for that
        request only. Each answer is counted in the metrics (499: the client went away)."""
        start = time.perf_counter()
        route = request.match_info.route.name or "other"
        try:
            response = await self._answer(request, handler)
        except asyncio.CancelledError:
            self.metrics.answered(route, 499, time.perf_counter() - start)
            raise
        self.metrics.answered(route, response.status, time.perf_counter() - start)
        return response

    async def _answer(self, request: web.Request, handler):
        try:
            return await handler(request)
        except RequestError as error:
            response = _error(error.status, error.reason)
            if must_close(request):
                response.force_close()
            return response
        except web.HTTPException as error:
            if error.status < 400:
                raise
            reason = error.text if error.status != 404 else (
                f"Malformed request: {request.method} {request.path[:200]}")
            return _error(error.status, " ".join(str(reason).split()))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 (a bug: one request fails, not the server)
            where = ascii(request.path[:200])  # one line, whatever the path holds
            print(f"{self.prog}: internal error on {request.method} {where}: "
                  f"{type(error).__name__}: {str(error)[:500]!r}", file=self.log, flush=True)
            return _error(500, f"internal error: {type(error).__name__}")

    async def _expect(self, request: web.Request) -> None:
        """``Expect: 100-continue``: the client is asked for its body only when nothing
        refuses it before it is read (:meth:`RequestGuard.refuses_body`); otherwise
        nothing is sent here, and the refusal answers the request before the body comes."""
        if not self._guard.refuses_body(request, self.options.max_body_bytes):
            await _CONTINUE(request)  # aiohttp's: 100 Continue, or 417 for another Expect

    @web.middleware
    async def _checked(self, request: web.Request, handler):
        """The Host of a server on loopback; the Origin and Content-Type of a body."""
        self._guard.check_host(request)
        if request.method == "POST" and request.match_info.route.name in BODY_ROUTES:
            self._guard.check_post(request)
        return await handler(request)

    @web.middleware
    async def _deadline(self, request: web.Request, handler):
        """504 once a request has taken ``request_timeout``: what it waits for is
        cancelled, and the batcher drops its sentences not yet run."""
        timeout = self.options.request_timeout
        try:
            async with asyncio.timeout(timeout):
                return await handler(request)
        except TimeoutError:
            raise RequestError(504, f"the request was not answered within {timeout:g} s "
                                    "(--request-timeout)") from None

    async def _body(self, request: web.Request, read: Callable[[object], object]):
        """``read(parsed JSON)`` of the request's body; for a large body, parsed and read
        in a worker thread. Its bytes count against ``max_body_memory`` until then."""
        raw = await self.bodies.read(request, self.options.max_body_bytes,
                                     self.options.read_timeout)
        try:
            return await self._work(len(raw) > BIG_BODY, lambda: read(_parse_json(raw)))
        finally:
            self.bodies.release(len(raw))

    async def _work(self, big: bool, function: Callable[[], object]):
        """``function()``: in a worker thread when ``big``, else here."""
        if not big:
            return function()
        return await asyncio.get_running_loop().run_in_executor(self._workers, function)

    def _servable(self, request: web.Request) -> Servable:
        which = request.match_info.get("which") or ""
        name = request.match_info["name"]
        if which.startswith("/versions/"):
            return self.registry.find(name, version=_version(which[len("/versions/"):]))
        if which.startswith("/labels/"):
            return self.registry.find(name, label=which[len("/labels/"):])
        return self.registry.find(name)

    # ---- TF Serving's REST API ---------------------------------------------------------

    async def predict(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        translator = servable.translator

        def read(body):
            call = rest.parse_predict(body)
            beam = translator.beam_size if call.beam is None else call.beam
            alpha = translator.alpha if call.alpha is None else call.alpha
            if call.confidence:
                _check_confidence(servable)
            search = self._search(servable, beam, alpha, nbest=1,
                                  confidence=call.confidence)
            # Split as the export's SavedModel splits.
            return call, search, self._sentences(servable, call.sentences,
                                                 translator.split_sentences,
                                                 rules=call.constraints,
                                                 where="inputs" if call.columnar else "instances",
                                                 confidence=call.confidence)

        call, search, work = await self._body(request, read)
        results = await self.batcher.submit(search, work.sentences)
        parts_of_lines = work.lines(results)

        def answer() -> str:
            lines = [join_translations(parts, translator.tgt_lang) for parts in parts_of_lines]
            return json.dumps(rest.predict_answer(call, lines, translator.max_nbest),
                              ensure_ascii=False)

        return _json_text(await self._work(work.heavy, answer))

    async def status(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        versions = ([servable.version] if request.match_info.get("which")
                    else list(self.registry.models.get(servable.name, {})) or [servable.version])
        return _json(rest.status_answer(versions))

    async def metadata(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        return _json(rest.metadata_answer(servable.name, servable.version,
                                          servable.translator.max_nbest))

    # ---- the plain JSON API --------------------------------------------------------------

    async def translate(self, request: web.Request) -> web.Response:
        ask = await self._body(request, self._read_translate)
        results = await self.batcher.submit(ask.search, ask.work.sentences)
        ask.work.lines(results)  # a line refused by the translator: 400
        return _json_text(await self._work(ask.work.heavy, lambda: self._translate_answer(
            ask, results)))

    def _read_translate(self, body) -> _Ask:
        if not isinstance(body, dict):
            raise rest.bad("the request body must be a JSON object with 'text'")
        unknown = sorted(set(body) - TRANSLATE_KEYS)
        if unknown:
            raise rest.bad(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(TRANSLATE_KEYS))})")
        if "text" not in body:
            raise rest.bad("the request needs 'text', a list of sentences")
        lines = rest.sentences_value(body["text"], "text")
        servable = self._default_servable(body)
        translator = servable.translator
        nbest = rest.int_value(body.get("nbest", 1), "nbest")
        beam = rest.int_value(body["beam"], "beam") if "beam" in body else max(
            translator.beam_size, nbest)
        alpha = rest.float_value(body["alpha"], "alpha") if "alpha" in body else translator.alpha
        no_unk, align = body.get("no_unk", False), body.get("alignment", False)
        confidence = body.get("confidence", False)
        split = body.get("split_sentences", translator.split_sentences)
        for key, value in (("no_unk", no_unk), ("alignment", align),
                           ("confidence", confidence), ("split_sentences", split)):
            if not isinstance(value, bool):
                raise rest.bad(f"{key} must be true or false")
        if align:
            _check_forced(servable, "alignments")
        if confidence:
            _check_confidence(servable)
        search = self._search(servable, beam, alpha, nbest, no_unk, align, confidence)
        rules = rest.constraint_columns(body, len(lines))
        glossary = _glossary(body.get("glossary"))
        return _Ask(search, nbest, self._sentences(servable, lines, split, align, rules,
                                                   glossary, where="text",
                                                   confidence=confidence))

    def _translate_answer(self, ask: _Ask, results: Sequence[Translation]) -> str:
        """The answer's JSON text, a line at a time and an alignment a sentence at a time
        (each short ``json.dumps`` lets the event loop's thread take the GIL between them)."""
        search = ask.search
        lang = search.servable.translator.tgt_lang
        lines = []
        for parts in ask.work.lines(results):
            line = join_translations(parts, lang)
            found = _translation(line, ask.nbest)
            if line.unmet:
                found["unmet"] = list(line.unmet)
            if search.confidence:
                found.update(line_fields(line.confidence, [
                    part.confidence for part in line.sentences or (line,)]))
            text = json.dumps(found, ensure_ascii=False)
            if search.align:
                # Each sentence's own alignment, never the line's (a dense matrix of
                # all its sentences, mostly zeros).
                text = f'{text[:-1]}, "alignment": {_alignment_json(line.sentences or (line,))}}}'
            lines.append(text)
        head = json.dumps({"model": search.servable.name, "version": search.servable.version,
                           "beam": search.beam, "alpha": rest.float32_json(search.alpha)},
                          ensure_ascii=False)
        return f'{head[:-1]}, "translations": [{", ".join(lines)}]}}'

    def _default_servable(self, body: dict) -> Servable:
        version = body.get("version")
        if version is not None:
            version = rest.int_value(version, "version")
        if "model" in body:
            if not isinstance(body["model"], str):
                raise rest.bad("model must be a string")
            return self.registry.find(body["model"], version)
        models = self.registry.models
        if len(models) != 1:
            raise rest.bad(f"name the model: {', '.join(sorted(models))} are served")
        return self.registry.find(next(iter(models)), version)

    def _search(self, servable: Servable, beam: int, alpha: float, nbest: int,
                forbid_unk: bool = False, align: bool = False,
                confidence: bool = False) -> Search:
        """The batch key of a request, once its settings are within limits."""
        limits, translator = self.options, servable.translator
        if not 1 <= beam <= limits.max_beam:
            raise rest.bad(f"the beam size must be between 1 and {limits.max_beam} "
                           f"(--max-beam), got {beam}")
        if not 0 <= alpha <= MAX_ALPHA:
            raise rest.bad(f"alpha must be between 0 and {MAX_ALPHA:g}, got {alpha:g}")
        if not 1 <= nbest <= translator.max_nbest:
            raise rest.bad(f"nbest must be between 1 and {translator.max_nbest} (the export "
                           f"returns at most {translator.max_nbest}: export with --nbest N "
                           f"for more), got {nbest}")
        if nbest > beam:
            raise rest.bad(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
        return Search(servable, beam, float(alpha), bool(forbid_unk), align, confidence)

    def _sentences(self, servable: Servable, lines: Sequence[str], split: bool,
                   align: bool = False, rules: Sequence[LineConstraints | None] | None = None,
                   glossary: Glossary | None = None, where: str = "text",
                   confidence: bool = False) -> Sentences:
        """``lines`` split into sentences (by the source language's rules, with
        ``split``), within the request's limits: characters (of all the lines, counted
        before any is split), sentences, tokens (the source's as the
        model reads them, cut to its maximum source length, and the target tokens of the
        lines' constraints: ``rules`` per line, and the ``glossary``'s terms each line's
        source holds) and, with ``align`` or ``confidence`` (the same force-decoding
        pass), the most cells their alignments can hold. 400 with the limit's option
        beyond one, or the reason constraints cannot be decoded (``where`` names the
        lines in it)."""
        limits, translator = self.options, servable.translator
        chars = sum(map(len, lines))
        if chars > limits.max_chars:  # before any splitting or tokenizing is paid for
            raise rest.bad(f"{chars} characters of text in one request; at most "
                           f"{limits.max_chars} (--max-chars)")
        forced = _forced_work(align, confidence and not translator.scores_tokens)
        sentences, counts = [], []
        for line in lines:
            found = [line]
            if split:
                found = _split_within(line, translator.src_lang,
                                      limits.max_sentences - len(sentences))
            sentences += found
            counts.append(len(found))
            if len(sentences) > limits.max_sentences:
                split_note = " once its lines are split into sentences" if split else ""
                raise rest.bad(f"more than {limits.max_sentences} sentences in one request"
                               f"{split_note}; at most {limits.max_sentences} (--max-sentences)")
        if not sentences:
            raise rest.bad("no sentences to translate")
        tokens = cells = 0
        lengths = []  # source tokens of each sentence
        for sentence in sentences:
            count = len(translator.source(sentence).tokens)
            lengths.append(count)
            tokens += count
            if tokens > limits.max_tokens:
                raise rest.bad(f"more than {limits.max_tokens} source tokens in one request; "
                               f"at most {limits.max_tokens} (--max-tokens)")
            if forced:
                cells += servable.alignment_cells(count)
        if forced and cells > limits.max_alignment_cells:
            raise _too_many_cells(cells, limits.max_alignment_cells, forced)
        if not rules and glossary is None:
            return Sentences(sentences, counts, cells, len(sentences))
        return self._constrained(servable, lines, sentences, counts, lengths, tokens, cells,
                                 split, forced, rules, glossary, where)

    def _constrained(self, servable: Servable, lines: Sequence[str], sentences: list[str],
                     counts: list[int], lengths: list[int], tokens: int, cells: int,
                     split: bool, forced: str, rules, glossary, where: str) -> Sentences:
        """:meth:`_sentences` for lines with constraints: each line's checked and encoded
        as the translator will (:class:`~keras_nmt.decoding.constraints.Encoder`), their target
        tokens added to ``tokens`` and, when ``forced`` names what is force-decoded
        (:func:`_forced_work`), the cells of their longer outputs to ``cells``; a
        constrained line becomes one :class:`ConstrainedLine` item."""
        limits, translator = self.options, servable.translator
        if not translator.constrains:
            raise rest.bad(f"model {servable.name!r} version {servable.version} has no "
                           "constrained search: export it again with --constrained for "
                           "constraints, prefixes and glossaries")
        # The translator's own check and limit: what passes here passes there.
        encoder = translator.constraint_encoder()
        # The request's terms tokenized once, not once a line.
        terms_of = (None if glossary is None
                    else glossary.matcher(translator.source_codec.tokenize))
        items: list[str | ConstrainedLine] = []
        start = 0
        for n, (line, count) in enumerate(zip(lines, counts)):
            parts, part_lengths = sentences[start : start + count], lengths[start : start + count]
            start += count
            found = (rules[n] if rules else None) or LineConstraints()
            if terms_of is not None:
                found = found.merged(terms_of([token for part in parts
                                               for token in translator.source(part).tokens]))
            if not found:
                items += parts
                continue
            try:
                encoded = encoder.encode(found)
            except ConstraintError as error:
                raise rest.bad(f"{where}[{n}]: {error}") from None
            tokens += (len(encoded.prefix.ids) + sum(len(p.ids) for p in encoded.include)
                       + sum(len(p.ids) for p in encoded.avoid))
            if tokens > limits.max_tokens:
                raise rest.bad(f"more than {limits.max_tokens} tokens in one request, source "
                               "tokens and the target tokens of its constraints; at most "
                               f"{limits.max_tokens} (--max-tokens)")
            if forced:
                # Its output grows to fit its prefix and phrases; translated whole (a
                # prefix, or phrases no sentence can be told for) it is one matrix.
                needed = encoded.required_tokens() + 1
                apart = sum(_cells(servable, length, needed) for length in part_lengths)
                whole = _cells(servable, min(sum(part_lengths), translator.max_source_len),
                               needed)
                cells += max(apart, whole) - sum(servable.alignment_cells(length)
                                                 for length in part_lengths)
                if cells > limits.max_alignment_cells:
                    raise _too_many_cells(cells, limits.max_alignment_cells, forced)
            items.append(ConstrainedLine(parts[0] if count == 1 else line, found,
                                         split and count > 1))
            counts[n] = 1
        return Sentences(items, counts, cells, len(sentences))

    def _translate_batch(self, search: Search, items: list) -> list:
        """One batch of items, in a batch thread: sentences, each translated whole, and
        constrained lines (:class:`ConstrainedLine`), split into their sentences or not;
        every n-best hypothesis the export returns (a request takes the part it asked for)."""
        results: list = [None] * len(items)
        for split in (False, True):
            chosen = [i for i, item in enumerate(items)
                      if isinstance(item, ConstrainedLine) and item.split == split
                      or not isinstance(item, ConstrainedLine) and not split]
            if chosen:
                for i, result in zip(chosen, self._run(search, [items[i] for i in chosen],
                                                       split)):
                    results[i] = result
        self.metrics.batch_ran(len(items))
        return results

    def _run(self, search: Search, items: list, split: bool) -> list:
        """The translations of ``items``. Their constraints were checked as the translator
        checks them; should it refuse one anyway, each item is translated alone and the
        refused one's result is its :class:`ConstraintError` (its request gets 400, the
        others of the batch their translations)."""
        translator = search.servable.translator
        texts = [item.text if isinstance(item, ConstrainedLine) else item for item in items]
        found = [item.constraints if isinstance(item, ConstrainedLine) else None
                 for item in items]
        options = dict(beam_size=search.beam, alpha=search.alpha,
                       nbest=min(translator.max_nbest, search.beam),
                       forbid_unk=search.forbid_unk, batch_size=self.options.batch_size,
                       align=search.align, confidence=search.confidence,
                       split_sentences=split)
        if any(found):
            options["constraints"] = found
        try:
            return translator.translate(texts, **options)
        except ConstraintError as error:
            if len(items) == 1:
                return [error]
            return [result for item in items for result in self._run(search, [item], split)]

    # ---- health, models, stats, metrics, the page -----------------------------------------

    async def page(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def static_file(self, request: web.Request) -> web.FileResponse:
        """Only the page's own files: a path is never looked up on disk as asked."""
        name = request.match_info["file"]
        if name not in STATIC_FILES:
            raise RequestError(404, f"no such file: {name[:100]}")
        return web.FileResponse(STATIC / name)

    async def health(self, request: web.Request) -> web.Response:
        if not self.serving:
            return _error(503, "shutting down")
        return _json({"status": "serving",
                      "models": {n: sorted(v) for n, v in sorted(self.registry.models.items())}})

    async def models(self, request: web.Request) -> web.Response:
        # "constraints": whether POST /translate and predict take them; "confidence":
        # whether they can give it (the force-decoding model). The page asks both.
        return _json({"models": [{**s.describe(), "constraints": s.translator.constrains,
                                  "confidence": s.translator.gives_confidence}
                                 for s in self.registry.servables()]})

    async def stats(self, request: web.Request) -> web.Response:
        return _json({**dataclasses.asdict(self.batcher.stats),
                      "batch_size": self.options.batch_size,
                      "queue_size": self.options.queue_size,
                      "connections": self._open_connections(),
                      "refused_connections": self._site.refused if self._site else 0,
                      "dropped_connections": self._site.dropped if self._site else 0})

    async def prometheus(self, request: web.Request) -> web.Response:
        body, kind = self.metrics.exposition()
        response = web.Response(body=body)
        response.headers["Content-Type"] = kind
        return response

    def _open_connections(self) -> int:
        return self._site.open_connections() if self._site is not None else 0

    # ---- life ------------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen; returns the URL (the port chosen when ``port`` is 0)."""
        options = self.options
        self.batcher.start()
        lowered = None
        if options.work_niceness:
            lowered = functools.partial(priority.lower,
                                        priority.nice_of() + options.work_niceness)
        self.batcher.threads_of_batches.starting = self._polls.starting = lowered
        self._workers = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="request",
                                                              initializer=lowered)
        # keepalive_timeout also closes a connection that has not sent a whole request head
        # within it (aiohttp starts it when the connection opens); the rest of a body
        # refused unread is read and dropped for at most lingering_time, then the
        # connection is closed. Bodies are read as sent, never inflated: a compressed one
        # is refused (415), and its rest is dropped without being decoded, where a failure
        # to inflate it would reset the connection before the client read the refusal.
        self._runner = web.AppRunner(self.application(), access_log=None,
                                     auto_decompress=False,
                                     handle_signals=False, handler_cancellation=True,
                                     shutdown_timeout=options.shutdown_timeout,
                                     keepalive_timeout=options.read_timeout,
                                     lingering_time=min(options.read_timeout, LINGERING_TIME),
                                     logger=ConnectionErrorLog(self.log, self.prog, self.metrics))
        await self._runner.setup()
        self._site = LimitedSite(self._runner, options.host, options.port,
                                 options.max_connections, self._requests)
        try:
            await self._site.start()
        except BaseException:
            await self._runner.cleanup()
            await self.batcher.close(0)
            self._workers.shutdown(wait=False)
            raise
        host, port = self._runner.addresses[0][:2]
        self._guard = RequestGuard(options.host, port, options.allowed_hosts)
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        if options.poll_seconds > 0 and self.registry.sources:
            self._poller = asyncio.create_task(self._poll())
        self.serving = True
        return self.url

    async def _poll(self) -> None:
        """Read the model directories every ``poll_seconds`` for versions to load or
        unload (in a thread: loading takes seconds), and log what changed."""
        while True:
            await asyncio.sleep(self.options.poll_seconds)
            try:
                changes = await self._polls.run(self.registry.poll, self.check_servable)
            except Exception as error:  # noqa: BLE001 (a bug: the poll goes on)
                changes = []
                print(f"{self.prog}: the poll of the model directories failed: "
                      f"{type(error).__name__}: {str(error)[:500]!r}", file=self.log, flush=True)
            for change in changes:
                self.metrics.versions.labels(change.name, change.kind).inc()
                print(f"{self.prog}: {change}", file=self.log, flush=True)

    async def stop(self) -> None:
        """Stop listening and answer the requests held for at most ``shutdown_timeout``
        seconds (new ones on open connections get 503); what is still queued then gets
        503, and a batch still running is left to its thread."""
        self.serving = False
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        # The batcher drains its queue until the timeout while aiohttp waits for the
        # handlers; at the timeout it answers the rest, so the handlers end too.
        closing = asyncio.create_task(self.batcher.close(self.options.shutdown_timeout))
        try:
            if self._runner is not None:
                await self._runner.cleanup()
        finally:
            await closing
            if self._workers is not None:
                self._workers.shutdown(wait=False, cancel_futures=True)

    def busy(self) -> bool:
        """Whether a batch or a model load still runs in a thread after :meth:`stop`."""
        return self.batcher.threads_of_batches.running() or self._polls.running()

    async def run(self, ready=None) -> None:
        """Serve until SIGTERM or SIGINT, then :meth:`stop`. ``ready(url)`` is called
        once listening."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        try:
            url = await self.start()
            if ready is not None:
                ready(url)
            await stopping.wait()
            await self.stop()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)


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


def _glossary(value) -> Glossary | None:
    """A request's ``"glossary"``: ``[[source term, target term], ...]`` (null: none), at
    most :data:`MAX_GLOSSARY_TERMS` pairs of non-empty strings, each within
    :data:`~keras_nmt.serving.rest_formats.MAX_PHRASE_CHARS` characters."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise rest.bad("glossary must be a list of [source term, target term] pairs")
    if len(value) > MAX_GLOSSARY_TERMS:
        raise rest.bad(f"the glossary holds {len(value)} terms; at most {MAX_GLOSSARY_TERMS}")
    terms = []
    for i, pair in enumerate(value):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(term, str) for term in pair)):
            raise rest.bad(f"glossary[{i}] must be a [source term, target term] pair of strings")
        terms.append(tuple(rest.phrase_value(term, f"glossary[{i}][{j}]").strip()
                           for j, term in enumerate(pair)))
    return Glossary(tuple(terms))


def _cells(servable: Servable, source_tokens: int, needed: int) -> int:
    """:meth:`Servable.alignment_cells` of an output grown to at least ``needed`` tokens
    (EOS included), as the constrained search grows it."""
    return max(servable.alignment_cells(source_tokens), needed * (source_tokens + 1))


def _forced_work(align: bool, confidence: bool) -> str:
    """What a request has force-decoded, as its refusals name it ("": nothing)."""
    return "alignments" if align else "confidences" if confidence else ""


def _check_forced(servable: Servable, what: str) -> None:
    """400 when ``servable`` has no force-decoding model to give ``what`` with."""
    if not servable.translator.aligns:
        raise rest.bad(f"model {servable.name!r} version {servable.version} has no "
                       "force-decoding model (written by an older keras-nmt): export it "
                       f"again with --onnx for {what}")


def _check_confidence(servable: Servable) -> None:
    """400 when ``servable`` can compute no confidence."""
    if not servable.translator.gives_confidence:
        raise rest.bad(f"model {servable.name!r} version {servable.version} can compute no "
                       "confidence (written by an older keras-nmt): export it again with --onnx")


def _too_many_cells(cells: int, most: int, forced: str = "alignments") -> RequestError:
    what = "may hold" if forced == "alignments" else "force-decode up to"
    return rest.bad(f"the {forced} asked for {what} {cells} cells; at most {most} "
                    "(--max-alignment-cells): ask for them for fewer or shorter sentences")


def _version(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # only digits reach here; too many of them is the one way
        raise rest.bad("the version is not a number") from None


def _parse_json(raw: bytes):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise rest.bad(f"the request body is not UTF-8 (byte {error.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise rest.bad("JSON Parse error: nested too deeply") from None
    except ValueError as error:
        raise rest.bad(f"JSON Parse error: {error}") from None


def _split_within(line: str, lang: str, most: int, prefix: int = SPLIT_PREFIX) -> list[str]:
    """:func:`split_sentences` of ``line``, or, when the line certainly holds more than
    ``most`` sentences, more than ``most`` of them (not all: a line of a million
    sentences is refused after reading a small part of it). Longer and longer prefixes
    are split first: the sentence boundaries of a prefix are those of the line, but for
    one at the cut, so a prefix of more than ``most + 1`` sentences settles it."""
    size = prefix
    while size < len(line):
        found = split_sentences(line[:size], lang)
        if len(found) > most + 1:
            return found
        size *= 4
    return split_sentences(line, lang)


def _translation(t: Translation, nbest: int) -> dict:
    return {
        "text": t.text, "score": rest.float32_json(t.score), "truncated": t.truncated,
        "nbest": [{"text": h.text, "score": rest.float32_json(h.score), "tokens": list(h.tokens)}
                  for h in t.hypotheses[:nbest]],
    }


def _rounded(values: np.ndarray) -> list:
    return np.round(np.asarray(values, np.float64), ALIGNMENT_DECIMALS).tolist()


def _alignment_json(parts: Sequence[Translation]) -> str:
    """The JSON of a line's alignment: a block for each sentence that has one (its own
    :class:`~keras_nmt.evaluation.forced.ForcedPair`), with where its tokens begin among
    the line's; ``null`` when none has (an empty line)."""
    blocks, source_start, target_start = [], 0, 0
    for part in parts:
        pair = part.alignment
        if pair is not None:
            blocks.append(json.dumps({
                "source_start": source_start, "target_start": target_start,
                "source_tokens": list(pair.source_tokens),
                "target_tokens": list(pair.target_tokens),
                "token_logprobs": _rounded(pair.token_logprobs),
                "attention": None if pair.attention is None else _rounded(pair.attention),
            }, ensure_ascii=False))
        source_start += len(part.source_tokens)
        target_start += len(part.tokens)
    return f'{{"sentences": [{", ".join(blocks)}]}}' if blocks else "null"


def _json(body: dict, status: int = 200) -> web.Response:
    return _json_text(json.dumps(body, ensure_ascii=False), status)


def _json_text(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="application/json")


def _error(status: int, reason: str) -> web.Response:
    """``{"error": REASON}``, the reason one line of printable text however much of a
    request it quotes (a newline in a path or a model name comes back as \\n)."""
    if not reason.isprintable():
        reason = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason)
    return _json({"error": reason[:1000]}, status)
