"""The HTTP translation server of ``keras-nmt serve`` (aiohttp, onnxruntime; no TensorFlow):
its routes, the middlewares every request passes, and its life (start, poll, stop).

Routes: TF Serving's REST API (``:predict``, status, metadata), ``POST /translate`` (the
JSON API), ``/health``, ``/models``, ``/stats``, Prometheus metrics and the page at ``/``
(docs/export-serving.md has every field). A request's body is read within the body budget
(:mod:`~keras_nmt.serving.http_guard`), checked and sized once into its work plan
(:mod:`~keras_nmt.serving.requests`, :mod:`~keras_nmt.serving.work_plan`), its rows go
through one :class:`~keras_nmt.serving.batcher.Batcher`, and its answer is written by
:mod:`~keras_nmt.serving.answers`. A refusal is ``{"error": REASON}`` (one line) with its
status, never a crash; a request past ``request_timeout`` gets 504 and its queued rows are
dropped. Large bodies and answers are handled in worker threads, so ``/health`` keeps
answering. Cost per request: its plan's, plus one onnxruntime run per kind of row in each
batch it shares.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import pathlib
import signal
import sys
import time
from typing import Callable, TextIO

from aiohttp import web
# What aiohttp does for a route without an expect handler of its own: private, so
# tests/test_server.py checks that it still answers 100 Continue.
from aiohttp.web_urldispatcher import _default_expect_handler as _CONTINUE

from keras_nmt.core.errors import RequestError, UsageError
from keras_nmt.decoding.translation import Translation
from keras_nmt.serving import answers, priority, requests, rest_formats as rest
from keras_nmt.serving.batcher import Batch, Batcher, DaemonThreads
from keras_nmt.serving.http_guard import BodyBudget, LimitedSite, RequestGuard, Requests, must_close
from keras_nmt.serving.metrics import PATH as METRICS_PATH, ConnectionErrorLog, Metrics
from keras_nmt.serving.options import ServerOptions
from keras_nmt.serving.registry import Registry, Servable
from keras_nmt.serving.work_plan import run_rows

# The page at / and its files: in the package, nothing fetched from elsewhere (offline).
STATIC = pathlib.Path(__file__).resolve().parent / "static"
STATIC_FILES = ("page.js", "figures.mjs", "page.css")
BODY_ROUTES = {"predict", "translate"}  # the routes that read a JSON body
# Above this a request's body is parsed and planned in a worker thread; below, on the
# event loop (a thread's hand-off costs more than the work).
BIG_BODY = 16 << 10
LINGERING_TIME = 1.0  # seconds the rest of a refused body is read before closing


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
            response = answers.error_response(error.status, error.reason)
            if must_close(request):
                response.force_close()
            return response
        except web.HTTPException as error:
            if error.status < 400:
                raise
            reason = error.text if error.status != 404 else (
                f"Malformed request: {request.method} {request.path[:200]}")
            return answers.error_response(error.status, " ".join(str(reason).split()))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 (a bug: one request fails, not the server)
            where = ascii(request.path[:200])  # one line, whatever the path holds
            print(f"{self.prog}: internal error on {request.method} {where}: "
                  f"{type(error).__name__}: {str(error)[:500]!r}", file=self.log, flush=True)
            return answers.error_response(500, f"internal error: {type(error).__name__}")

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
            return await self._work(len(raw) > BIG_BODY, lambda: read(requests.parse_json(raw)))
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
            return self.registry.find(name, version=requests.version_number(which[len("/versions/"):]))
        if which.startswith("/labels/"):
            return self.registry.find(name, label=which[len("/labels/"):])
        return self.registry.find(name)

    # ---- TF Serving's REST API ---------------------------------------------------------

    async def predict(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        call = await self._body(request, lambda body: requests.read_predict(
            body, servable, self.options))
        lines = await self._translated(call)
        return await self._answer_with(call, lambda: rest.predict_answer(
            call.predict, lines, servable.translator.max_nbest))

    async def status(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        versions = ([servable.version] if request.match_info.get("which")
                    else list(self.registry.models.get(servable.name, {})) or [servable.version])
        return answers.json_response(rest.status_answer(versions))

    async def metadata(self, request: web.Request) -> web.Response:
        servable = self._servable(request)
        return answers.json_response(rest.metadata_answer(servable.name, servable.version,
                                          servable.translator.max_nbest))

    # ---- the plain JSON API --------------------------------------------------------------

    async def translate(self, request: web.Request) -> web.Response:
        call = await self._body(request, lambda body: requests.read_translate(
            body, self.registry, self.options))
        lines = await self._translated(call)
        search = call.search
        return await self._answer_with(call, lambda: answers.translate_answer(
            search.servable.name, search.servable.version, search.beam, search.alpha,
            call.nbest, call.marked_up(lines), call.show_alignment, search.confidence))

    async def _translated(self, call: requests.Call) -> list[Translation]:
        """Each line's translation: the call's rows through the batcher, weighed in the
        sentences they stand for, and joined again."""
        work = call.work
        results = await self.batcher.submit(call.search, work.rows, work.weights)
        return work.translations(results, call.search.servable.translator.tgt_lang,
                                 call.rules, call.lines)

    async def _answer_with(self, call: requests.Call, build: Callable[[], object]
                           ) -> web.Response:
        """The answer ``build()`` gives, encoded; in a worker thread for a large one."""
        text = await self._work(call.work.heavy, lambda: answers.encode(build()))
        return web.Response(text=text, content_type="application/json")

    def _translate_batch(self, search: requests.Search, batch: Batch) -> list:
        """One batch of rows, in a batch thread (:func:`~keras_nmt.serving.work_plan.run_rows`)."""
        results = run_rows(search.servable.translator, batch, self.options.batch_size,
                           beam_size=search.beam, alpha=search.alpha,
                           forbid_unk=search.forbid_unk, align=search.align,
                           confidence=search.confidence)
        self.metrics.batch_ran(sum(row.sentences for row in batch))
        return results

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
            return answers.error_response(503, "shutting down")
        return answers.json_response({"status": "serving",
                      "models": {n: sorted(v) for n, v in sorted(self.registry.models.items())}})

    async def models(self, request: web.Request) -> web.Response:
        # "constraints": whether POST /translate and predict take them; "confidence":
        # whether they can give it (the force-decoding model). The page asks both.
        return answers.json_response({"models": [{**s.describe(), "constraints": s.translator.constrains,
                                  "confidence": s.translator.gives_confidence}
                                 for s in self.registry.servables()]})

    async def stats(self, request: web.Request) -> web.Response:
        return answers.json_response({**dataclasses.asdict(self.batcher.stats),
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
