#!/usr/bin/env python3
"""Build the small converter-output test models of `testdata/converter/`.

Each model is a few layers of a real architecture, converted with TensorFlow's own converter the way
a user would (float32, int8 with a representative dataset, dynamic range = `Optimize.DEFAULT`
without a dataset), sized so a test invokes it in milliseconds (each file well under 200 KB).
Weights are random (seeded). Usage:
    python tools/make_test_models.py OUT_DIR [NAME...]
Needs tensorflow-cpu (tested with 2.21.0) and, for `hybrid_lstm_dynamic`, tf_keras 2.21. Then, per model, the reference facts:
    python ../shared/tools/model_facts.py OUT_DIR/NAME.tflite --out REF_DIR
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

keras = tf.keras
L = keras.layers


def rep_data(shape, n=16, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(1)

    def gen():
        for _ in range(n):
            yield [rng.uniform(lo, hi, size=shape).astype(np.float32)]

    return gen


def convert(model, mode, in_shape):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if mode == "dynamic_per_tensor":
        # Dynamic range with one scale per weight tensor (symmetric input quantization in
        # LiteRT's hybrid CONV_2D).
        conv._experimental_disable_per_channel = True
        mode = "dynamic"
    if mode == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep_data((1,) + tuple(in_shape))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif mode == "dynamic":
        # Dynamic range: int8 weights, float activations (hybrid kernels at run time).
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif mode == "f32_dus":
        # Tensor-list writes as DYNAMIC_UPDATE_SLICE instead of SLICE + CONCATENATION.
        conv._experimental_enable_dynamic_update_slice = True
    elif mode != "f32":
        raise ValueError(mode)
    return conv.convert()


def transformer_block():
    """One pre-norm encoder block: LayerNorm (mean, squared difference, rsqrt), multi-head
    attention (BATCH_MATMUL of queries by keys and of weights by values), a GELU MLP."""
    seq, dim, heads = 16, 32, 2
    inp = keras.Input((seq, dim), batch_size=1)
    h = L.LayerNormalization(epsilon=1e-5)(inp)
    h = L.MultiHeadAttention(num_heads=heads, key_dim=dim // heads)(h, h)
    x = L.Add()([inp, h])
    h = L.LayerNormalization(epsilon=1e-5)(x)
    h = L.Dense(dim * 2, activation="gelu")(h)
    h = L.Dense(dim)(h)
    out = L.Add()([x, h])
    return keras.Model(inp, out), (seq, dim)


def attention_ops():
    """The int8 arithmetic of attention and LayerNorm without the rest of the block: query by key
    products (BATCH_MATMUL, adj_y), a weights-by-values product (BATCH_MATMUL), and the squared
    difference of each row from its mean (SQUARED_DIFFERENCE broadcast over the last axis)."""
    seq, dim = 8, 16
    inp = keras.Input((seq, dim), batch_size=1)
    q = L.Dense(dim)(inp)
    k = L.Dense(dim)(inp)
    v = L.Dense(dim)(inp)
    s = L.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True))([q, k])
    a = L.Lambda(lambda t: tf.matmul(t[0], t[1]))([s, v])
    d = L.Lambda(
        lambda t: tf.math.squared_difference(t, tf.reduce_mean(t, axis=-1, keepdims=True))
    )(q)
    out = L.Concatenate()([s, a, d])
    return keras.Model(inp, out), (seq, dim)


def convnext_block():
    """A ConvNeXt block (7x7 depthwise, LayerNorm, pointwise MLP, layer scale, residual) with an
    unknown batch dimension, then a flatten whose target shape is computed at run time
    (SHAPE, STRIDED_SLICE, REDUCE_PROD, PACK)."""
    c = 16
    inp = keras.Input((8, 8, c))
    h = L.DepthwiseConv2D(7, padding="same")(inp)
    h = L.LayerNormalization(epsilon=1e-6)(h)
    h = L.Dense(4 * c, activation="gelu")(h)
    h = L.Dense(c)(h)
    h = L.Lambda(lambda t: t * 0.5)(h)
    x = L.Add()([inp, h])

    def flatten(t):
        s = tf.shape(t)
        return tf.reshape(t, tf.stack([s[0], tf.reduce_prod(s[1:])]))

    x = L.Lambda(flatten, output_shape=(8 * 8 * c,))(x)
    out = L.Dense(10)(x)
    return keras.Model(inp, out), (8, 8, c)


def unet_decoder():
    """One U-Net decoder step: a stride-2 transposed convolution upsamples the bottleneck,
    concatenated with the skip connection, then two 3x3 convolutions."""
    inp = keras.Input((16, 16, 4), batch_size=1)
    e = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    b = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(e)
    u = L.Conv2DTranspose(8, 3, strides=2, padding="same")(b)
    d = L.Concatenate()([u, e])
    d = L.Conv2D(8, 3, padding="same", activation="relu")(d)
    out = L.Conv2D(2, 1)(d)
    return keras.Model(inp, out), (16, 16, 4)


def hybrid_cnn():
    """A CNN with a dense head, sized so every weight tensor has at least 1024 elements (the
    converter's threshold for quantizing a weight in dynamic-range mode): CONV_2D,
    DEPTHWISE_CONV_2D and FULLY_CONNECTED with float inputs and int8 weights."""
    inp = keras.Input((12, 12, 8), batch_size=1)
    x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(inp)
    x = L.DepthwiseConv2D(3, padding="same", depth_multiplier=4, activation="relu")(x)
    x = L.Conv2D(32, 1, activation="relu6")(x)
    x = L.Flatten()(x)
    x = L.Dense(64, activation="relu")(x)
    out = L.Dense(16)(x)
    return keras.Model(inp, out), (12, 12, 8)


def hybrid_mlp():
    """A two-layer MLP over a sequence (Dense on a [1, 8, 48] input: FULLY_CONNECTED with
    keep_num_dims, eight rows each quantized on its own, asymmetric inputs)."""
    inp = keras.Input((8, 48), batch_size=1)
    x = L.Dense(64, activation="relu")(inp)
    out = L.Dense(32)(x)
    return keras.Model(inp, out), (8, 48)


def hybrid_mobilenet():
    """A MobileNetV2-like inverted residual block on a batch of two images (each quantized on
    its own): 3x3 stride-2 stem, 1x1 expansion, 3x3 depthwise (stride 1, then stride 2 with
    dilation-free VALID padding), 1x1 projection, residual add, global pooling and a dense
    head."""
    inp = keras.Input((16, 16, 8), batch_size=2)
    x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu6")(inp)
    h = L.Conv2D(128, 1, activation="relu6")(x)
    h = L.DepthwiseConv2D(3, padding="same", activation="relu6")(h)
    h = L.Conv2D(32, 1)(h)
    x = L.Add()([x, h])
    h = L.Conv2D(128, 1, activation="relu6")(x)
    h = L.DepthwiseConv2D(3, strides=2, padding="valid", activation="relu6")(h)
    h = L.Conv2D(48, 1)(h)
    x = L.GlobalAveragePooling2D()(h)
    out = L.Dense(24)(x)
    return keras.Model(inp, out), (16, 16, 8)


def hybrid_conv_per_tensor():
    """Convolutions and a dense layer with one weight scale per tensor (the converter's
    per-channel quantization disabled): LiteRT's symmetric hybrid CONV_2D path."""
    inp = keras.Input((10, 10, 8), batch_size=1)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(inp)
    x = L.Conv2D(16, 3, strides=2, dilation_rate=1, padding="valid")(x)
    x = L.Conv2D(32, 3, dilation_rate=2, padding="same", activation="relu")(x)
    x = L.Flatten()(x)
    out = L.Dense(16)(x)
    return keras.Model(inp, out), (10, 10, 8)


def hybrid_attention():
    """Per-head projections as batched products with constant weights (BATCH_MATMUL, float
    activations by int8 weights: one weight matrix per head, and a shared one broadcast over
    the heads with adj_y), then the float attention products, broadcast over the heads."""
    seq, dim, heads, hd = 8, 32, 2, 32
    rng = np.random.default_rng(5)
    wq = tf.constant(rng.normal(0, 0.2, (heads, dim, hd)).astype(np.float32))
    wk = tf.constant(rng.normal(0, 0.2, (1, hd, dim)).astype(np.float32))
    inp = keras.Input((seq, dim), batch_size=1)

    def attend(t):
        x = tf.reshape(t, [1, 1, seq, dim])
        q = tf.matmul(x, wq)  # constant per-head weights, lhs broadcast over the heads
        k = tf.matmul(x, wk, transpose_b=True)  # shared weights, adj_y
        s = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / 8.0)
        return tf.reshape(tf.matmul(s, q), [1, heads * seq, hd])

    out = L.Lambda(attend, output_shape=(heads * seq, hd))(inp)
    return keras.Model(inp, out), (seq, dim)


