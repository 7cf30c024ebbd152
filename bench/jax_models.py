"""The models of bench/bench_models.cpp in JAX, each step compiled whole by jax.jit (XLA on the CPU, and on a CUDA GPU where JAX has one):
the reference for fluxion's compiled steps. Prints {"version": ..., "times": {case/CPU or case/CUDA: µs}} as JSON.

usage: python3 bench/jax_models.py THREADS [CPU,CUDA]      (run by bench/compare.py)

Plain JAX, no Flax or Optax: layers in PyTorch's layouts (Linear weight {out, in}, Conv OIHW,
NCHW images) and Adam written out, so that each step does the work of the PyTorch and fluxion ones.
"""
import json
import os
import statistics
import sys
import time

threads = int(sys.argv[1]) if len(sys.argv) > 1 else os.cpu_count()
# XLA's CPU backend uses every core; one thread is the only other count it takes (set before import).
if threads == 1:
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

key = jax.random.PRNGKey(0)


def normal(shape, scale):
    global key
    key, sub = jax.random.split(key)
    return jax.random.normal(sub, shape, jnp.float32) * scale


def dense_params(i, o):
    return {"w": normal((o, i), (2.0 / (i + o)) ** 0.5), "b": jnp.zeros((o,), jnp.float32)}


def conv_params(i, o, k):
    return {"w": normal((o, i, k, k), (2.0 / (i * k * k)) ** 0.5), "b": jnp.zeros((o,), jnp.float32)}


def dense(p, x):
    return x @ p["w"].T + p["b"]


def conv(p, x, pad):
    y = lax.conv_general_dilated(x, p["w"], (1, 1), [(pad, pad), (pad, pad)],
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + p["b"][None, :, None, None]


def maxpool2(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def mlp_init():
    return [dense_params(100, 200), dense_params(200, 1)]


def mlp(p, x):
    return dense(p[1], jax.nn.relu(dense(p[0], x)))


def lenet5_init():
    return [conv_params(1, 6, 5), conv_params(6, 16, 5), dense_params(256, 120), dense_params(120, 84),
            dense_params(84, 10)]


def lenet5(p, x):
    x = maxpool2(jax.nn.relu(conv(p[0], x, 0)))
    x = maxpool2(jax.nn.relu(conv(p[1], x, 0)))
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(dense(p[2], x))
    x = jax.nn.relu(dense(p[3], x))
    return dense(p[4], x)


def wide_init():
    return [dense_params(784, 1024), dense_params(1024, 1024), dense_params(1024, 10)]


def wide(p, x):
    return dense(p[2], jax.nn.relu(dense(p[1], jax.nn.relu(dense(p[0], x)))))


def convnet_init():
    return [conv_params(3, 32, 3), conv_params(32, 64, 3), conv_params(64, 128, 3), dense_params(2048, 10)]


def convnet(p, x):
    for layer in p[:3]:
        x = maxpool2(jax.nn.relu(conv(layer, x, 1)))
    return dense(p[3], x.reshape(x.shape[0], -1))


def lstm_init():
    # PyTorch's nn.LSTM layout: the gates i, f, g, o stacked in weight_ih {4H, F} and weight_hh {4H, H}.
    s = 128 ** -0.5
    return {"w_ih": normal((512, 28), s), "w_hh": normal((512, 128), s), "b": jnp.zeros((512,), jnp.float32),
            "head": dense_params(128, 10)}


def lstm(p, x):
    xs = jnp.swapaxes(x @ p["w_ih"].T + p["b"], 0, 1)  # every step's input projection at once, {T, N, 4H}

    def step(carry, xt):
        h, c = carry
        i, f, g, o = jnp.split(xt + h @ p["w_hh"].T, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), None

    zeros = jnp.zeros((x.shape[0], 128), jnp.float32)
    (h, _), _ = lax.scan(step, (zeros, zeros), xs)
    return dense(p["head"], h)


def norm_params(e):
    return {"g": jnp.ones((e,), jnp.float32), "b": jnp.zeros((e,), jnp.float32)}


def layernorm(p, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]


def encoder_init():
    return {"in_proj": dense_params(64, 192), "out_proj": dense_params(64, 64), "linear1": dense_params(64, 128),
            "linear2": dense_params(128, 64), "norm1": norm_params(64), "norm2": norm_params(64),
            "head": dense_params(64, 10)}


def encoder(p, x):
    # nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0, batch_first=True): post-norm, relu.
    n, length, e = x.shape
    heads = 4
    d = e // heads
    split = lambda t: t.reshape(n, length, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(t) for t in jnp.split(dense(p["in_proj"], x), 3, axis=-1))
    a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / d ** 0.5, axis=-1) @ v
    a = a.transpose(0, 2, 1, 3).reshape(n, length, e)
    x = layernorm(p["norm1"], x + dense(p["out_proj"], a))
    x = layernorm(p["norm2"], x + dense(p["linear2"], jax.nn.relu(dense(p["linear1"], x))))
    return dense(p["head"], x.mean(1))


# resnet18_forward and resnet18_train: torchvision's ResNet-18 (BasicBlocks, convolutions without
# bias, BatchNorm with eps 1e-5). Train mode normalises with the batch's statistics; the running
# statistics' update (a few vectors per layer) is left out, test mode reads them from the parameters.
RESNET18_STRIDES = [1, 1, 2, 1, 2, 1, 2, 1]  # each block's first stride, static for jit


def batchnorm_params(c):
    return {"g": jnp.ones((c,), jnp.float32), "b": jnp.zeros((c,), jnp.float32),
            "mean": jnp.zeros((c,), jnp.float32), "var": jnp.ones((c,), jnp.float32)}


def batchnorm(p, x, train):
    if train:
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    else:
        mean, var = p["mean"], p["var"]
    scale = p["g"] * lax.rsqrt(var + 1e-5)
    return x * scale[None, :, None, None] + (p["b"] - mean * scale)[None, :, None, None]


def conv_nobias(w, x, stride, pad):
    return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def resnet18_init(classes):
    weight = lambda o, i, k: normal((o, i, k, k), (2.0 / (o * k * k)) ** 0.5)  # noqa: E731 (kaiming, fan out)
    p = {"conv1": weight(64, 3, 7), "bn1": batchnorm_params(64), "blocks": [], "fc": dense_params(512, classes)}
    cin = 64
    for cout, stride in zip([64, 64, 128, 128, 256, 256, 512, 512], RESNET18_STRIDES):
        block = {"conv1": weight(cout, cin, 3), "bn1": batchnorm_params(cout), "conv2": weight(cout, cout, 3),
                 "bn2": batchnorm_params(cout)}
        if stride != 1 or cin != cout:
            block["down"], block["down_bn"] = weight(cout, cin, 1), batchnorm_params(cout)
        p["blocks"].append(block)
        cin = cout
    return p


def resnet18(train):
    def run(p, x):
        x = jax.nn.relu(batchnorm(p["bn1"], conv_nobias(p["conv1"], x, 2, 3), train))
        x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1)])
        for block, stride in zip(p["blocks"], RESNET18_STRIDES):
            y = jax.nn.relu(batchnorm(block["bn1"], conv_nobias(block["conv1"], x, stride, 1), train))
            y = batchnorm(block["bn2"], conv_nobias(block["conv2"], y, 1, 1), train)
            if "down" in block:
                x = batchnorm(block["down_bn"], conv_nobias(block["down"], x, stride, 0), train)
            x = jax.nn.relu(y + x)
        return dense(p["fc"], x.mean((2, 3)))
    return run


