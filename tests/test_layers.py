"""The paper's equations, checked against hand computation and NumPy re-computation."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.core.config import variant_config
from keras_nmt.layers import AdditiveAttention, ConditionalGRUCell, MaxoutReadout
from keras_nmt.layers.row_layout import hypotheses_per_sentence, rows_of, tile_rows
from keras_nmt.layers.initializers import BlockOrthogonal
from keras_nmt.models.rnnsearch import TranslationModel, sentence_nll

# Every dimension a different size (not support.TINY_SETTINGS): a matrix used the wrong
# way round fails on its shape.
DISTINCT_SIZES = {"embedding": 6, "hidden": 5, "attention": 4, "maxout": 3,
                  "src_vocab_size": 11, "tgt_vocab_size": 13}


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _attention_2x3():
    """n = 2 decoder units, 3 source positions, annotations of size 2, n' = 2."""
    layer = AdditiveAttention(2)
    layer.build((None, 2), (None, None, 2))
    layer.query_kernel.assign([[1.0, 0.0], [0.0, 1.0]])  # W_a
    layer.key_kernel.assign([[0.5, 0.0], [0.0, -1.0]])  # U_a
    layer.energy_kernel.assign([1.0, 2.0])  # v_a
    return layer


def test_attention_matches_hand_computation_on_2x3():
    layer = _attention_2x3()
    s = tf.constant([[0.2, -0.1]])
    h = tf.constant([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]])
    mask = tf.constant([[True, True, True]])
    context, weights = layer(s, layer.precompute_keys(h), h, mask)
    # W_a s = (0.2, -0.1); U_a h_j = (0.5, 0), (0, -1), (1, -2)
    e = [
        1 * math.tanh(0.2 + 0.5) + 2 * math.tanh(-0.1 + 0.0),
        1 * math.tanh(0.2 + 0.0) + 2 * math.tanh(-0.1 - 1.0),
        1 * math.tanh(0.2 + 1.0) + 2 * math.tanh(-0.1 - 2.0),
    ]
    z = sum(math.exp(x) for x in e)
    alpha = [math.exp(x) / z for x in e]
    c = [alpha[0] * 1 + alpha[2] * 2, alpha[1] * 1 + alpha[2] * 2]
    np.testing.assert_allclose(weights.numpy()[0], alpha, rtol=1e-5)
    np.testing.assert_allclose(context.numpy()[0], c, rtol=1e-5)
    assert weights.numpy().sum() == pytest.approx(1.0, abs=1e-6)


def test_attention_ignores_padding():
    layer = _attention_2x3()
    s = tf.constant([[0.2, -0.1], [0.2, -0.1]])
    h = tf.constant([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], [[1.0, 0.0], [0.0, 1.0], [-9.0, 7.0]]])
    mask = tf.constant([[True, True, False], [True, True, False]])
    context, weights = layer(s, layer.precompute_keys(h), h, mask)
    e = [math.tanh(0.7) + 2 * math.tanh(-0.1), math.tanh(0.2) + 2 * math.tanh(-1.1)]
    alpha0 = math.exp(e[0]) / (math.exp(e[0]) + math.exp(e[1]))
    for row in range(2):  # the padded position's value changes nothing
        np.testing.assert_allclose(weights.numpy()[row], [alpha0, 1 - alpha0, 0.0], atol=1e-6)
        np.testing.assert_allclose(context.numpy()[row], [alpha0, 1 - alpha0], rtol=1e-5)


def _random_assign(layer, scale=0.5, seed=0):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0, scale, w.shape).astype("float32"))


