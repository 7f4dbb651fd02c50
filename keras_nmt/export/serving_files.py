"""The files next to the exported models that tell TF Serving how to serve them:
``models.config`` (a ModelServerConfig text proto) and ``SERVING.md``.

:func:`models_config` writes ``models.config`` with TF Serving's own proto class (the
training install); :func:`read_models_config` reads it back without TensorFlow, for
``keras-nmt serve``, with the part of that proto a server of ONNX models uses."""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib

from keras_nmt.core.errors import ExportError
from keras_nmt.export import layout

CONFIG_NAME = "models.config"
SERVING_NAME = "SERVING.md"
# The directory the docker commands of SERVING.md mount EXPORT_DIR on: the base paths
# models.config names lie under it.
CONTAINER_ROOT = "/models"


def models_config(export_dir: pathlib.Path, name: str) -> str:
    """``models.config`` naming ``name`` (base path ``/models/NAME``, the directory the
    docker commands mount EXPORT_DIR on). Models of other names already listed in an
    existing file are kept, so several models exported into one directory are served
    together; an existing file that cannot be read as a ModelServerConfig raises
    :class:`ExportError` rather than being replaced, which would drop the models it lists."""
    # TF Serving's own proto: what it parses is what we write.
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    existing = pathlib.Path(export_dir) / CONFIG_NAME
    if existing.exists():
        try:
            text_format.Parse(existing.read_text(encoding="utf-8"), config)
        except (OSError, UnicodeDecodeError, text_format.ParseError) as error:
            reason = " ".join(str(getattr(error, "strerror", None) or error).split())
            raise ExportError(
                f"cannot read {existing} as a TF Serving model config ({reason}); it may list "
                "other models, so it is not rewritten: fix it, or remove it to start anew"
            ) from None
    entries = config.model_config_list.config
    kept = [entry for entry in entries if entry.name != name]
    del entries[:]
    entries.extend(kept)
    entry = entries.add()
    entry.name = name
    entry.base_path = f"/models/{name}"
    entry.model_platform = "tensorflow"
    return text_format.MessageToString(config)


# What a SentencePiece export needs from the server, for SERVING.md. Checked against
# TF Serving's sources: tensorflow_serving/model_servers/BUILD links
# "@org_tensorflow_text//tensorflow_text:ops_lib" (SUPPORTED_TENSORFLOW_OPS) into
# tensorflow_model_server, and TF Text's ops_lib includes its SentencePiece kernels.
SENTENCEPIECE_OPS_NOTE = """
## TF Text ops (SentencePiece)

This model was trained with SentencePiece, and its SavedModel runs the run's
SentencePiece models (serialized into its graph: nothing else to copy) with
TensorFlow Text's ops `SentencepieceOp`, `SentencepieceTokenizeOp` and
`SentencepieceDetokenizeOp`. The stock `tensorflow_model_server` (the
`tensorflow/serving` docker image included) links TF Text's op library
(`tensorflow_text:ops_lib`, listed in `SUPPORTED_TENSORFLOW_OPS` of
`tensorflow_serving/model_servers/BUILD`; read from TF Serving's sources, not run
here), so it serves this model as it is. Use a TF Serving release no older than the
TensorFlow Text the model was exported with ({tf_text}): an older server may lack
what the graph's ops use. A server built
without TF Text (a custom build) fails to load it with "Op type not registered
'SentencepieceOp'". In Python, `import tensorflow_text` before loading the SavedModel
(`tf.saved_model.load` and the TF1 loader cannot find the ops otherwise); the
`saved_model_cli` commands below need the same (run them as
`python -c "import tensorflow_text, sys; from tensorflow.python.tools import saved_model_cli; sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()" ...`).
"""