def densenet_grouped():
    """A DenseNet block (BatchNorm-ReLU-Conv on the running concatenation, so the BatchNorm cannot
    fold into a preceding convolution and stays a broadcast MUL and ADD per channel) followed by a
    RegNet-style grouped 3x3 convolution (groups = 4)."""
    inp = keras.Input((12, 12, 16), batch_size=1)
    x = inp
    for _ in range(3):
        h = L.BatchNormalization()(x)
        h = L.ReLU()(h)
        h = L.Conv2D(16, 1, use_bias=False)(h)
        h = L.BatchNormalization()(h)
        h = L.ReLU()(h)
        h = L.Conv2D(8, 3, padding="same", use_bias=False)(h)
        x = L.Concatenate()([x, h])
    x = L.BatchNormalization()(x)
    x = L.Conv2D(40, 3, padding="same", groups=4, activation="relu")(x)
    out = L.Conv2D(8, 1)(x)
    return keras.Model(inp, out), (12, 12, 16)


def regnet_grouped():
    """A RegNet-style block quantized to int8: grouped 3x3 convolutions (groups = 4 with stride
    2, groups = 8 with stride 1), a grouped pointwise convolution (groups = 2) and a strided
    shortcut added back."""
    inp = keras.Input((12, 12, 16), batch_size=1)
    x = L.Conv2D(32, 1, activation="relu")(inp)
    h = L.Conv2D(32, 3, strides=2, padding="same", groups=4, activation="relu")(x)
    h = L.Conv2D(48, 3, padding="same", groups=8, activation="relu")(h)
    h = L.Conv2D(32, 1, groups=2)(h)
    s = L.Conv2D(32, 1, strides=2)(x)
    x = L.ReLU()(L.Add()([h, s]))
    out = L.Conv2D(8, 1)(x)
    return keras.Model(inp, out), (12, 12, 16)


