"""Tokens to batches: the training split as ids on disk, tf.data pipelines, pair samples."""
