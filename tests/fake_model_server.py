"""A loopback STAND-IN for TensorFlow Serving, a test double of the serving tests.

The ``tensorflow_model_server`` binary cannot be installed here, so the serving client
is tested against this small server instead. It is not TF Serving and does not pretend
to be a deployment option; it exists to check two things end to end:

- that an exported SavedModel runs through the TF1 session loader
  (``tf.compat.v1.saved_model.loader.load`` into a Graph, then ``Session.run`` on the
  signature's tensors), which is the code path TF Serving itself uses. The stand-in
  starts with TensorFlow's core ops only, so a word export is proven to need nothing
  else. The stock ``tensorflow_model_server`` also links TensorFlow Text's op library
  (``@org_tensorflow_text//tensorflow_text:ops_lib`` in SUPPORTED_TENSORFLOW_OPS of
  tensorflow_serving/model_servers/BUILD), SentencePiece ops included: the stand-in does
  the same for a SavedModel that needs ops core TensorFlow lacks (a SentencePiece
  export), by importing tensorflow_text before loading it (:func:`load_op_libraries`),
  and only then. Ops that neither provides fail the load, as in TF Serving;
- that ``serving/tfserving_client.py`` speaks TF Serving's protocols. The REST side
  follows the documented JSON formats (https://www.tensorflow.org/tfx/serving/api_rest):
  ``POST /v1/models/NAME[/versions/N]:predict`` with ``{"instances": [...]}`` (row form,
  answered by ``{"predictions": [...]}``: plain values for a single output, one object
  per instance for several) or ``{"inputs": ...}`` (columnar form, answered by
  ``{"outputs": ...}``), errors as ``{"error": "..."}`` with an HTTP error status, and
  ``GET /v1/models/NAME[/versions/N]`` for the model status. The gRPC side serves
  ``tensorflow.serving.PredictionService/Predict`` with TensorProtos in and out.

Both listen on 127.0.0.1 only, on ephemeral ports unless told otherwise. ``Faults``
lets a test make the server drop connections or answer late.
"""

from __future__ import annotations

import base64
import concurrent.futures
import http.server
import json
import os
import pathlib
import re
import threading
import time
from typing import Mapping

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

DEFAULT_SIGNATURE = "serving_default"
SERVE_TAG = "serve"
HOST = "127.0.0.1"

# How TF Serving's REST API turns a status code into an HTTP status.
_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
}
# TensorFlow's error codes are gRPC's codes, numbered alike.
_GRPC_CODE = {code.value[0]: code for code in grpc.StatusCode}


class ServingStatus(Exception):
    """An error answer: a gRPC status code and its message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS.get(self.code, 500)


def _invalid(message: str) -> ServingStatus:
    return ServingStatus(grpc.StatusCode.INVALID_ARGUMENT, message)


def missing_ops(path: str | os.PathLike) -> list[str]:
    """The ops a SavedModel's serving graph uses that this process has not registered."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((pathlib.Path(path) / "saved_model.pb").read_bytes())
    used = {op.name for meta in saved_model.meta_graphs
            if SERVE_TAG in meta.meta_info_def.tags
            for op in meta.meta_info_def.stripped_op_list.op}
    return sorted(name for name in used if op_def_registry.get(name) is None)


def load_op_libraries(path: str | os.PathLike) -> list[str]:
    """Register what a stock TF Serving build links besides core TensorFlow (TF Text's
    ops) when the SavedModel needs it; returns the ops that were missing before."""
    missing = missing_ops(path)
    if missing:
        import tensorflow_text  # noqa: F401  (TF Serving links tensorflow_text:ops_lib)
    return missing