def gru_while():
    """A GRU over a 6-step sequence that the converter keeps as a loop (`unroll=False`): a WHILE
    whose condition subgraph compares the step counters (LESS, LOGICAL_AND) and whose body runs
    one GRU step (FULLY_CONNECTED, SPLIT, LOGISTIC, TANH, GATHER of the step's input), then a
    dense head on the last state."""
    inp = keras.Input((6, 4), batch_size=1)
    h = L.GRU(8, unroll=False)(inp)
    out = L.Dense(3)(h)
    return keras.Model(inp, out), (6, 4)


def rnn_sequences():
    """Keras 3 recurrent layers returning every step (`return_sequences=True`, `unroll=False`):
    an LSTM then a GRU over two sequences of 6 steps, then a dense head on every step. Each layer
    is a WHILE whose body writes its step's state into a list tensor (`TensorListSetItem`),
    which the converter lowers to two SLICEs of changing shape and a CONCATENATION (or, for
    `rnn_sequences_dus_f32`, to DYNAMIC_UPDATE_SLICE)."""
    inp = keras.Input((6, 5), batch_size=2)
    h = L.LSTM(12, return_sequences=True, unroll=False)(inp)
    h = L.GRU(8, return_sequences=True, unroll=False)(h)
    out = L.Dense(3)(h)
    return keras.Model(inp, out), (6, 5)


def gru_stateful():
    """A Keras 3 GRU with `stateful=True`: its state is a resource variable (VAR_HANDLE,
    READ_VARIABLE before the loop, ASSIGN_VARIABLE after it) that a CALL_ONCE init subgraph
    zeroes at the first invoke, so each invoke continues from the last one's state; then a
    dense head on the last state. `tools/invoke_sequence.py` records LiteRT's outputs of
    consecutive invokes."""
    inp = keras.Input((3, 4), batch_size=1)
    h = L.GRU(8, stateful=True, unroll=False)(inp)
    out = L.Dense(3)(h)
    return keras.Model(inp, out), (3, 4)


def hybrid_lstm():
    """An LSTM fused into one UNIDIRECTIONAL_SEQUENCE_LSTM, converted with dynamic range: float
    input, state and output, int8 weights with one scale per gate matrix (LiteRT's hybrid LSTM),
    over two sequences of 8 steps, then a dense head on every step. Keras 2 (`tf_keras`) marks its
    LSTM for the converter's fusion; Keras 3 layers become WHILE loops (as `hybrid_gru_dynamic`).
    32 units over 32 features, so each of the 8 gate matrices has 1024 elements (the converter
    leaves smaller ones in float)."""
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    inp = tf_keras.Input((8, 32), batch_size=2)
    h = tf_keras.layers.LSTM(32, return_sequences=True)(inp)
    out = tf_keras.layers.Dense(4)(h)
    return tf_keras.Model(inp, out), (8, 32)


