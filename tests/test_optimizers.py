"""keras_nmt.training.optimizers: the fused update kernels give Keras's own updates."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.training.optimizers import FusedAdadelta, FusedAdam


def _run(optimizer, steps=4, densify=False):
    """Variables after ``steps`` updates with fixed, varied gradients: a dense one and
    an embedding-style IndexedSlices one with a repeated row (``densify``: handed over
    as the dense gradient it stands for)."""
    rng = np.random.default_rng(0)
    dense = keras.Variable(rng.normal(size=(5, 3)).astype("float32"))
    table = keras.Variable(rng.normal(size=(6, 2)).astype("float32"))
    optimizer.build([dense, table])
    for step in range(steps):
        g_dense = tf.constant(rng.normal(size=(5, 3)).astype("float32"))
        rows = tf.constant([1, 4, 1])
        g_table = tf.IndexedSlices(tf.constant(rng.normal(size=(3, 2)).astype("float32")), rows,
                                   dense_shape=tf.constant([6, 2]))
        if densify:
            g_table = tf.convert_to_tensor(g_table)
        optimizer.apply_gradients([(g_dense, dense), (g_table, table)])
    return dense.numpy(), table.numpy(), [v.numpy() for v in optimizer.variables]


@pytest.mark.parametrize("fused,reference", [
    (lambda: FusedAdam(learning_rate=0.01), lambda: keras.optimizers.Adam(learning_rate=0.01)),
    (lambda: FusedAdadelta(learning_rate=1.0, rho=0.95, epsilon=1e-6),
     lambda: keras.optimizers.Adadelta(learning_rate=1.0, rho=0.95, epsilon=1e-6)),
])
def test_fused_update_equals_keras(fused, reference):
    # Against Keras on the dense gradient. Keras's own sparse path squares each
    # occurrence of a repeated row separately (g1^2 + g2^2 in the second moment); the
    # fused update squares the row's gradient, (g1 + g2)^2, as Adam and Adadelta define it.
    got_dense, got_table, got_slots = _run(fused())
    want_dense, want_table, want_slots = _run(reference(), densify=True)
    np.testing.assert_allclose(got_dense, want_dense, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_table, want_table, rtol=1e-5, atol=1e-6)
    # Same slot variables (the checkpoint's contents), same values.
    assert [s.shape for s in got_slots] == [s.shape for s in want_slots]
    for got, want in zip(got_slots, want_slots):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # The update did something: a test of nothing would pass too.
    assert not np.allclose(got_dense, _run(fused(), steps=0)[0])


def test_fused_adam_in_a_compiled_step():
    variable = keras.Variable(np.ones((2, 2), "float32"))
    optimizer = FusedAdam(learning_rate=0.1)
    optimizer.build([variable])

    @tf.function
    def step():
        optimizer.apply_gradients([(tf.ones((2, 2)), variable)])

    step()
    step()
    # Adam's first steps move each weight by about the learning rate.
    np.testing.assert_allclose(variable.numpy(), 1.0 - 2 * 0.1, rtol=1e-4)