def serving_md(name: str, version: int, signatures: dict[str, str], onnx: bool,
               tokenizer: str = "word", constrained: bool = False) -> str:
    """SERVING.md: how to serve EXPORT_DIR with TF Serving (REST and gRPC); with
    ``constrained`` (and ``onnx``), the constrained ONNX model too."""
    outputs = "\n".join(f"  - `{key}`: {value}" for key, value in signatures.items())
    sentencepiece = tokenizer == "sentencepiece"
    codec_files = (f"SentencePiece models (`{name}.spm.*.model`, run by the `sentencepiece` "
                   "package through `keras_nmt.text.sentencepiece`)" if sentencepiece
                   else "tokenizer (`keras_nmt.text.word`)")
    onnx_dir = f"{name}/{version}/{layout.ONNX_DIR}"
    onnx_part = (
        f"\n## ONNX\n\n`{onnx_dir}/{name}.onnx` is the `translate_ids` signature converted by "
        f"tf2onnx (token ids in, token ids out); TF Serving ignores `{onnx_dir}/`. "
        f"`{name}.onnx.json` beside it names its vocabularies "
        f"(`{name}.vocab.*.txt`), tokenizer, maximum source length, beam size, alpha and "
        "whether a line of several sentences is split into them as the SavedModel does: "
        f"encoding and decoding run in Python with the run's {codec_files} around "
        "onnxruntime (`keras-nmt onnx-translate EXPORT_DIR`, which reads the newest version's "
        "ONNX model, or `python serving/onnx_translate.py`).\n"
        if onnx else ""
    )
    if onnx and constrained:
        onnx_part += (
            f"\n`{onnx_dir}/{name}.constrained.onnx` is `translate_ids_constrained` converted "
            "the same way: `keras-nmt onnx-translate --constraints FILE --prefix FILE "
            "--glossary TSV` decodes the constrained lines with it (the other lines keep "
            f"`{name}.onnx`).\n"
        )
    if sentencepiece:
        import tensorflow_text

        onnx_part = SENTENCEPIECE_OPS_NOTE.format(tf_text=tensorflow_text.__version__) + onnx_part
    return f"""# Serving this export

This directory holds the SavedModel `{name}/{version}/` in TensorFlow Serving's layout
(`{name}/VERSION/saved_model.pb`; TF Serving serves the highest version it finds) and
`{CONFIG_NAME}`, a ModelServerConfig naming the model `{name}` with base path
`/models/{name}`.

A real deployment runs TensorFlow Serving itself, e.g. its docker image
(`tensorflow_model_server` could not be installed on the machines this project was
built on, so these commands were not run here; the export is checked with the TF1
session loader, the code path TF Serving uses). From this directory:

```sh
docker run --rm -p 8500:8500 -p 8501:8501 \\
  -v "$PWD:/models" \\
  tensorflow/serving --model_config_file=/models/{CONFIG_NAME}
```

Port 8501 is the REST API, port 8500 gRPC. One model without the config file:
`docker run --rm -p 8500:8500 -p 8501:8501 -v "$PWD/{name}:/models/{name}" -e MODEL_NAME={name} tensorflow/serving`.

REST:

```sh
curl -s -X POST http://localhost:8501/v1/models/{name}:predict \\
  -H 'Content-Type: application/json' -d '{{"signature_name": "serving_default", "inputs": {{"sentences": ["The man is here."]}}}}'
```

gRPC (Python, with the `tensorflow-serving-api` package):

```python
import grpc, tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel("localhost:8500"))
request = predict_pb2.PredictRequest()
request.model_spec.name = "{name}"
request.model_spec.signature_name = "serving_default"
request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(["The man is here."]))
response = stub.Predict(request, timeout=30.0)
print(tf.make_ndarray(response.outputs["translations"]))
```

## Signatures

{outputs}

Check them without a server (`saved_model_cli run` uses the TF1 session loader too):

```sh
saved_model_cli show --dir {name}/{version} --all
saved_model_cli run --dir {name}/{version} --tag_set serve --signature_def serving_default \\
  --input_exprs 'sentences=["The man is here.", ""]'
```
{onnx_part}"""


# ---- reading models.config without TensorFlow -----------------------------------------