def hybrid_gru():
    """A Keras GRU kept as a loop (`unroll=False`), converted with dynamic range: the WHILE
    body's FULLY_CONNECTED products of the step input and of the state are hybrid (int8 weights,
    float activations), then a dense head on the last state."""
    inp = keras.Input((6, 32), batch_size=1)
    h = L.GRU(32, unroll=False)(inp)
    out = L.Dense(3)(h)
    return keras.Model(inp, out), (6, 32)


def cond_if():
    """A data-dependent branch (`tf.cond` on the sign of the input's sum: IF with two branch
    subgraphs, one scaling by a captured constant vector (passed into the branch as an IF input)
    with TANH, the other RELU and SUB), then a dense layer after the IF."""
    rng = np.random.default_rng(7)
    w = tf.constant(rng.normal(0, 0.5, (1, 8)).astype(np.float32))
    inp = keras.Input((8,), batch_size=1)

    def branch(t):
        return tf.cond(
            tf.reduce_sum(t) > 0.0,
            lambda: tf.tanh(t * w) * 2.0,
            lambda: tf.nn.relu(t) - 3.0,
        )

    h = L.Lambda(branch, output_shape=(8,))(inp)
    out = L.Dense(4)(h)
    return keras.Model(inp, out), (8,)


def while_data_dependent():
    """A loop whose trip count depends on the data (`tf.while_loop`: halve and shift the state
    until its largest magnitude falls below 0.1, at most 12 times): WHILE whose condition reads
    the state (REDUCE_MAX of ABS, LESS/GREATER, LOGICAL_AND), with the counter carried too."""
    inp = keras.Input((8,), batch_size=1)

    def loop(t):
        def cond(i, x):
            return tf.logical_and(i < 12, tf.reduce_max(tf.abs(x)) > 0.1)

        def body(i, x):
            return i + 1, x * 0.5 + 0.01

        i, x = tf.while_loop(cond, body, (tf.constant(0), t))
        return x * tf.cast(i, tf.float32)

    out = L.Lambda(loop, output_shape=(8,))(inp)
    return keras.Model(inp, out), (8,)


def randomize_batchnorm(model, rng):
    """Non-trivial BatchNorm statistics, so the unfolded MUL and ADD are not identities."""
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([
                rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                rng.uniform(-0.5, 0.5, beta.shape).astype(np.float32),
                rng.uniform(-0.2, 0.2, mean.shape).astype(np.float32),
                rng.uniform(0.5, 2.0, var.shape).astype(np.float32),
            ])


MODELS = {
    "transformer_block_int8": (transformer_block, "int8"),
    "attention_ops_int8": (attention_ops, "int8"),
    "convnext_block_f32": (convnext_block, "f32"),
    "unet_decoder_int8": (unet_decoder, "int8"),
    "hybrid_cnn_dynamic": (hybrid_cnn, "dynamic"),
    "densenet_grouped_f32": (densenet_grouped, "f32"),
    "hybrid_mlp_dynamic": (hybrid_mlp, "dynamic"),
    "hybrid_mobilenet_dynamic": (hybrid_mobilenet, "dynamic"),
    "hybrid_conv_per_tensor_dynamic": (hybrid_conv_per_tensor, "dynamic_per_tensor"),
    "hybrid_attention_dynamic": (hybrid_attention, "dynamic"),
    "regnet_grouped_int8": (regnet_grouped, "int8"),
    "gru_while_f32": (gru_while, "f32"),
    "cond_if_f32": (cond_if, "f32"),
    "while_data_dependent_f32": (while_data_dependent, "f32"),
    "hybrid_lstm_dynamic": (hybrid_lstm, "dynamic"),
    "rnn_sequences_f32": (rnn_sequences, "f32"),
    "gru_stateful_f32": (gru_stateful, "f32"),
    "rnn_sequences_dus_f32": (rnn_sequences, "f32_dus"),
    "hybrid_gru_dynamic": (hybrid_gru, "dynamic"),
}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    for name in names:
        build, mode = MODELS[name]
        keras.utils.set_random_seed(0)
        model, in_shape = build()
        randomize_batchnorm(model, np.random.default_rng(3))
        data = convert(model, mode, in_shape)
        path = os.path.join(out, name + ".tflite")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{name}: {len(data):,} bytes")


if __name__ == "__main__":
    main()
