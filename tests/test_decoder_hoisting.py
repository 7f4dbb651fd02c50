"""Teacher forcing computes the paper's decoder: the same logits, attention and gradients
as A.2.2's equations written out step by step from the layer's own weights; and its loop
holds the products counted below, no more (the word projections, the keys U_a h_j and the
deep output are taken out of it). Taking C c_i and the products of s_(i-1) out as well
was measured slower and not kept (docs/benchmarks.md, "Work taken out of the decoder's
loop")."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.core.config import variant_config
from keras_nmt.models.rnnsearch import TranslationModel, sentence_nll

# Every dimension a different size: a block of a fused kernel taken at the wrong offset
# fails on its shape.
SIZES = {"embedding": 7, "hidden": 6, "attention": 5, "maxout": 4,
         "src_vocab_size": 11, "tgt_vocab_size": 13}
SOURCE = [[4, 5, 6, 7, 3], [8, 3, 0, 0, 0], [9, 10, 3, 0, 0]]
TARGET_IN = [[2, 5, 9, 4, 12], [2, 8, 0, 0, 0], [2, 6, 7, 11, 0]]
TARGET_OUT = [[5, 9, 4, 12, 3], [8, 3, 0, 0, 0], [6, 7, 11, 3, 0]]
# Max abs differences against the reference, measured on this batch: float32 5e-7 on the
# logits, alpha and gradients (sizes up to 3); mixed_bfloat16, whose two formulations round
# to 8 bits of mantissa at different places, 1.6e-2 on logits and alpha, 3.1e-2 on the
# gradients. A term missing or a block taken at the wrong offset differs by ~1.
TOLERANCE = {"float32": dict(rtol=1e-5, atol=5e-6), "mixed_bfloat16": dict(rtol=0.02, atol=0.05)}


def _model(arch, reset_after, precision="float32"):
    model = TranslationModel(variant_config(f"{arch}50", {**SIZES, "reset_after": reset_after}),
                             precision=precision)
    rng = np.random.default_rng(7)
    for w in model.weights:  # large random values: no near-zero initialisation hides a term
        w.assign(rng.normal(0, 0.4, w.shape).astype("float32"))
    return model


def _blocks(kernel, count):
    return tf.split(kernel, count, axis=-1)


def reference_forced(model, source, target_in):
    """Logits [B, T, V] and alpha [B, T, Tx], one step at a time as A.1.2 and A.2.2 write
    them, in the model's compute dtype, from the decoder's weights."""
    decoder, dtype = model.decoder, model.decoder.compute_dtype
    cell, readout = decoder.cell, decoder.readout

    def weight(variable):
        return tf.cast(variable, dtype)

    annotations, mask, summary = model.encoder(source)
    W_z, W_r, W_h = _blocks(weight(cell.input_kernel), 3)
    C_z, C_r, C_h = _blocks(weight(cell.context_kernel), 3)
    U_z, U_r, U_h = _blocks(weight(cell.recurrent_kernel), 3)
    b_z, b_r, b_h = _blocks(weight(cell.bias), 3)
    E = weight(decoder.embedding.embeddings)
    s = tf.tanh(summary @ weight(decoder.init_kernel) + weight(decoder.init_bias))
    logits, alphas = [], []
    for i in range(target_in.shape[1]):
        Ey = tf.gather(E, target_in[:, i])
        if decoder.use_attention:
            attention = decoder.attention
            W_a, U_a, v_a = (weight(v) for v in (attention.query_kernel, attention.key_kernel,
                                                 attention.energy_kernel))
            e = tf.reduce_sum(tf.tanh((s @ W_a)[:, None] + annotations @ U_a) * v_a, axis=-1)
            alpha = tf.nn.softmax(tf.where(mask, e, tf.constant(-np.inf, dtype)), axis=-1)
            c = tf.reduce_sum(alpha[:, :, None] * annotations, axis=1)
        else:
            alpha, c = tf.zeros(tf.shape(mask), dtype), summary
        t_tilde = (s @ weight(readout.state_kernel) + Ey @ weight(readout.embedding_kernel)
                   + c @ weight(readout.context_kernel) + weight(readout.bias))
        t = tf.reduce_max(tf.reshape(t_tilde, [-1, readout.units, 2]), axis=-1)
        logits.append(t @ weight(readout.output_kernel) + weight(readout.output_bias))
        alphas.append(alpha)
        z = tf.sigmoid(Ey @ W_z + s @ U_z + c @ C_z + b_z)
        r = tf.sigmoid(Ey @ W_r + s @ U_r + c @ C_r + b_r)
        if decoder.reset_after:
            candidate = tf.tanh(Ey @ W_h + r * (s @ U_h + weight(cell.recurrent_bias))
                                + c @ C_h + b_h)
        else:
            candidate = tf.tanh(Ey @ W_h + (r * s) @ U_h + c @ C_h + b_h)
        s = (1 - z) * s + z * candidate
    return tf.stack(logits, axis=1), tf.stack(alphas, axis=1)


def _outputs_and_gradients(model, forced):
    source, target_in = tf.constant(SOURCE), tf.constant(TARGET_IN)
    probe = tf.constant(np.random.default_rng(1).normal(size=(3, 5, 5)), tf.float32)
    with tf.GradientTape() as tape:
        logits, alpha = forced(model, source, target_in)
        loss = (tf.reduce_sum(sentence_nll(logits, tf.constant(TARGET_OUT)))
                + tf.reduce_sum(tf.cast(alpha, tf.float32) * probe))
    gradients = tape.gradient(loss, model.trainable_weights)
    return ([tf.cast(logits, tf.float32).numpy(), tf.cast(alpha, tf.float32).numpy()],
            [tf.convert_to_tensor(g).numpy() for g in gradients])


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("arch", ["search", "encdec"])
@pytest.mark.parametrize("reset_after", [False, True])
def test_teacher_forcing_is_the_papers_decoder(arch, reset_after, precision):
    model = _model(arch, reset_after, precision)
    assert model.decoder.compute_dtype == precision.replace("mixed_", "")
    outputs, gradients = _outputs_and_gradients(
        model, lambda m, source, target_in: m.forced(source, target_in))
    expected_outputs, expected_gradients = _outputs_and_gradients(model, reference_forced)
    differences = [float(np.abs(a - b).max())
                   for a, b in zip(outputs + gradients, expected_outputs + expected_gradients)]
    print(f"{arch} reset_after={reset_after} {precision}: max abs difference "
          f"outputs {max(differences[:2]):.2e}, gradients {max(differences[2:]):.2e}")
    for got, want in zip(outputs, expected_outputs):
        np.testing.assert_allclose(got, want, **TOLERANCE[precision])
    assert len(gradients) == len(model.trainable_weights)
    for weight, got, want in zip(model.trainable_weights, gradients, expected_gradients):
        assert np.abs(want).max() > 0, weight.path  # every weight takes part
        np.testing.assert_allclose(got, want, err_msg=weight.path, **TOLERANCE[precision])


PRODUCTS = {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"}
GATHERS = {"Gather", "GatherV2", "ResourceGather", "GatherNd", "ResourceGatherNd"}


def _decoder_loop_bodies(model):
    """{name: Counter of op types} of the decoder's loop body and of its gradient's, in
    a training step's graph (the encoder's loop, beside it, is left out)."""
    @tf.function
    def gradients(source, target_in):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model((source, target_in)))
        return tape.gradient(loss, model.trainable_weights)

    graph = gradients.get_concrete_function(tf.constant(SOURCE), tf.constant(TARGET_IN)).graph
    return {f.signature.name: collections.Counter(node.op for node in f.node_def)
            for f in graph.as_graph_def().library.function
            if "decoder" in f.signature.name and "while_body" in f.signature.name
            and not f.signature.name.endswith("_rewritten")}


@pytest.mark.parametrize("arch, reset_after, products", [
    # W_a s_(i-1), [U_z | U_r] s_(i-1), U (r o s), v_a' tanh(.), alpha_i h_j, C c_i
    ("search", False, 6),
    ("search", True, 5),  # W_a s_(i-1), U s_(i-1), v_a' tanh(.), alpha_i h_j, C c_i
    ("encdec", False, 2),  # s_(i-1) [U_z | U_r], U (r o s)
    ("encdec", True, 1),  # s_(i-1) U
])
def test_the_loop_holds_only_the_products_of_the_recurrence(arch, reset_after, products):
    bodies = _decoder_loop_bodies(_model(arch, reset_after))
    forward = [ops for name, ops in bodies.items() if "_grad_" not in name]
    backward = [ops for name, ops in bodies.items() if "_grad_" in name]
    assert len(forward) == len(backward) == 1, sorted(bodies)
    assert sum(forward[0][op] for op in PRODUCTS) == products
    # The gradient of a product is two: no other product joins the backward loop.
    assert sum(backward[0][op] for op in PRODUCTS) == 2 * products
    for ops in forward + backward:  # the target words are embedded before the loop
        assert not GATHERS & set(ops), ops
