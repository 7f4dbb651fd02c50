"""The k best words of every row of logits over a whole vocabulary, in two stages, and
the row-wise gather the search reads its candidates with.

Contract: the values and words of ``tf.math.top_k``, ties to the lower word id. Cost for
R rows of V words: one pass over the R * V logits for the blocks' maxima, a top-k over
R * V / 128 block maxima, and one over the R * k * 128 words of the k kept blocks.
"""

from __future__ import annotations

import tensorflow as tf

# Words per block of the two-stage top-k. A shortlist's output columns come in whole
# blocks (keras_nmt.search.shortlist.output_columns), so its steps never pad their logits.
BLOCK = 128


def take_along_rows(x, index):
    """``x[r, index[r, j]]`` for every row r: [R, W] and int [R, J] -> [R, J]. One gather
    on the flattened tensor, the plain form the ONNX conversion is tested with."""
    rows, width = tf.shape(x)[0], tf.shape(x)[1]
    return tf.gather(tf.reshape(x, [-1]), index + tf.range(rows)[:, None] * width)


def top_k_over_vocabulary(logits, k, whole_blocks: bool = False):
    """tf.math.top_k(logits, k) for rows of many words, in two stages.

    TensorFlow's CPU top-k over a long row costs many times a pass over it. So each row
    is cut into blocks of 128 words (the last one padded, unless the rows
    come in ``whole_blocks``, as a shortlist's do), the k blocks with the highest maxima
    are kept (a word among the k best is in one of them: k other blocks would otherwise
    each hold a larger word), and the top k of their k * 128 words is taken. The kept
    blocks are put back in word order first, so ties go to the lower word id, as
    tf.math.top_k breaks them.
    """
    if not whole_blocks:
        width = tf.shape(logits)[1]
        logits = tf.pad(logits, [[0, 0], [0, (BLOCK - width % BLOCK) % BLOCK]],
                        constant_values=logits.dtype.min)
    rows, blocks = tf.shape(logits)[0], tf.shape(logits)[1] // BLOCK
    maxima = tf.reduce_max(tf.reshape(logits, [rows, blocks, BLOCK]), axis=2)
    _, kept = tf.math.top_k(maxima, k=tf.minimum(k, blocks))
    # Sorted as floats: block numbers are small integers, and ONNX's TopK takes floats.
    kept = tf.cast(-tf.math.top_k(-tf.cast(kept, tf.float32), k=tf.shape(kept)[1])[0], tf.int32)
    # The kept blocks are copied whole, as rows of 128 logits, not word by word.
    block_rows = tf.reshape(kept + tf.range(rows)[:, None] * blocks, [-1])
    gathered = tf.reshape(tf.gather(tf.reshape(logits, [rows * blocks, BLOCK]), block_rows),
                          [rows, -1])
    values, position = tf.math.top_k(gathered, k=k)
    words = take_along_rows(kept, position // BLOCK) * BLOCK + position % BLOCK
    return values, words