class Servable:
    """One version of one model: a SavedModel loaded with the TF1 session loader."""

    def __init__(self, name: str, version: int, path: str | os.PathLike):
        self.name = name
        self.version = version
        self.needed_op_libraries = bool(load_op_libraries(path))
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(self.session, [SERVE_TAG], str(path))
        self.signatures = dict(meta_graph.signature_def)

    def signature(self, name: str):
        name = name or DEFAULT_SIGNATURE
        if name not in self.signatures:
            raise _invalid(f'Serving signature name: "{name}" not found in signature def')
        return self.signatures[name]

    def run(self, signature_name: str, inputs: Mapping[str, object],
            output_filter=()) -> dict[str, np.ndarray]:
        """Feed ``inputs`` (name -> array-like) to the signature, return its outputs."""
        signature = self.signature(signature_name)
        expected = set(signature.inputs)
        if set(inputs) != expected:
            raise _invalid(
                f"input names {sorted(inputs)} do not match the signature's {sorted(expected)}"
            )
        feed = {}
        for name, info in signature.inputs.items():
            dtype = tf.dtypes.as_dtype(info.dtype)
            try:
                value = np.asarray(inputs[name], dtype=object if dtype == tf.string else
                                   dtype.as_numpy_dtype)
            except (TypeError, ValueError) as error:
                raise _invalid(f"input {name}: cannot be read as {dtype.name}: {error}") from None
            feed[info.name] = value
        wanted = list(output_filter) or list(signature.outputs)
        unknown = [name for name in wanted if name not in signature.outputs]
        if unknown:
            raise _invalid(f"output tensor alias not found in signature: {unknown[0]}")
        fetches = {name: signature.outputs[name].name for name in wanted}
        try:
            return self.session.run(fetches, feed)
        except tf.errors.OpError as error:
            code = _GRPC_CODE.get(error.error_code, grpc.StatusCode.INTERNAL)
            raise ServingStatus(code, error.message.splitlines()[0]) from None

    def close(self) -> None:
        self.session.close()


def latest_version(base_path: str | os.PathLike) -> int:
    """The highest integer-named subdirectory: what TF Serving's default policy serves."""
    versions = [int(p.name) for p in pathlib.Path(base_path).iterdir()
                if p.is_dir() and p.name.isdigit()]
    if not versions:
        raise FileNotFoundError(f"no version directory under {base_path}")
    return max(versions)