@pytest.mark.parametrize("reset_after", [False, True])
def test_conditional_gru_step_matches_numpy_equations(reset_after):
    m, n, ctx = 3, 4, 6
    cell = ConditionalGRUCell(n, reset_after=reset_after)
    cell.build(m, ctx)
    _random_assign(cell)
    rng = np.random.default_rng(1)
    ey, s, c = (rng.normal(size=shape).astype("float32") for shape in [(2, m), (2, n), (2, ctx)])
    got = cell(cell.project_inputs(tf.constant(ey)), cell.project_context(tf.constant(c)), tf.constant(s))
    W, C, U, b = (v.numpy() for v in (cell.input_kernel, cell.context_kernel, cell.recurrent_kernel, cell.bias))
    Wz, Wr, Wh = W[:, :n], W[:, n:2 * n], W[:, 2 * n:]
    Cz, Cr, Ch = C[:, :n], C[:, n:2 * n], C[:, 2 * n:]
    Uz, Ur, Uh = U[:, :n], U[:, n:2 * n], U[:, 2 * n:]
    bz, br, bh = b[:n], b[n:2 * n], b[2 * n:]
    z = sigmoid(ey @ Wz + s @ Uz + c @ Cz + bz)
    r = sigmoid(ey @ Wr + s @ Ur + c @ Cr + br)
    if reset_after:
        candidate = np.tanh(ey @ Wh + r * (s @ Uh + cell.recurrent_bias.numpy()) + c @ Ch + bh)
    else:  # A.2.2: U [r o s], the reset applied before the recurrent product
        candidate = np.tanh(ey @ Wh + (r * s) @ Uh + c @ Ch + bh)
    expected = (1 - z) * s + z * candidate
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_maxout_readout_matches_numpy():
    readout = MaxoutReadout(3, 7)
    readout.build(4, 5, 6)
    _random_assign(readout)
    rng = np.random.default_rng(2)
    s, ey, c = (rng.normal(size=(2, d)).astype("float32") for d in (4, 5, 6))
    got = readout(tf.constant(s), tf.constant(ey), tf.constant(c)).numpy()
    t_tilde = s @ readout.state_kernel.numpy() + ey @ readout.embedding_kernel.numpy() \
        + c @ readout.context_kernel.numpy() + readout.bias.numpy()
    t = np.maximum(t_tilde[:, 0::2], t_tilde[:, 1::2])  # max over pairs (2j-1, 2j)
    expected = t @ readout.output_kernel.numpy() + readout.output_bias.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # Sequences [B, T, ...] give the same numbers as steps [B, ...].
    seq = readout(tf.constant(s[:, None]), tf.constant(ey[:, None]), tf.constant(c[:, None])).numpy()
    np.testing.assert_allclose(seq[:, 0], got, rtol=1e-6)


def _model(arch, **extra):
    keras.utils.set_random_seed(3)
    model = TranslationModel(variant_config(f"{arch}50", {**DISTINCT_SIZES, **extra}))
    rng = np.random.default_rng(4)
    for w in model.weights:  # paper init is near-uniform; make the model opinionated
        w.assign(rng.normal(0, 0.4, w.shape).astype("float32"))
    return model