@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One model of a models.config: its name, its base path (the directory of its
    versions, resolved here), the versions its version policy serves and its labels."""

    name: str
    base_path: pathlib.Path
    policy: str  # "latest", "all" or "specific", as TF Serving's ServableVersionPolicy
    count: int  # latest: how many of the newest versions
    specific: tuple[int, ...]  # specific: these versions
    labels: dict[str, int]  # version_labels: label -> version

    def chosen_versions(self) -> list[int]:
        """The versions the policy serves among those under ``base_path`` (lowest
        first); :class:`ExportError` when it serves none or names one that is missing."""
        found = layout.versions(self.base_path)
        if self.policy == "specific":
            missing = [v for v in self.specific if v not in found]
            if missing:
                raise ExportError(f"model {self.name!r}: {self.base_path} has no version "
                                  f"{missing[0]} (its version policy names it)")
            return sorted(set(self.specific))
        if not found:
            raise ExportError(f"model {self.name!r}: {self.base_path} holds no exported "
                              "version")
        return found if self.policy == "all" else found[-self.count:]


@functools.cache
def _config_class():
    """A message class for ModelServerConfig's text format, built from a descriptor of
    the fields named below (their names and nesting as in TF Serving's
    model_server_config.proto and file_system_storage_path_source.proto). Fields it
    lacks (logging, model_type, ...) are skipped when parsing, as a server of ONNX models
    has no use for them. A private pool: no clash with TF Serving's own classes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    kind = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="keras_nmt_models_config.proto",
                                               package="keras_nmt", syntax="proto3")

    def message(name: str, *fields, into=proto.message_type, map_entry: bool = False):
        described = into.add(name=name)
        described.options.map_entry = map_entry
        for number, (field, field_type, label, type_name, oneof) in enumerate(fields, 1):
            added = described.field.add(name=field, number=number, type=field_type,
                                        label=label or kind.LABEL_OPTIONAL)
            if type_name:
                added.type_name = f".keras_nmt.{type_name}"
            if oneof:
                if not described.oneof_decl:
                    described.oneof_decl.add(name="choice")
                added.oneof_index = 0
        return described

    repeated, text, message_type = kind.LABEL_REPEATED, kind.TYPE_STRING, kind.TYPE_MESSAGE
    message("Latest", ("num_versions", kind.TYPE_UINT32, None, None, False))
    message("All")
    message("Specific", ("versions", kind.TYPE_INT64, repeated, None, False))
    message("ServableVersionPolicy", *((choice, message_type, None, choice.title(), True)
                                       for choice in ("latest", "all", "specific")))
    model = message(
        "ModelConfig", ("name", text, None, None, False), ("base_path", text, None, None, False),
        ("model_platform", text, None, None, False),
        ("model_version_policy", message_type, None, "ServableVersionPolicy", False),
        ("version_labels", message_type, repeated, "ModelConfig.VersionLabelsEntry", False),
    )
    # A map field's entry type, nested in its message as protoc writes it.
    message("VersionLabelsEntry", ("key", text, None, None, False),
            ("value", kind.TYPE_INT64, None, None, False), into=model.nested_type,
            map_entry=True)
    message("ModelConfigList", ("config", message_type, repeated, "ModelConfig", False))
    message("ModelServerConfig",
            ("model_config_list", message_type, None, "ModelConfigList", False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "keras_nmt.ModelServerConfig"))


def resolve_base_path(base_path: str, config_dir: pathlib.Path) -> pathlib.Path:
    """Where a models.config base path lies here: a relative one under the config's
    directory; one under /models (where SERVING.md's docker commands mount EXPORT_DIR;
    ``keras-nmt export`` writes /models/NAME) that is not a directory here, under the
    config's directory too; any other as written."""
    path = pathlib.PurePosixPath(base_path)
    if not path.is_absolute():
        return config_dir / path
    if not pathlib.Path(base_path).is_dir() and path.is_relative_to(CONTAINER_ROOT):
        return config_dir / path.relative_to(CONTAINER_ROOT)
    return pathlib.Path(base_path)


def read_models_config(path: str | os.PathLike) -> list[ModelEntry]:
    """The models of a models.config (TF Serving's --model_config_file text format),
    base paths resolved by :func:`resolve_base_path`; :class:`ExportError` (one line)
    for a file that cannot be read or lists no model, or a name listed twice."""
    from google.protobuf import text_format

    path = pathlib.Path(path)
    config = _config_class()()
    try:
        text_format.Parse(path.read_text(encoding="utf-8"), config, allow_unknown_field=True)
    except (OSError, UnicodeDecodeError, text_format.ParseError) as error:
        reason = " ".join(str(getattr(error, "strerror", None) or error).split())
        raise ExportError(f"cannot read {path} as a TF Serving model config: {reason}") from None
    entries, seen = [], set()
    for model in config.model_config_list.config:
        if not model.name or not model.base_path:
            raise ExportError(f"{path}: every model needs a name and a base_path")
        if model.name in seen:
            raise ExportError(f"{path} lists the model {model.name!r} twice")
        seen.add(model.name)
        policy = model.model_version_policy.WhichOneof("choice") or "latest"
        entries.append(ModelEntry(
            name=model.name,
            base_path=resolve_base_path(model.base_path, path.parent),
            policy=policy,
            count=max(1, model.model_version_policy.latest.num_versions),
            specific=tuple(model.model_version_policy.specific.versions),
            labels=dict(model.version_labels),
        ))
    if not entries:
        raise ExportError(f"{path} lists no model (model_config_list is empty)")
    return entries