class ModelRegistry:
    """Model name -> its loaded versions (the latest one of each base path)."""

    def __init__(self):
        self.models: dict[str, dict[int, Servable]] = {}

    def add(self, name: str, base_path: str | os.PathLike, version: int | None = None) -> Servable:
        version = latest_version(base_path) if version is None else version
        servable = Servable(name, version, pathlib.Path(base_path) / str(version))
        self.models.setdefault(name, {})[version] = servable
        return servable

    @classmethod
    def from_models_config(cls, path: str | os.PathLike,
                           base_paths: Mapping[str, str | os.PathLike] = ()) -> "ModelRegistry":
        """Read a ModelServerConfig text proto (TF Serving's --model_config_file) with
        TF Serving's own proto class. ``base_paths`` maps a base_path as written in the
        file (e.g. the container path /models/nmt) to a directory here."""
        config = model_server_config_pb2.ModelServerConfig()
        text_format.Parse(pathlib.Path(path).read_text(encoding="utf-8"), config)
        registry = cls()
        for model in config.model_config_list.config:
            base = dict(base_paths).get(model.base_path, model.base_path)
            registry.add(model.name, base)
        return registry

    def find(self, name: str, version: int | None = None) -> Servable:
        versions = self.models.get(name, {})
        if version is None and versions:
            return versions[max(versions)]
        if version in versions:
            return versions[version]
        request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
        raise ServingStatus(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: {request}")

    def close(self) -> None:
        for versions in self.models.values():
            for servable in versions.values():
                servable.close()


class Faults:
    """Misbehaviour on demand: drop the next ``drop`` requests without an answer (REST:
    the connection is closed; gRPC: UNAVAILABLE, as a broken connection reads), and wait
    ``delay`` seconds before answering each request."""

    def __init__(self):
        self._lock = threading.Lock()
        self.drop = 0
        self.delay = 0.0
        self.requests = 0  # predict requests received, dropped ones included

    def take(self) -> bool:
        """Count a request; True when it is to be dropped."""
        with self._lock:
            self.requests += 1
            if self.drop > 0:
                self.drop -= 1
                return True
        return False

    def wait(self) -> None:
        if self.delay > 0:
            time.sleep(self.delay)


# ---- REST ----------------------------------------------------------------------------

_MODEL_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?(?::(\w+)|(/metadata))?$")


def _json_value(value, binary: bool):
    """A numpy value as TF Serving writes it in JSON (strings as text, ``_bytes``
    outputs as {"b64": ...})."""
    if isinstance(value, np.ndarray):
        return [_json_value(v, binary) for v in value]
    if isinstance(value, bytes):
        if binary:
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    return int(value)


def _from_json(value):
    """A JSON request value as a numpy-ready nested list ({"b64": ...} decoded)."""
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            return base64.b64decode(value["b64"])
        raise _invalid("an input value must be a number, a string, a list or {\"b64\": ...}")
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8")
    return value


def _rows_to_columns(instances, names: list[str]) -> dict[str, list]:
    if not isinstance(instances, list):
        raise _invalid("'instances' must be a list")
    if len(names) == 1 and not any(isinstance(i, dict) and set(i) != {"b64"} for i in instances):
        return {names[0]: instances}
    columns: dict[str, list] = {name: [] for name in names}
    for number, instance in enumerate(instances):
        if not isinstance(instance, dict) or set(instance) != set(names):
            raise _invalid(
                f"instance {number} must be an object with the inputs {sorted(names)}"
            )
        for name in names:
            columns[name].append(instance[name])
    return columns


def predict_json(registry: ModelRegistry, name: str, version: int | None, body: dict) -> dict:
    """Answer one REST predict request body (already parsed)."""
    servable = registry.find(name, version)
    if not isinstance(body, dict):
        raise _invalid("the request body must be a JSON object")
    if ("instances" in body) == ("inputs" in body):
        raise _invalid("the request must hold either 'instances' or 'inputs' (not both)")
    signature = servable.signature(body.get("signature_name", DEFAULT_SIGNATURE))
    names = sorted(signature.inputs)
    if "instances" in body:
        columns = _rows_to_columns(body["instances"], names)
    elif isinstance(body["inputs"], dict) and set(body["inputs"]) == set(names):
        columns = body["inputs"]
    elif len(names) == 1:  # a single input may be given bare
        columns = {names[0]: body["inputs"]}
    else:
        raise _invalid(f"'inputs' must be an object with the inputs {names}")
    outputs = servable.run(
        body.get("signature_name", DEFAULT_SIGNATURE),
        {key: _from_json(value) for key, value in columns.items()},
    )
    encoded = {key: _json_value(np.asarray(value), key.endswith("_bytes"))
               for key, value in outputs.items()}
    if "inputs" in body:
        return {"outputs": encoded if len(encoded) > 1 else next(iter(encoded.values()))}
    sizes = {key: len(value) for key, value in encoded.items() if isinstance(value, list)}
    if len(sizes) != len(encoded) or len(set(sizes.values())) > 1:
        raise _invalid(f"outputs of inconsistent batch size {sizes}: use the 'inputs' form")
    if len(encoded) == 1:
        return {"predictions": next(iter(encoded.values()))}
    rows = next(iter(sizes.values())) if sizes else 0
    return {"predictions": [{key: value[i] for key, value in encoded.items()}
                            for i in range(rows)]}


def model_status_json(registry: ModelRegistry, name: str, version: int | None) -> dict:
    if version is None:
        servables = list(registry.models.get(name, {}).values())
        if not servables:
            registry.find(name)  # raises NOT_FOUND
    else:
        servables = [registry.find(name, version)]
    return {"model_version_status": [
        {"version": str(s.version), "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}}
        for s in sorted(servables, key=lambda s: -s.version)
    ]}


class _RestHandler(http.server.BaseHTTPRequestHandler):
    server_version = "tfserving-standin"
    protocol_version = "HTTP/1.1"
    registry: ModelRegistry
    faults: Faults

    def log_message(self, format, *args):  # tests read stderr: stay quiet
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def _route(self, method: str):
        match = _MODEL_PATH.match(self.path)
        verb = match and (match.group(3) or ("metadata" if match.group(4) else None))
        if not match or (method == "GET") != (verb is None):
            self._answer(404, {"error": f"Malformed request: {method} {self.path}"})
            return None
        version = int(match.group(2)) if match.group(2) else None
        return match.group(1), version, verb

    def do_GET(self):
        route = self._route("GET")
        if route is None:
            return
        name, version, _ = route
        try:
            self._answer(200, model_status_json(self.registry, name, version))
        except ServingStatus as error:
            self._answer(error.http_status, {"error": error.message})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        route = self._route("POST")
        if route is None:
            return
        name, version, verb = route
        if self.faults.take():
            self.close_connection = True  # no answer at all: the client sees a dropped link
            return
        self.faults.wait()
        try:
            if verb != "predict":
                raise ServingStatus(grpc.StatusCode.UNIMPLEMENTED,
                                    f"the stand-in serves only :predict, not :{verb}")
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                raise _invalid(f"JSON Parse error: {error}") from None
            self._answer(200, predict_json(self.registry, name, version, body))
        except ServingStatus as error:
            self._answer(error.http_status, {"error": error.message})


# ---- gRPC ----------------------------------------------------------------------------

class _PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, registry: ModelRegistry, faults: Faults):
        self.registry = registry
        self.faults = faults

    def Predict(self, request: predict_pb2.PredictRequest, context):
        if self.faults.take():
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection dropped by the stand-in")
        self.faults.wait()
        spec = request.model_spec
        version = spec.version.value if spec.HasField("version") else None
        try:
            servable = self.registry.find(spec.name, version)
            inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
            outputs = servable.run(spec.signature_name, inputs, request.output_filter)
        except ServingStatus as error:
            context.abort(error.code, error.message)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = spec.signature_name or DEFAULT_SIGNATURE
        for key, value in outputs.items():
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response


class StandInServer:
    """REST and gRPC endpoints for a :class:`ModelRegistry`, on 127.0.0.1.

    Ports default to 0 (ephemeral); ``rest_url`` and ``grpc_target`` say where they
    ended up. The REST port is bound when the server is made and listens from
    :meth:`start`: in between, connections to it are refused, as by a server not up yet,
    and no other process can take the port. Use as a context manager, or call
    :meth:`start` and :meth:`stop`."""

    def __init__(self, registry: ModelRegistry, rest_port: int = 0, grpc_port: int | None = 0):
        self.registry = registry
        self.faults = Faults()
        handler = type("Handler", (_RestHandler,), {"registry": registry, "faults": self.faults})
        self._http = http.server.ThreadingHTTPServer((HOST, rest_port), handler,
                                                     bind_and_activate=False)
        try:
            self._http.server_bind()
        except BaseException:
            self._http.server_close()
            raise
        self._http.daemon_threads = True
        self._http_thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._grpc = None
        self.grpc_port = None
        if grpc_port is not None:
            self._grpc = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
            prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
                _PredictionService(registry, self.faults), self._grpc
            )
            self.grpc_port = self._grpc.add_insecure_port(f"{HOST}:{grpc_port}")

    @property
    def rest_url(self) -> str:
        return f"http://{HOST}:{self._http.server_address[1]}"

    @property
    def grpc_target(self) -> str:
        return f"{HOST}:{self.grpc_port}"

    def start(self) -> "StandInServer":
        self._http.server_activate()
        self._http_thread.start()
        if self._grpc is not None:
            self._grpc.start()
        return self

    def stop(self) -> None:
        if self._http_thread.is_alive():  # shutdown() waits for a loop that never started
            self._http.shutdown()
        self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(5)

    def __enter__(self) -> "StandInServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
