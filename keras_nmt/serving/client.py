"""A TensorFlow Serving client (REST or gRPC) for the exports: :class:`TFServingClient`.

``keras-nmt tfserving-client`` (:mod:`keras_nmt.cli.tfserving_client`) sends lines in batches
of similar length to ``serving_default``, or with a beam or alpha to ``translate`` (REST:
columnar form only; no alpha sends :data:`~keras_nmt.export.EXPORT_ALPHA`, the export's own).
It gives one :class:`keras_nmt.decoding.translation.Translation` per line, in order, "" for
an empty line, with the text, score and truncated count the export answers (no tokens).
Constraints go to ``keras-nmt serve`` over REST, per instance
(:mod:`keras_nmt.serving.rest_formats`); a glossary term applies when the line's
:func:`rough_tokens` hold its source side, case and all; ``"unmet"`` fills each ``unmet``.
A failed connection (refused, dropped, 503 / UNAVAILABLE) is retried ``retries`` times with
exponential backoff; a timeout, a server that stays down or an answer unlike TF Serving's
raises :class:`ServingError`. REST needs only the plain install; gRPC imports TensorFlow.
Cost: one request per batch; time grows with the lines sent.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Sequence

from keras_nmt.decoding.constraints import Glossary, LineConstraints, check_aligned
from keras_nmt.core.errors import ServingError, Unreachable
from keras_nmt.export import EXPORT_ALPHA
from keras_nmt.core.progress import native_stderr_filtered
from keras_nmt.decoding.translation import Translation, translate_lines
from keras_nmt.serving.predict_answers import predictions

DEFAULT_SIGNATURE = "serving_default"
SEARCH_SIGNATURE = "translate"  # sentences, beam_size, alpha
OUTPUTS = ("translations", "scores", "truncated")  # the outputs read, of an export's signature
MAX_BACKOFF = 30.0
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# A glossary's matching without the export's tokenizer: runs of letters and digits, and
# each other character that is not a space.
ROUGH_TOKEN = re.compile(r"\w+|[^\w\s]")


def rough_tokens(text: str) -> list[str]:
    """``text``'s words and punctuation marks (:data:`ROUGH_TOKEN`): what a glossary's
    source terms are matched on here."""
    return ROUGH_TOKEN.findall(text)


def instance_constraints(found: LineConstraints | None) -> dict:
    """The keys of an instance that carry ``found`` (none for no constraints)."""
    if not found:
        return {}
    keys = {"constraints": list(found.include), "avoid": list(found.avoid),
            "prefix": found.prefix}
    return {key: value for key, value in keys.items() if value}


@dataclasses.dataclass(frozen=True)
class _Line:
    """A line and its constraints, as :func:`keras_nmt.decoding.translation.translate_lines`
    batches it (by length)."""

    text: str
    constraints: LineConstraints | None

    def __len__(self) -> int:
        return len(self.text)


def _search_inputs(beam: int | None, alpha: float | None) -> dict:
    """The scalar inputs of the ``translate`` signature (none without a beam)."""
    if beam is None:
        if alpha is not None:
            raise ValueError("--alpha needs --beam (the serving_default signature fixes both)")
        return {}
    return {"beam_size": int(beam), "alpha": float(EXPORT_ALPHA if alpha is None else alpha)}


class RestTransport:
    """``POST URL/v1/models/MODEL[/versions/N]:predict`` with JSON, in the row
    (``instances``) or columnar (``inputs``) form. With ``beam`` (and ``alpha``) they are
    sent as the scalar inputs ``beam_size`` and ``alpha`` (columnar form only). With
    ``confidence``, ``"confidence": true`` asks keras-nmt serve for each translation's
    (the module docstring)."""

    def __init__(self, url: str, model: str, signature: str = DEFAULT_SIGNATURE,
                 version: int | None = None, form: str = "instances", timeout: float = 30.0,
                 beam: int | None = None, alpha: float | None = None,
                 confidence: bool = False):
        if form not in ("instances", "inputs"):
            raise ValueError(f"form must be 'instances' or 'inputs', got {form!r}")
        self.search = _search_inputs(beam, alpha)
        if self.search and form == "instances":
            raise ValueError("--beam needs the columnar form (--form inputs): rows cannot "
                             "carry the scalar beam_size and alpha")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"--url must look like http://HOST:PORT, got {url!r}")
        self.base = url.rstrip("/")
        # A proxy from the environment cannot reach this machine's own ports.
        loopback = parts.hostname in LOOPBACK
        self._opener = urllib.request.build_opener(
            *([urllib.request.ProxyHandler({})] if loopback else [])
        )
        path = f"/v1/models/{urllib.parse.quote(model, safe='')}"
        if version is not None:
            path += f"/versions/{version}"
        self.endpoint = self.base + path + ":predict"
        self.signature = signature
        self.form = form
        self.timeout = timeout
        self.confidence = confidence

    def predict(self, sentences: Sequence[str],
                constraints: Sequence[LineConstraints | None] | None = None
                ) -> list[Translation]:
        """The translations of ``sentences``; ``constraints``, per sentence, are sent as
        its instance's ``constraints``, ``avoid`` and ``prefix`` (keras-nmt serve)."""
        rules = [instance_constraints(c) for c in constraints or ()]
        if self.form == "instances":
            rows = ([{"sentences": s, **r} if r else s for s, r in zip(sentences, rules)]
                    if any(rules) else list(sentences))
            body = {"signature_name": self.signature, "instances": rows}
        else:
            inputs = {"sentences": list(sentences), **self.search}
            for key in ("constraints", "avoid", "prefix"):
                if any(key in r for r in rules):
                    inputs[key] = [r.get(key) for r in rules]
            body = {"signature_name": self.signature, "inputs": inputs}
        if self.confidence:
            body["confidence"] = True
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(
            self.endpoint, data=data, method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise self._http_error(error) from None
        except (socket.timeout, TimeoutError):
            raise ServingError(f"no answer from {self.base} within {self.timeout:g} s") from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, (socket.timeout, TimeoutError)):
                raise ServingError(
                    f"no answer from {self.base} within {self.timeout:g} s"
                ) from None
            raise Unreachable(f"cannot connect to {self.base}: {_reason(error.reason)}") from None
        except (http.client.HTTPException, ConnectionError) as error:
            raise Unreachable(f"connection to {self.base} lost: {_reason(error)}") from None
        return self._parse(raw, len(sentences))

    def _http_error(self, error: urllib.error.HTTPError) -> ServingError:
        try:
            message = json.loads(error.read().decode("utf-8"))["error"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OSError):
            message = error.reason
        text = f"server answered HTTP {error.code}: {message}"
        return Unreachable(text) if error.code == 503 else ServingError(text)

    def _parse(self, raw: bytes, count: int) -> list[Translation]:
        try:
            answer = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            start = raw[:60].decode("utf-8", errors="replace")
            raise ServingError(f"bad answer from server: not JSON ({start!r})") from None
        if not isinstance(answer, dict):
            raise ServingError("bad answer from server: not a JSON object")
        if self.form == "instances":
            rows = answer.get("predictions")
            if not isinstance(rows, list):
                raise ServingError("bad answer from server: no 'predictions' list")
            if rows and all(isinstance(row, dict) for row in rows):
                names = set().union(*rows)
                columns = {name: [row.get(name) for row in rows] for name in names}
            else:  # a model with one output: the values themselves
                columns = {"translations": rows}
        else:
            outputs = answer.get("outputs")
            if isinstance(outputs, list):
                outputs = {"translations": outputs}
            if not isinstance(outputs, dict):
                raise ServingError("bad answer from server: no 'outputs' object")
            columns = outputs
        if self.confidence and count and "confidence" not in columns:
            raise ServingError("the server answered no confidence: keras-nmt serve gives it, "
                               "and TF Serving of an export this keras-nmt wrote")
        return predictions(columns, count, self.confidence)


