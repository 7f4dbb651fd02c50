"""The files next to the exported models that tell TF Serving how to serve them:
``models.config`` (a ModelServerConfig text proto) and ``SERVING.md``."""

from __future__ import annotations

import pathlib

CONFIG_NAME = "models.config"
SERVING_NAME = "SERVING.md"


def models_config(export_dir: pathlib.Path, name: str) -> str:
    """``models.config`` naming ``name`` (base path ``/models/NAME``, the directory the
    docker commands mount EXPORT_DIR on). Models of other names already listed in an
    existing file are kept, so several models exported into one directory are served
    together."""
    # TF Serving's own proto: what it parses is what we write.
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    existing = export_dir / CONFIG_NAME
    if existing.is_file():
        try:
            text_format.Parse(existing.read_text(encoding="utf-8"), config)
        except text_format.ParseError:
            config = model_server_config_pb2.ModelServerConfig()  # rewritten from scratch
    entries = config.model_config_list.config
    kept = [entry for entry in entries if entry.name != name]
    del entries[:]
    entries.extend(kept)
    entry = entries.add()
    entry.name = name
    entry.base_path = f"/models/{name}"
    entry.model_platform = "tensorflow"
    return text_format.MessageToString(config)


def serving_md(name: str, version: int, signatures: dict[str, str], onnx: bool) -> str:
    """SERVING.md: how to serve EXPORT_DIR with TF Serving (REST and gRPC)."""
    outputs = "\n".join(f"  - `{key}`: {value}" for key, value in signatures.items())
    onnx_part = (
        f"\n## ONNX\n\n`{name}.onnx` is the `translate_ids` signature converted by tf2onnx "
        f"(token ids in, token ids out). `{name}.onnx.json` names its vocabularies "
        f"(`{name}.vocab.*.txt`), tokenizer, maximum source length, beam size and alpha: "
        "tokenization and detokenization run in Python (`keras_nmt.tokenizer`) around "
        "onnxruntime.\n"
        if onnx else ""
    )
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
  -d '{{"signature_name": "serving_default", "inputs": {{"sentences": ["The man is here."]}}}}'
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
