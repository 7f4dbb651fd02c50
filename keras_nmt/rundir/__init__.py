"""A run on disk: its directory, the model weights of its checkpoints, averaging."""