# unet_train: examples/unet_denoise's U-Net of width 16 (3×3 convolutions without bias, each followed
# by GroupNorm of 4 groups with eps 1e-5 and relu; ConvTranspose2d(k=2, stride=2) in PyTorch's
# {in, out, k, k} layout, nearest upsampling by 2; the skips concatenated on the channels).
def unet_init(w=16):
    block = lambda i, o: {"w": normal((o, i, 3, 3), (2.0 / (i * 9)) ** 0.5), **norm_params(o)}  # noqa: E731
    return {"enc1": block(1, w), "enc2": block(w, 2 * w), "bottleneck": block(2 * w, 4 * w),
            "dec2": block(4 * w, 2 * w), "dec1": block(2 * w, w),
            "up2": {"w": normal((4 * w, 2 * w, 2, 2), (2.0 / (4 * w * 4)) ** 0.5), "b": jnp.zeros((2 * w,))},
            "up1": conv_params(2 * w, w, 3), "head": conv_params(w, 1, 1)}


def unet_block(p, x):
    x = conv_nobias(p["w"], x, 1, 1)
    n, c, h, w = x.shape
    g = x.reshape(n, 4, c // 4, h, w)
    mu = g.mean((2, 3, 4), keepdims=True)
    var = ((g - mu) ** 2).mean((2, 3, 4), keepdims=True)
    x = ((g - mu) / jnp.sqrt(var + 1e-5)).reshape(n, c, h, w)
    return jax.nn.relu(x * p["g"][None, :, None, None] + p["b"][None, :, None, None])


def conv_transpose2(p, x):
    # The transpose of a stride-2 convolution: the input spread out by 2, padded by k - 1 and
    # convolved with the kernel flipped and its in/out swapped.
    w = jnp.flip(p["w"], (2, 3)).transpose(1, 0, 2, 3)
    y = lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)], lhs_dilation=(2, 2),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + p["b"][None, :, None, None]


def unet(p, x):
    e1 = unet_block(p["enc1"], x)
    e2 = unet_block(p["enc2"], maxpool2(e1))
    b = unet_block(p["bottleneck"], maxpool2(e2))
    d2 = unet_block(p["dec2"], jnp.concatenate([conv_transpose2(p["up2"], b), e2], 1))
    up = jnp.repeat(jnp.repeat(d2, 2, axis=2), 2, axis=3)
    d1 = unet_block(p["dec1"], jnp.concatenate([conv(p["up1"], up, 1), e1], 1))
    return x - conv(p["head"], d1, 0)