def test_initial_state_uses_backward_summary_for_search():
    model = _model("search")
    source = tf.constant([[4, 5, 6, 3]])
    annotations, mask, summary = model.encoder(source)
    n = DISTINCT_SIZES["hidden"]
    # h<-_1: the backward half of the first annotation.
    np.testing.assert_allclose(summary.numpy(), annotations.numpy()[:, 0, n:], rtol=1e-5, atol=1e-6)
    state, _ = model.encode(source)
    expected = np.tanh(summary.numpy() @ model.decoder.init_kernel.numpy() + model.decoder.init_bias.numpy())
    np.testing.assert_allclose(state.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_encdec_context_is_last_forward_state():
    model = _model("encdec")
    source = tf.constant([[4, 5, 6, 3, 0, 0]])
    annotations, _, summary = model.encoder(source)
    # h->_Tx: the forward state at the last real token, not after the padding.
    np.testing.assert_allclose(summary.numpy(), annotations.numpy()[:, 3], rtol=1e-5, atol=1e-6)
    _, memory = model.encode(source)
    # A search's memory holds the fixed context's two projections, C c and C_o c.
    decoder = model.decoder
    np.testing.assert_allclose(memory["context_projection"].numpy(),
                               summary.numpy() @ decoder.cell.context_kernel.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(memory["readout_context"].numpy(),
                               summary.numpy() @ decoder.readout.context_kernel.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_rows_are_sentence_major():
    """Hypothesis h of sentence b is row b*K + h: tile_rows writes the layout, rows_of
    names its rows, hypotheses_per_sentence reads K back from the row counts."""
    sentences = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    k = 4
    tiled = tile_rows(tf.constant(sentences), k)
    np.testing.assert_array_equal(tf.reshape(tiled, [3, k, 2]).numpy(),
                                  np.repeat(sentences[:, None], k, axis=1))
    assert int(hypotheses_per_sentence(tf.shape(tiled)[0], len(sentences))) == k
    rows = rows_of(tf.constant([[2], [0]]), tf.range(k)[None, :], k)
    np.testing.assert_array_equal(rows.numpy(), [8, 9, 10, 11, 0, 1, 2, 3])
    np.testing.assert_array_equal(tf.gather(tiled, rows).numpy(),
                                  np.repeat(sentences[[2, 0]], k, axis=0))


@pytest.mark.parametrize("arch", ["search", "encdec"])
def test_a_step_reads_each_sentences_memory_for_its_hypotheses(arch):
    """The search keeps one memory row per sentence and K hypotheses per sentence: a step
    over B*K rows equals each hypothesis stepped alone with its sentence's memory, and the
    search's memory weights C h_j and C_o h_j instead of projecting the context."""
    model = _model(arch)
    source = tf.constant([[4, 5, 6, 3], [7, 3, 0, 0]])
    state, memory = model.encode(source)
    k = 3
    rng = np.random.default_rng(0)
    states = tf.constant(rng.normal(0, 1, (2 * k, DISTINCT_SIZES["hidden"])).astype("float32"))
    previous = tf.constant([5, 9, 4, 8, 6, 2])
    logits, new_states, weights = model.step(previous, states, memory)
    assert logits.shape[0] == new_states.shape[0] == weights.shape[0] == 2 * k
    for row in range(2 * k):
        sentence = row // k
        alone = tf.nest.map_structure(lambda x: x[sentence : sentence + 1], memory)
        one_logits, one_state, one_weights = model.step(previous[row : row + 1], states[row : row + 1], alone)
        np.testing.assert_allclose(logits[row].numpy(), one_logits[0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_states[row].numpy(), one_state[0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights[row].numpy(), one_weights[0].numpy(), rtol=1e-5, atol=1e-6)
    if arch == "search":
        annotations, _, _ = model.encoder(source)
        kernel = np.concatenate([model.decoder.cell.context_kernel.numpy(),
                                 model.decoder.readout.context_kernel.numpy()], axis=1)
        np.testing.assert_allclose(memory["values"].numpy(), annotations.numpy() @ kernel,
                                   rtol=1e-5, atol=1e-5)
        assert not weights.numpy()[3:, 2:].any()  # the second sentence's padding


@pytest.mark.parametrize("arch", ["search", "encdec"])
def test_teacher_forcing_equals_stepwise_decoding(arch):
    model = _model(arch)
    source = tf.constant([[4, 5, 6, 3], [7, 3, 0, 0]])
    target_in = tf.constant([[2, 5, 9, 4], [2, 8, 0, 0]])
    logits, weights = model.forced(source, target_in)
    state, memory = model.encode(source)
    for i in range(4):
        step_logits, state, step_weights = model.step(target_in[:, i], state, memory)
        np.testing.assert_allclose(step_logits.numpy(), logits.numpy()[:, i], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(step_weights.numpy(), weights.numpy()[:, i], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("arch", ["search", "encdec"])
def test_padding_does_not_change_per_sentence_loss(arch):
    model = _model(arch)
    pairs = [([4, 5, 6, 7, 3], [2, 5, 9], [5, 9, 3]), ([8, 3], [2, 10, 11, 12, 4], [10, 11, 12, 4, 3])]
    alone = []
    for source, target_in, target_out in pairs:
        logits = model((tf.constant([source]), tf.constant([target_in])))
        alone.append(float(sentence_nll(logits, tf.constant([target_out]))[0]))

    def pad(rows, width):
        return tf.constant([row + [0] * (width - len(row)) for row in rows])

    sources, target_ins, target_outs = zip(*pairs)
    logits = model((pad(sources, 8), pad(target_ins, 7)))
    batched = sentence_nll(logits, pad(target_outs, 7)).numpy()
    np.testing.assert_allclose(batched, alone, rtol=1e-5)
    assert all(x > 0 for x in alone)


def test_paper_initialisation():
    keras.utils.set_random_seed(0)
    config = variant_config("search50", {"embedding": 64, "hidden": 48, "attention": 40, "maxout": 32,
                                         "src_vocab_size": 300, "tgt_vocab_size": 400})
    model = TranslationModel(config)
    by_name = {w.path.split("/", 1)[1]: w.numpy() for w in model.weights}
    n = 48
    for name in ("decoder/cell/recurrent_kernel", "encoder/forward_gru/gru_cell/recurrent_kernel",
                 "encoder/backward_gru/gru_cell/recurrent_kernel"):
        kernel = by_name[name]
        for block in range(3):
            q = kernel[:, block * n:(block + 1) * n]
            np.testing.assert_allclose(q.T @ q, np.eye(n), atol=1e-5)
    for name in ("decoder/attention/query_kernel", "decoder/attention/key_kernel"):
        assert by_name[name].std() == pytest.approx(0.001, rel=0.1)
    assert not by_name["decoder/attention/energy_kernel"].any()
    for name, value in by_name.items():
        if "bias" in name:
            assert not value.any(), name
    for name in ("decoder/readout/output_kernel", "decoder/cell/input_kernel",
                 "encoder/embedding/embeddings", "decoder/init_kernel"):
        assert by_name[name].std() == pytest.approx(0.01, rel=0.1), name


def test_uniform_initialisation_and_its_config():
    """init="uniform": every weight matrix U(-0.1, 0.1), recurrent ones included; v_a and
    the biases zero as in the paper's scheme; the layers' configs carry the scheme."""
    keras.utils.set_random_seed(0)
    config = variant_config("search50", {"embedding": 64, "hidden": 48, "attention": 40, "maxout": 32,
                                         "src_vocab_size": 300, "tgt_vocab_size": 400,
                                         "init": "uniform"})
    model = TranslationModel(config)
    by_name = {w.path.split("/", 1)[1]: w.numpy() for w in model.weights}
    matrices = [name for name, value in by_name.items()
                if "bias" not in name and name != "decoder/attention/energy_kernel"]
    assert "decoder/cell/recurrent_kernel" in matrices and "decoder/attention/key_kernel" in matrices
    for name in matrices:
        value = by_name[name]
        assert np.abs(value).max() <= 0.1, name
        # U(-a, a) has standard deviation a / sqrt(3).
        assert value.std() == pytest.approx(0.1 / math.sqrt(3), rel=0.1), name
    assert not by_name["decoder/attention/energy_kernel"].any()
    assert all(not value.any() for name, value in by_name.items() if "bias" in name)
    for layer in (model.encoder, model.decoder, model.decoder.cell, model.decoder.attention,
                  model.decoder.readout):
        assert layer.get_config()["init"] == "uniform"
    rebuilt = type(model.decoder.attention).from_config(model.decoder.attention.get_config())
    assert rebuilt.init == "uniform"
    with pytest.raises(ValueError, match="init must be one of paper, uniform"):
        AdditiveAttention(8, init="xavier")


def test_block_orthogonal_rejects_non_block_shapes():
    with pytest.raises(ValueError):
        BlockOrthogonal()((4, 6))


def _random_encoder(arch, reset_after, seed):
    """A tiny model whose encoder weights are large random values (no near-zero
    initialisation hiding a difference), a batch of three sentences of different
    lengths, and the random generator."""
    keras.utils.set_random_seed(seed)
    model = TranslationModel(variant_config(f"{arch}50", {**DISTINCT_SIZES, "reset_after": reset_after}))
    rng = np.random.default_rng(seed)
    for w in model.encoder.weights:
        w.assign(rng.normal(0, 0.4, w.shape).astype("float32"))
    source = tf.constant([[4, 5, 6, 7, 3], [8, 3, 0, 0, 0], [9, 10, 3, 0, 0]])
    return model, source, rng


@pytest.mark.parametrize("arch,reset_after", [("search", False), ("search", True), ("encdec", False)])
def test_encoder_equals_keras_gru_layers(arch, reset_after):
    # The encoder runs its directions in one fused loop over the Keras GRU layers'
    # weights; on the real positions it must give what those layers give themselves.
    model, source, rng = _random_encoder(arch, reset_after, seed=3)
    annotations, mask, summary = model.encoder(source)
    encoder = model.encoder
    embedded = encoder.embedding(source)
    forward, forward_last = encoder.forward_rnn(embedded, mask=mask)
    expected_summary = forward_last
    expected = [forward.numpy()]
    if arch == "search":
        # Keras's own backward GRU over the same weights.
        reference = keras.layers.GRU(encoder.units, return_sequences=True, return_state=True,
                                     go_backwards=True, reset_after=reset_after)
        reference.build((None, None, encoder.embedding_dim))
        reference.set_weights(encoder.backward_rnn.get_weights())
        backward, backward_last = reference(embedded, mask=mask)
        expected.append(backward.numpy()[:, ::-1])
        expected_summary = backward_last
    expected = np.concatenate(expected, axis=-1)
    real = mask.numpy()
    np.testing.assert_allclose(annotations.numpy()[real], expected[real], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary.numpy(), expected_summary.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch,reset_after", [("search", False), ("search", True), ("encdec", True)])
def test_encoder_recurrences_agree_with_gradients(arch, reset_after):
    """The fused CPU loop and the Keras GRU calls (cuDNN's path on a GPU), forced in
    turn on the same weights: the same annotations on real positions, the same summary,
    and the same gradients for every weight."""
    model, source, rng = _random_encoder(arch, reset_after, seed=5)
    probe = tf.constant(rng.normal(size=(3, 5, model.encoder.output_dim)).astype("float32"))
    results = {}
    for recurrence in ("fused", "keras"):
        model.encoder.recurrence = recurrence
        with tf.GradientTape() as tape:
            annotations, mask, summary = model.encoder(source)
            real = tf.cast(mask, tf.float32)[:, :, None]
            loss = tf.reduce_sum(annotations * probe * real) + tf.reduce_sum(summary ** 2)
        gradients = tape.gradient(loss, model.encoder.trainable_weights)
        results[recurrence] = (annotations.numpy()[mask.numpy()], summary.numpy(),
                               [g.numpy() if not isinstance(g, tf.IndexedSlices)
                                else tf.convert_to_tensor(g).numpy() for g in gradients])
    fused, via_keras = results["fused"], results["keras"]
    np.testing.assert_allclose(fused[0], via_keras[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused[1], via_keras[1], rtol=1e-5, atol=1e-6)
    for a, b in zip(fused[2], via_keras[2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_encoder_recurrence_by_device():
    from keras_nmt.layers.encoder import Encoder, default_recurrence

    assert default_recurrence() == ("keras" if tf.config.list_logical_devices("GPU") else "fused")
    with pytest.raises(ValueError, match="recurrence must be one of"):
        Encoder(10, 4, 4, recurrence="cudnn")
    assert Encoder(10, 4, 4, recurrence="keras").get_config()["recurrence"] == "keras"
