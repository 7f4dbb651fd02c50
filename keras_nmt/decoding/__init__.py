"""Translation: the one front end, the Keras and onnxruntime translators, ensembles,
constraints, confidence and <unk> replacement (each with its graph twin)."""