class GrpcTransport:
    """``tensorflow.serving.PredictionService/Predict`` over an insecure channel."""

    def __init__(self, target: str, model: str, signature: str = DEFAULT_SIGNATURE,
                 version: int | None = None, timeout: float = 30.0, beam: int | None = None,
                 alpha: float | None = None):
        import grpc

        self.search = _search_inputs(beam, alpha)

        # The PredictRequest protos are built on TensorFlow's TensorProto, so TensorFlow
        # loads here; its native libraries log a few start-up lines on stderr that no
        # setting silences, which would bury our one-line errors (real errors still show).
        with native_stderr_filtered():
            import tensorflow as tf
            from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

        self._grpc = grpc
        self._tf = tf
        self._predict_pb2 = predict_pb2
        self.target = target
        self.model = model
        self.signature = signature
        self.version = version
        self.timeout = timeout
        # Reconnect soon after a refused connection, so that a retry after our own
        # backoff finds a server that has come up meanwhile.
        options = [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if target.rpartition(":")[0].strip("[]") in LOOPBACK:
            options.append(("grpc.enable_http_proxy", 0))  # as for REST: no proxy to self
        self._channel = grpc.insecure_channel(target, options=options)
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)

    def request(self, sentences: Sequence[str]):
        """The PredictRequest for ``sentences``. It asks for the three outputs read here
        only: an export's n-best lists and attention matrices would make the answer
        bigger than gRPC's default 4 MB limit on long sentences."""
        tf = self._tf
        request = self._predict_pb2.PredictRequest()
        request.model_spec.name = self.model
        request.model_spec.signature_name = self.signature
        if self.version is not None:
            request.model_spec.version.value = self.version
        request.output_filter.extend(OUTPUTS)
        request.inputs["sentences"].CopyFrom(
            tf.make_tensor_proto([s.encode("utf-8") for s in sentences], dtype=tf.string,
                                 shape=[len(sentences)])
        )
        for name, value in self.search.items():
            dtype = tf.int32 if name == "beam_size" else tf.float32
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
        return request

    def predict(self, sentences: Sequence[str],
                constraints: Sequence[LineConstraints | None] | None = None
                ) -> list[Translation]:
        if constraints and any(constraints):
            raise ServingError("constraints, prefixes and glossaries go to keras-nmt serve "
                               "over REST (--url): TF Serving's gRPC API has no such inputs")
        grpc, tf = self._grpc, self._tf
        try:
            response = self._stub.Predict(self.request(sentences), timeout=self.timeout)
        except grpc.RpcError as error:
            code, details = error.code(), error.details()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ServingError(
                    f"no answer from {self.target} within {self.timeout:g} s"
                ) from None
            if code == grpc.StatusCode.UNAVAILABLE:
                raise Unreachable(f"cannot reach {self.target}: {_first_line(details)}") from None
            raise ServingError(f"server answered {code.name}: {_first_line(details)}") from None
        columns = {}
        for name, proto in response.outputs.items():
            try:
                values = tf.make_ndarray(proto)
            except (TypeError, ValueError) as error:
                raise ServingError(f"bad answer from server: output {name}: {error}") from None
            if values.ndim == 1:  # per-sentence outputs (n-best lists are not read)
                columns[name] = [
                    v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v.item()
                    for v in values
                ]
        return predictions(columns, len(sentences))

    def close(self) -> None:
        self._channel.close()