def in_bf16(model):
    """Mixed precision: the f32 parameters and input rounded to bf16 for the forward (and so the
    backward) pass; the gradients arrive in f32, for Adam on the f32 parameters."""
    def run(p, x):
        p16 = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), p)
        return model(p16, x.astype(jnp.bfloat16)).astype(jnp.float32)
    return run


def mse(out, y):
    return jnp.mean((out - y) ** 2)


def crossentropy(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def train(model, params, x, y, loss):
    """One jitted step: forward, loss, gradient and Adam (lr 1e-3), as the other frameworks do."""
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = [params, m, v, jnp.int32(0)]

    @jax.jit
    def step(p, m, v, t, x, y):
        l, g = jax.value_and_grad(lambda q: loss(model(q, x), y))(p)
        t = t + 1
        b1, b2, eta, eps = 0.9, 0.999, 1e-3, 1e-8
        m = jax.tree_util.tree_map(lambda a, b: b1 * a + (1 - b1) * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: b2 * a + (1 - b2) * b * b, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree_util.tree_map(lambda q, a, b: q - eta * (a / c1) / (jnp.sqrt(b / c2) + eps), p, m, v)
        return p, m, v, t, l

    def run():
        state[0], state[1], state[2], state[3], l = step(*state, x, y)
        return l
    return run


def forward(model, params, x):
    f = jax.jit(model)
    return lambda: f(params, x)


def median_us(run):
    t0 = time.perf_counter()
    n = 0
    while n < 10 or time.perf_counter() - t0 < 0.5:  # warm-up, compilation included
        run().block_until_ready()
        n += 1
    per_batch = max(1, int(n / (time.perf_counter() - t0) * 0.2))  # batches of about 0.2 s
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        for _ in range(per_batch):
            run().block_until_ready()
        times.append((time.perf_counter() - t0) / per_batch)
    return statistics.median(times) * 1e6


# BENCH_CASES=unet_train,wide_bf16_train (bench/compare.py): only these cases are timed.
ONLY = [c for c in os.environ.get("BENCH_CASES", "").split(",") if c]


def cases():
    r = normal
    labels = lambda n: jnp.arange(n) % 10  # noqa: E731
    return {
        "mlp_forward": forward(mlp, mlp_init(), r((128, 100), 1.0)),
        "mlp_train": train(mlp, mlp_init(), r((128, 100), 1.0), r((128, 1), 1.0), mse),
        "lenet5_train": train(lenet5, lenet5_init(), r((64, 1, 28, 28), 1.0), labels(64), crossentropy),
        "wide_train": train(wide, wide_init(), r((256, 784), 1.0), labels(256), crossentropy),
        "convnet_train": train(convnet, convnet_init(), r((64, 3, 32, 32), 1.0), labels(64), crossentropy),
        "lstm_train": train(lstm, lstm_init(), r((64, 28, 28), 1.0), labels(64), crossentropy),
        "encoder_train": train(encoder, encoder_init(), r((64, 49, 64), 1.0), labels(64), crossentropy),
        "lenet5_bf16_train": train(in_bf16(lenet5), lenet5_init(), r((64, 1, 28, 28), 1.0), labels(64), crossentropy),
        "wide_bf16_train": train(in_bf16(wide), wide_init(), r((256, 784), 1.0), labels(256), crossentropy),
        "convnet_bf16_train": train(in_bf16(convnet), convnet_init(), r((64, 3, 32, 32), 1.0), labels(64), crossentropy),
        "unet_train": train(unet, unet_init(), r((64, 1, 28, 28), 1.0), r((64, 1, 28, 28), 1.0), mse),
        "resnet18_forward": forward(resnet18(train=False), resnet18_init(1000), r((8, 3, 224, 224), 1.0)),
        "resnet18_train": train(resnet18(train=True), resnet18_init(10), r((32, 3, 64, 64), 1.0), labels(32),
                                crossentropy),
    }


def main():
    # The CPU, and a CUDA GPU where JAX has one (jax[cuda]): each case's arrays and step on that device.
    wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else ["CPU", "CUDA"]
    platforms = {"cpu": "CPU"} if "CPU" in wanted else {}
    try:
        if "CUDA" in wanted and jax.devices("gpu"):
            platforms["gpu"] = "CUDA"
    except RuntimeError:
        pass
    times = {}
    for platform, label in platforms.items():
        with jax.default_device(jax.devices(platform)[0]):
            for name, run in cases().items():
                if name in ONLY or not ONLY:
                    times[name + "/" + label] = median_us(run)
    print(json.dumps({"version": jax.__version__, "times": times}))


if __name__ == "__main__":
    main()
