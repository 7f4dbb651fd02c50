"""The GRU gate arithmetic that the encoder's and the decoder's recurrences share.

Both keep the three gates' matrices fused as [z | r | candidate] and take the input
terms (x, already projected) outside the step; a step only adds the recurrent terms.
The two differ in how they mix the gates into the new state (the paper's decoder:
(1 - z) o s + z o s~; Keras's GRU, whose weights the encoder uses: z o h + (1 - z) o h~),
so that stays with each caller.
"""

from __future__ import annotations

import tensorflow as tf


def recurrent_kernels(kernel, units: int, reset_after: bool) -> tuple:
    """The fused recurrent kernel [..., n, 3n] as :func:`gates` takes it: whole for the
    reset-after gate, else split into [U_z | U_r] and U. Callers with a loop split it
    once outside: slicing a kernel inside the loop costs a full-size gradient per step."""
    kernel = tf.convert_to_tensor(kernel)
    if reset_after:
        return (kernel,)
    return tuple(tf.split(kernel, [2 * units, units], axis=-1))


def gates(x, state, kernels: tuple, recurrent_bias=None):
    """(z, candidate) of one GRU step. ``x``: the input terms [..., 3n]; ``state``:
    [..., n]; ``kernels``: from :func:`recurrent_kernels` (one kernel means the
    reset-after gate, r o (U h + b), with ``recurrent_bias`` [3n] added to U h; two
    mean the paper's reset-before gate, U (r o h)). Batched states [D, B, n] with
    kernels [D, n, 3n] run D GRUs at once. ``tf.split``, not slices: a slice's gradient
    is a zero tensor of the whole size."""
    x_z, x_r, x_h = tf.split(x, 3, axis=-1)
    if len(kernels) == 1:
        inner = tf.matmul(state, kernels[0])
        if recurrent_bias is not None:
            inner = inner + recurrent_bias
        h_z, h_r, h_h = tf.split(inner, 3, axis=-1)
        z = tf.sigmoid(x_z + h_z)
        r = tf.sigmoid(x_r + h_r)
        return z, tf.tanh(x_h + r * h_h)
    h_z, h_r = tf.split(tf.matmul(state, kernels[0]), 2, axis=-1)
    z = tf.sigmoid(x_z + h_z)
    r = tf.sigmoid(x_r + h_r)
    return z, tf.tanh(x_h + tf.matmul(r * state, kernels[1]))