def _reason(reason) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no details)"


class TFServingClient:
    """Batches sentences through a transport, retrying failed connections.

    ``retries`` more tries follow a failed connection, the k-th after ``backoff * 2**k``
    seconds (at most 30 s). ``on_retry(error, delay)`` is called before each wait."""

    def __init__(self, transport, batch_size: int = 32, retries: int = 3, backoff: float = 0.5,
                 on_retry: Callable[[ServingError, float], None] | None = None):
        if batch_size < 1 or retries < 0 or backoff < 0:
            raise ValueError("batch_size must be >= 1, retries and backoff >= 0")
        self.transport = transport
        self.batch_size = batch_size
        self.retries = retries
        self.backoff = backoff
        self.on_retry = on_retry

    def predict(self, sentences: Sequence[str],
                constraints: Sequence[LineConstraints | None] | None = None
                ) -> list[Translation]:
        """One request for ``sentences`` (retried on connection failures), with their
        ``constraints`` when any is given."""
        extra = {"constraints": list(constraints)} if constraints and any(constraints) else {}
        for attempt in range(self.retries + 1):
            try:
                return self.transport.predict(sentences, **extra)
            except Unreachable as error:
                if attempt == self.retries:
                    tries = "1 try" if attempt == 0 else f"{attempt + 1} tries"
                    raise Unreachable(
                        f"{error} (gave up after {tries}; is the server up?)"
                    ) from None
                delay = min(MAX_BACKOFF, self.backoff * 2 ** attempt)
                if self.on_retry is not None:
                    self.on_retry(error, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def translate(self, lines: Sequence[str],
                  progress: Callable[[int], None] | None = None,
                  constraints: Sequence[LineConstraints | None] | None = None,
                  glossary: Glossary | None = None) -> list[Translation]:
        """One translation per line, in order; lines go out in batches of similar length
        (the server splits them into sentences). ``progress`` hears each batch's lines.
        ``constraints`` (per line) and ``glossary``: what each line's translation must
        respect, sent with it (the module docstring)."""
        check_aligned(lines, constraints)
        if constraints is None and glossary is None:
            return translate_lines(lines, self.predict, self.batch_size, progress=progress)

        terms_of = None if glossary is None else glossary.matcher(rough_tokens)

        def constrain(n: int, items: list[str]) -> list[_Line]:
            found = (constraints[n] if constraints else None) or LineConstraints()
            if terms_of is not None:
                found = found.merged(terms_of(rough_tokens(lines[n])))
            return [_Line(item, found or None) for item in items]

        def decode(batch: list[_Line]) -> list[Translation]:
            return self.predict([item.text for item in batch],
                                [item.constraints for item in batch])

        return translate_lines(lines, decode, self.batch_size, progress=progress,
                               constrain=constrain)
