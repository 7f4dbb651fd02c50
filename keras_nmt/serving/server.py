"""The HTTP translation server of ``keras-nmt serve`` (aiohttp, onnxruntime; no TensorFlow).

Endpoints:

- ``POST /v1/models/NAME[/versions/N | /labels/L]:predict``: TF Serving's REST predict
  API for the export's ``serving_default`` and ``translate`` signatures
  (:mod:`keras_nmt.serving.tfserving_rest`); an input of several sentences is split into
  them, or not, as the export's SavedModel does;
- ``GET /v1/models/NAME[/versions/N]`` (status) and ``.../metadata`` (signatures), as
  TF Serving answers them;
- ``POST /translate``: ``{"text": [...], "model", "version", "beam", "alpha", "nbest",
  "no_unk", "alignment", "split_sentences"}`` (all but ``text`` optional) -> ``{"model",
  "version", "beam", "alpha", "translations": [{"text", "score", "truncated", "nbest":
  [{"text", "score", "tokens"}]}]}``; with ``"alignment": true`` each translation also has
  ``"alignment"``: ``{"source_tokens", "target_tokens", "token_logprobs", "attention"}``
  for its best hypothesis (:meth:`OnnxTranslator.translate`'s ``align``; ``attention`` has
  a row per target token and a column per source token, EOS last on both, and between the
  sentences of a split line; null for RNNencdec), null for an empty line. A text of
  several sentences is split into them and their translations joined, as the export does
  (``GET /models`` says); ``"split_sentences": false`` translates each text whole;
- ``GET /health`` (200 while serving), ``GET /models`` (each model's languages, search
  settings and limits), ``GET /stats`` (the batcher's counters);
- ``GET /``: a page to try the models (a text box, the translation, its n-best list and
  scores, and the alignment as the paper's Fig. 3 heat map), from the package's
  ``static/`` files alone.

Every request's sentences go through one :class:`~keras_nmt.serving.batcher.Batcher`:
requests that arrive together share an onnxruntime run. What a request gets wrong is a
4xx answer ``{"error": REASON}`` (one line), never a crash: a body over the size limit
(413), bytes that are not UTF-8, JSON that is not the API's, too many sentences, a beam
outside 1..max_beam, an n-best list longer than the beam or than the export returns (400),
an unknown model, version or path (404). A full queue answers 503 at once. On SIGTERM or
SIGINT the server stops listening, answers the requests it holds, and returns.

The cost of a request grows with its sentences' lengths and the beam, not with anything
the server keeps: memory is bounded by the queue size and the body size limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import pathlib
import signal
import sys
from typing import Sequence, TextIO

import numpy as np
from aiohttp import web

from keras_nmt.errors import RequestError
from keras_nmt.serving import tfserving_rest as rest
from keras_nmt.serving.batcher import Batcher
from keras_nmt.serving.registry import Registry, Servable
from keras_nmt.translation import Translation

# The page at / and its files: in the package, nothing fetched from elsewhere (offline).
STATIC = pathlib.Path(__file__).resolve().parent / "static"
STATIC_FILES = ("page.js", "page.css")
MAX_ALPHA = 10.0  # length normalisation exponents beyond this only overflow
TRANSLATE_KEYS = {"text", "model", "version", "beam", "alpha", "nbest", "no_unk", "alignment",
                  "split_sentences"}


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8501  # TF Serving's REST port; 0: any free one
    batch_size: int = 32  # sentences a batch (an onnxruntime run) holds at most
    max_wait: float = 0.005  # seconds the oldest request waits for others to join it
    queue_size: int = 1024  # sentences waiting, at most; more: 503
    max_sentences: int = 256  # sentences a request, at most
    max_body_bytes: int = 1 << 20
    max_beam: int = 32
    batch_threads: int = 1  # batches run at once
    shutdown_timeout: float = 30.0  # seconds given to the requests held at shutdown

    def check(self) -> None:
        """ValueError (one line) for options that do not fit together."""
        for name in ("batch_size", "queue_size", "max_sentences", "max_body_bytes",
                     "max_beam", "batch_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_sentences > self.queue_size:
            raise ValueError(f"max_sentences ({self.max_sentences}) cannot exceed the queue "
                             f"size ({self.queue_size}): such a request could never be queued")
        if not (0 <= self.max_wait < math.inf and 0 <= self.shutdown_timeout < math.inf):
            raise ValueError("max_wait and shutdown_timeout must be finite and >= 0")


@dataclasses.dataclass(frozen=True)
class Search:
    """What one batch shares: the model and the search settings of its sentences."""

    servable: Servable
    beam: int
    alpha: float
    forbid_unk: bool = False
    align: bool = False  # also force-decode each best hypothesis (its attention matrix)
    split_sentences: bool | None = None  # None: as the export does


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
        self.batcher = Batcher(self._translate_batch, options.batch_size, options.max_wait,
                               options.queue_size, options.batch_threads)
        self.serving = False
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    # ---- the application ---------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.options.max_body_bytes,
                              middlewares=[self._errors])
        model = r"/v1/models/{name:[^/:]+}"
        which = r"{which:(/versions/\d+|/labels/[^/:]+)?}"
        app.router.add_post(model + which + ":predict", self.predict)
        app.router.add_get(model + r"{which:(/versions/\d+)?}", self.status)
        app.router.add_get(model + r"{which:(/versions/\d+)?}/metadata", self.metadata)
        app.router.add_post("/translate", self.translate)
        app.router.add_get("/health", self.health)
        app.router.add_get("/models", self.models)
        app.router.add_get("/stats", self.stats)
        app.router.add_get("/", self.page)
        app.router.add_get("/static/{file}", self.static_file)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler):
        """Every refusal as ``{"error": REASON}`` with its status, aiohttp's own (no route,
        wrong method, body too large) included; an unforeseen error is logged and is a
        500 for that request only."""
        try:
            return await handler(request)
        except RequestError as error:
            return _error(error.status, error.reason)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            reason = error.text if error.status != 404 else (
                f"Malformed request: {request.method} {request.path[:200]}")
            if isinstance(error, web.HTTPRequestEntityTooLarge):
                reason = (f"the request body is larger than {self.options.max_body_bytes} "
                          "bytes (--max-body-bytes)")
            return _error(error.status, " ".join(str(reason).split()))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 (a bug: one request fails, not the server)
            where = ascii(request.path[:200])  # one line, whatever the path holds
            print(f"{self.prog}: internal error on {request.method} {where}: "
                  f"{type(error).__name__}: {str(error)[:500]!r}", file=self.log, flush=True)
            return _error(500, f"internal error: {type(error).__name__}")

    async def _body(self, request: web.Request):
        raw = await request.read()
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
        call = rest.parse_predict(await self._body(request))
        translator = servable.translator
        beam = translator.beam_size if call.beam is None else call.beam
        alpha = translator.alpha if call.alpha is None else call.alpha
        search = self._search(servable, call.sentences, beam, alpha, nbest=1)
        results = await self.batcher.submit(search, call.sentences)
        return _json(rest.predict_answer(call, results, translator.max_nbest))

    async def status(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        versions = ([servable.version] if request.match_info.get("which")
                    else list(self.registry.models[servable.name]))
        return _json(rest.status_answer(versions))

    async def metadata(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        return _json(rest.metadata_answer(servable.name, servable.version,
                                          servable.translator.max_nbest))

    # ---- the plain JSON API --------------------------------------------------------------

    async def translate(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise rest.bad("the request body must be a JSON object with 'text'")
        unknown = sorted(set(body) - TRANSLATE_KEYS)
        if unknown:
            raise rest.bad(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(TRANSLATE_KEYS))})")
        if "text" not in body:
            raise rest.bad("the request needs 'text', a list of sentences")
        sentences = rest.sentences_value(body["text"], "text")
        servable = self._default_servable(body)
        translator = servable.translator
        nbest = rest.int_value(body.get("nbest", 1), "nbest")
        beam = rest.int_value(body["beam"], "beam") if "beam" in body else max(
            translator.beam_size, nbest)
        alpha = rest.float_value(body["alpha"], "alpha") if "alpha" in body else translator.alpha
        no_unk, align = body.get("no_unk", False), body.get("alignment", False)
        split = body.get("split_sentences", translator.split_sentences)
        for key, value in (("no_unk", no_unk), ("alignment", align), ("split_sentences", split)):
            if not isinstance(value, bool):
                raise rest.bad(f"{key} must be true or false")
        if align and not translator.aligns:
            raise rest.bad(f"model {servable.name!r} version {servable.version} has no "
                           "force-decoding model (written by an older keras-nmt): export it "
                           "again with --onnx for alignments")
        search = self._search(servable, sentences, beam, alpha, nbest, no_unk, align, split)
        results = await self.batcher.submit(search, sentences)
        return _json({
            "model": servable.name, "version": servable.version, "beam": beam,
            "alpha": rest.float32_json(alpha),
            "translations": [_translation(t, nbest, align) for t in results],
        })

    def _default_servable(self, body: dict) -> Servable:
        version = body.get("version")
        if version is not None:
            version = rest.int_value(version, "version")
        if "model" in body:
            if not isinstance(body["model"], str):
                raise rest.bad("model must be a string")
            return self.registry.find(body["model"], version)
        if len(self.registry.models) != 1:
            raise rest.bad(f"name the model: {', '.join(sorted(self.registry.models))} are "
                           "served")
        return self.registry.find(next(iter(self.registry.models)), version)

    def _search(self, servable: Servable, sentences: Sequence[str], beam: int, alpha: float,
                nbest: int, forbid_unk: bool = False, align: bool = False,
                split_sentences: bool | None = None) -> Search:
        """The batch key of a request, once its sentences and settings are within limits."""
        limits, translator = self.options, servable.translator
        if not sentences:
            raise rest.bad("no sentences to translate")
        if len(sentences) > limits.max_sentences:
            raise rest.bad(f"{len(sentences)} sentences in one request; at most "
                           f"{limits.max_sentences} (--max-sentences)")
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
        return Search(servable, beam, float(alpha), bool(forbid_unk), align, split_sentences)

    def _translate_batch(self, search: Search, sentences: list[str]) -> list[Translation]:
        """One batch, in a worker thread: every n-best hypothesis the export returns (a
        request takes the part it asked for)."""
        translator = search.servable.translator
        return translator.translate(
            sentences, beam_size=search.beam, alpha=search.alpha,
            nbest=min(translator.max_nbest, search.beam), forbid_unk=search.forbid_unk,
            batch_size=self.options.batch_size, align=search.align,
            split_sentences=search.split_sentences,
        )

    # ---- health, models, stats -----------------------------------------------------------

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
        return _json({"models": [s.describe() for s in self.registry.servables()]})

    async def stats(self, request: web.Request) -> web.Response:
        return _json({**dataclasses.asdict(self.batcher.stats),
                      "batch_size": self.options.batch_size,
                      "queue_size": self.options.queue_size})

    # ---- life ------------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen; returns the URL (the port chosen when ``port`` is 0)."""
        self.batcher.start()
        self._runner = web.AppRunner(self.application(), access_log=None,
                                     handle_signals=False, handler_cancellation=True,
                                     shutdown_timeout=self.options.shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            await self.batcher.close()
            raise
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        self.serving = True
        return self.url

    async def stop(self) -> None:
        """Stop listening, answer the requests held (new ones on open connections get
        503), then stop the batcher."""
        self.serving = False
        self.batcher.hurry()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.batcher.close()

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


def _version(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # only digits reach here; too many of them is the one way
        raise rest.bad("the version is not a number") from None


def _translation(t: Translation, nbest: int, align: bool = False) -> dict:
    answer = {
        "text": t.text, "score": rest.float32_json(t.score), "truncated": t.truncated,
        "nbest": [{"text": h.text, "score": rest.float32_json(h.score), "tokens": list(h.tokens)}
                  for h in t.hypotheses[:nbest]],
    }
    if align:
        answer["alignment"] = None if t.alignment is None else _alignment(t.alignment)
    return answer


def _alignment(pair) -> dict:
    """A :class:`~keras_nmt.evaluation.forced.ForcedPair` as JSON: the matrix has a row
    per target token and a column per source token, EOS last on both."""
    numbers = np.vectorize(rest.float32_json, otypes=[float])
    return {
        "source_tokens": list(pair.source_tokens), "target_tokens": list(pair.target_tokens),
        "token_logprobs": numbers(pair.token_logprobs).tolist(),
        "attention": None if pair.attention is None else numbers(pair.attention).tolist(),
    }


def _json(body: dict, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body, ensure_ascii=False), status=status,
                        content_type="application/json")


def _error(status: int, reason: str) -> web.Response:
    """``{"error": REASON}``, the reason one line of printable text however much of a
    request it quotes (a newline in a path or a model name comes back as \\n)."""
    if not reason.isprintable():
        reason = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason)
    return _json({"error": reason[:1000]}, status)
