"""Runs fluxion's model benchmarks (bench/bench_models.cpp) and the same models in PyTorch and in JAX
(jit, bench/jax_models.py) on this machine, in one run, and prints the medians side by side as a
Markdown table, with the ratio reference time / fluxion time (above 1: fluxion is faster) against
the fastest reference found. Before the table it prints what each side ran on: fluxion's fx::info()
and each reference's BLAS, oneDNN and threads.

usage: python3 bench/compare.py [BUILD_DIR] [ROUNDS]        (default build/bench, 3 rounds)
       BENCH_DEVICES=CUDA BENCH_REPETITIONS=3 ...                 (one device; fewer repetitions)
       BENCH_BEFORE=OTHER_BUILD_DIR ...        (a second fluxion build, e.g. of an earlier commit,
                                                timed in the same rounds: a "before" column)
       BENCH_BEFORE_ENV="FLUXION_SGEMM=openblas" BENCH_BEFORE=BUILD_DIR ...
                                               (the before column with these variables set, e.g. the
                                                same build with another kernel choice)
       BENCH_CASES=unet_train,wide_bf16_train ...  (only these cases, eager and compiled, on every side)

PyTorch is taken from every interpreter that has it: Debian's /usr/bin/python3 and the first
python3 on PATH. Both sides use FLUXION_NUM_THREADS threads (default: every core).

The last column is each case's FLOP limit: the time its multiply-adds (MULTIPLY_ADDS; a training
step counts the forward pass three times, for the backward pass's two products per forward one)
take at the machine's matrix-product rate, measured in the same run (PyTorch's float32 2048^3
product at the same threads, the best of 10, in each round: the highest rate of the rounds, as each
time is its lowest). It says how far each side is from what the arithmetic alone needs.

Shared machines drift: the same binary's median moved by 2x within minutes on the 2-core machine
this was written on. So the programs take turns, ROUNDS times, and each case reports the lowest of
its medians: the time with the least interference, for fluxion and PyTorch alike.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap

# The devices to time, by fluxion's names (BENCH_DEVICES=CUDA on a GPU machine whose CPU was timed
# already); unset: every device bench_models finds, and the CPU and CUDA for the references.
DEVICES = os.environ.get("BENCH_DEVICES", "CPU,CUDA").split(",")
# bench_models runs with FLUXION_LD_LIBRARY_PATH as its library path where that is set (a bundle's
# libraries, scripts/gpu-check.sh), the reference interpreters with the caller's own, so that
# PyTorch finds the cuDNN and cuBLAS it was built with.
FLUXION_ENV = (dict(os.environ, LD_LIBRARY_PATH=os.environ["FLUXION_LD_LIBRARY_PATH"])
               if "FLUXION_LD_LIBRARY_PATH" in os.environ else None)
REFERENCE_ENV = None

# The same models and steps as bench_models.cpp, case by case. Eager PyTorch, as a user writes it.
TORCH = textwrap.dedent("""
    import json, os, statistics, sys, time, torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    torch.set_num_threads(int(sys.argv[1]))

    def mlp():
        return nn.Sequential(nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 1))

    def lenet5():
        return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                             nn.ReLU(), nn.Linear(84, 10))

    def wide():
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def convnet():
        block = lambda i, o: [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        return nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), nn.Flatten(), nn.Linear(2048, 10))

    class LastStep(nn.Module):  # lstm_train: the last step's hidden state, classified
        def __init__(self):
            super().__init__()
            self.lstm, self.head = nn.LSTM(28, 128, batch_first=True), nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.lstm(x)[0][:, -1])

    class Encoder(nn.Module):  # encoder_train: one encoder layer, the mean of its tokens classified
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.layer(x).mean(1))

    class UNet(nn.Module):  # unet_train: examples/unet_denoise's U-Net, width 16
        def __init__(self, w=16):
            super().__init__()
            block = lambda i, o: nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.GroupNorm(4, o), nn.ReLU())
            self.enc1, self.enc2, self.bottleneck = block(1, w), block(w, 2 * w), block(2 * w, 4 * w)
            self.dec2, self.dec1 = block(4 * w, 2 * w), block(2 * w, w)
            self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
            self.up1, self.head = nn.Conv2d(2 * w, w, 3, padding=1), nn.Conv2d(w, 1, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(F.max_pool2d(e1, 2))
            b = self.bottleneck(F.max_pool2d(e2, 2))
            d2 = self.dec2(torch.cat([self.up2(b), e2], 1))
            d1 = self.dec1(torch.cat([self.up1(F.interpolate(d2, scale_factor=2, mode="nearest")), e1], 1))
            return x - self.head(d1)

    class BasicBlock(nn.Module):  # torchvision's ResNet-18 block, for interpreters without torchvision
        def __init__(self, i, o, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(i, o, 3, stride, 1, bias=False), nn.BatchNorm2d(o)
            self.conv2, self.bn2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
            self.downsample = (nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o))
                               if stride != 1 or i != o else nn.Identity())

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + self.downsample(x))

    def resnet18_by_hand(num_classes=1000):
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        for i, o, stride in [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]:
            layers += [BasicBlock(i, o, stride), BasicBlock(o, o, 1)]
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))

    # torchvision's ResNet-18, as fx::models::resnet18 is; where torchvision is missing (pip's
    # PyTorch here, the GPU machine's), the same layers written out, so that no PyTorch lacks the case.
    try:
        from torchvision.models import resnet18
    except ImportError:
        resnet18 = resnet18_by_hand

    def forward(model, x):
        def run():
            with torch.no_grad():
                return model(x)
        return run

    # A step to be captured as a CUDA graph (graph=True) keeps its gradients between replays (the
    # graph writes them in place), steps Adam with capturable=True (its step count on the device) and
    # turns autocast's weight cache off: what capture requires.
    def train(model, x, y, loss, graph=False):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)
        def run():
            if not graph:
                opt.zero_grad(set_to_none=True)
            l = loss(model(x), y)
            l.backward()
            opt.step()
            return l
        return run

    def train_bf16(model, x, y, loss, dev, graph=False):
        # Mixed precision as PyTorch users write it: autocast runs convolutions and linear layers in
        # bf16 on f32 weights, the gradients and Adam stay f32.
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)
        def run():
            if not graph:
                opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev, dtype=torch.bfloat16, cache_enabled=not graph):
                l = loss(model(x), y)
            l.backward()
            opt.step()
            return l
        return run

    def cases(dev, graph=False):
        r = lambda *s: torch.randn(*s, device=dev)
        labels = lambda n: (torch.arange(n) % 10).to(dev)
        g = graph
        return {
            "mlp_forward": forward(mlp().to(dev), r(128, 100)),
            "mlp_train": train(mlp().to(dev), r(128, 100), r(128, 1), F.mse_loss, g),
            "lenet5_train": train(lenet5().to(dev), r(64, 1, 28, 28), labels(64), F.cross_entropy, g),
            "wide_train": train(wide().to(dev), r(256, 784), labels(256), F.cross_entropy, g),
            "convnet_train": train(convnet().to(dev), r(64, 3, 32, 32), labels(64), F.cross_entropy, g),
            "lstm_train": train(LastStep().to(dev), r(64, 28, 28), labels(64), F.cross_entropy, g),
            "encoder_train": train(Encoder().to(dev), r(64, 49, 64), labels(64), F.cross_entropy, g),
            "lenet5_bf16_train": train_bf16(lenet5().to(dev), r(64, 1, 28, 28), labels(64), F.cross_entropy, dev, g),
            "wide_bf16_train": train_bf16(wide().to(dev), r(256, 784), labels(256), F.cross_entropy, dev, g),
            "convnet_bf16_train": train_bf16(convnet().to(dev), r(64, 3, 32, 32), labels(64), F.cross_entropy, dev, g),
            "unet_train": train(UNet().to(dev), r(64, 1, 28, 28), r(64, 1, 28, 28), F.mse_loss, g),
            "resnet18_forward": forward(resnet18().to(dev).eval(), r(8, 3, 224, 224)),
            "resnet18_train": train(resnet18(num_classes=10).to(dev), r(32, 3, 64, 64), labels(32), F.cross_entropy, g),
        }

    def median_us(run, sync):
        t0 = time.perf_counter()
        n = 0
        while n < 10 or time.perf_counter() - t0 < 0.5:  # warm-up
            run(); sync(); n += 1
        per_batch = max(1, int(n / (time.perf_counter() - t0) * 0.2))  # batches of about 0.2 s
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            for _ in range(per_batch):
                run()
                sync()
            times.append((time.perf_counter() - t0) / per_batch)
        return statistics.median(times) * 1e6

    def graphed(run):
        # The step captured once as a CUDA graph and replayed (torch.cuda.graph, as PyTorch's
        # documentation captures a whole training step): warmed up on a side stream first.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        return graph.replay

    wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else ["cpu", "cuda"]
    ONLY = [c for c in os.environ.get("BENCH_CASES", "").split(",") if c]
    results = {"version": torch.__version__, "times": {}, "graph_times": {}}
    for dev in [d for d in ["cpu", "cuda"] if d in wanted and (d == "cpu" or torch.cuda.is_available())]:
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        for name, run in cases(dev).items():
            if ONLY and name not in ONLY:
                continue
            results["times"][name + "/" + ("CPU" if dev == "cpu" else "CUDA")] = median_us(run, sync)
    if "cuda" in wanted and torch.cuda.is_available():
        for name, run in cases("cuda", graph=True).items():
            if ONLY and name not in ONLY:
                continue
            try:
                results["graph_times"][name + "/CUDA"] = median_us(graphed(run), torch.cuda.synchronize)
            except Exception as e:  # a case capture refuses is left out, with the reason
                print(f"{name}: no CUDA graph: {e}", file=sys.stderr)
    print(json.dumps(results))
""")


# What each reference runs its products and convolutions with, printed before the table as fluxion's
# fx::info() is: PyTorch's build configuration and threads, and the kernel of any OpenBLAS the
# interpreter has loaded (Debian's PyTorch and NumPy use OpenBLAS, which runs its generic kernel on
# CPUs it does not know: issue 29).
OPENBLAS_CORE = textwrap.dedent("""
    def openblas_cores():
        import ctypes
        paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()})
        for path in paths:  # NumPy's wheels rename the symbol
            for symbol in ["openblas_get_corename", "scipy_openblas_get_corename64_"]:
                try:
                    name = getattr(ctypes.CDLL(path), symbol)
                except (OSError, AttributeError):
                    continue
                name.restype = ctypes.c_char_p
                print(f"OpenBLAS {path}: kernel {name().decode()}")
""")
TORCH_CONFIG = OPENBLAS_CORE + textwrap.dedent("""
    import sys, torch
    torch.set_num_threads(int(sys.argv[1]))
    print(torch.__config__.show().strip())
    print(torch.__config__.parallel_info().strip())
    torch.mm(torch.randn(64, 64), torch.randn(64, 64))  # loads the BLAS
    openblas_cores()
""")
JAX_CONFIG = OPENBLAS_CORE + textwrap.dedent("""
    import jax, numpy
    jax.print_environment_info()
    print("devices:", jax.devices())
    numpy.ones((64, 64)) @ numpy.ones((64, 64))
    openblas_cores()
""")


def configurations(build, pythons, jax_py, threads):
    """fluxion's fx::info() (bench_models prints it on stderr) and each reference's configuration."""
    exe = os.path.join(build, "bin", "bench_models")
    r = subprocess.run([exe, "--benchmark_list_tests=true"], capture_output=True, text=True, env=FLUXION_ENV)
    sections = [("fluxion (bench_models)", r.stderr.strip())]
    for py in pythons:
        r = subprocess.run([py, "-c", TORCH_CONFIG, str(threads)], capture_output=True, text=True, env=REFERENCE_ENV)
        sections.append((f"PyTorch ({py})", (r.stdout + r.stderr).strip()))
    if jax_py:
        r = subprocess.run([jax_py, "-c", JAX_CONFIG], capture_output=True, text=True, env=REFERENCE_ENV)
        sections.append((f"JAX ({jax_py})", (r.stdout + r.stderr).strip()))
    for name, text in sections:
        print(f"{name}:\n" + textwrap.indent(text, "    ") + "\n")


def resnet18_multiply_adds(size, classes):
    """One size × size image through torchvision's ResNet-18: its convolutions and fc."""
    s = size // 2  # conv1, 7×7 with stride 2
    total = 64 * 3 * 49 * s * s
    s //= 2  # the max pool
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for block in range(2):
            step = stride if block == 0 else 1
            s //= step
            total += (cin + cout) * cout * 9 * s * s  # two 3×3 convolutions
            total += cin * cout * s * s if step != 1 or cin != cout else 0  # the 1×1 downsample
            cin = cout
    return total + 512 * classes


def unet_multiply_adds(w, s):
    """One s × s image through examples/unet_denoise's U-Net of width w: its convolutions."""
    h, q = s // 2, s // 4
    encoder = w * 9 * s * s + 2 * w * w * 9 * h * h + 4 * w * 2 * w * 9 * q * q
    up2 = 4 * w * 2 * w * 4 * q * q  # ConvTranspose 2×2: every input pixel times the kernel
    decoder = 2 * w * 4 * w * 9 * h * h + w * 2 * w * 9 * s * s + w * 2 * w * 9 * s * s
    return encoder + up2 + decoder + w * s * s


# Multiply-adds of one forward call per case (weights x outputs; the attention's two batched
# products included), for the FLOP limit column.
MULTIPLY_ADDS = {
    "mlp": 128 * (100 * 200 + 200 * 1),
    "lenet5": 64 * (6 * 24 * 24 * 25 + 16 * 8 * 8 * 150 + 256 * 120 + 120 * 84 + 84 * 10),
    "wide": 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10),
    "convnet": 64 * (32 * 32 * 32 * 27 + 64 * 16 * 16 * 288 + 128 * 8 * 8 * 576 + 2048 * 10),
    "lstm": 64 * (28 * 4 * 128 * (28 + 128) + 128 * 10),
    "encoder": 64 * (49 * (4 * 64 * 64 + 2 * 64 * 128 + 2 * 49 * 64) + 64 * 10),
    "resnet18_forward": 8 * resnet18_multiply_adds(224, 1000),
    "resnet18_train": 32 * resnet18_multiply_adds(64, 10),
    "unet_train": 64 * unet_multiply_adds(16, 28),
}

PEAK = textwrap.dedent("""
    import sys, time, torch
    torch.set_num_threads(int(sys.argv[1]))
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    best = float("inf")
    for _ in range(10):
        t = time.perf_counter(); torch.mm(a, b); best = min(best, time.perf_counter() - t)
    print(2 * 2048 ** 3 / best / 1e9)
""")


def peak_gflops(py, threads):
    r = subprocess.run([py, "-c", PEAK, str(threads)], check=True, capture_output=True, text=True)
    return float(r.stdout)


def flop_limit(case, gflops):
    """µs that the case's multiply-adds take at `gflops`, or None for a case not in MULTIPLY_ADDS."""
    model = case.replace("_compiled", "").replace("_bf16", "").split("/")[0]
    model = model if model in MULTIPLY_ADDS else model.split("_")[0]
    if model not in MULTIPLY_ADDS:
        return None
    passes = 1 if "forward" in case else 3
    return 2 * MULTIPLY_ADDS[model] * passes / (gflops * 1e3)


def fluxion_times(build, extra_env=None):
    exe = os.path.join(build, "bin", "bench_models")
    if not os.path.exists(exe):
        sys.exit(f"{exe} is missing: build the target bench_models of {build} first")
    reps = os.environ.get("BENCH_REPETITIONS", "5")
    cases = [c for c in os.environ.get("BENCH_CASES", "").split(",") if c]
    only = ["--benchmark_filter=" + ("^(" + "|".join(cases) + ")(_compiled)?" if cases else "") + "/(" +
            "|".join(DEVICES) + ")"] if cases or "BENCH_DEVICES" in os.environ else []
    out = subprocess.run([exe, *only, "--benchmark_format=json", f"--benchmark_repetitions={reps}",
                          "--benchmark_report_aggregates_only=true"], check=True, capture_output=True, text=True,
                         env=dict(FLUXION_ENV or os.environ, **extra_env) if extra_env else FLUXION_ENV)
    times = {}
    if not out.stdout.strip():  # no case matched BENCH_DEVICES here
        return times
    for b in json.loads(out.stdout)["benchmarks"]:
        # One repetition has no aggregates: its single run is the median.
        if b.get("aggregate_name") == "median" or (reps == "1" and b.get("run_type") == "iteration"):
            unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
            times[b["run_name"].replace("/real_time", "")] = b["real_time"] * unit
    return times


def torch_interpreters():
    found = []
    for py in ["/usr/bin/python3", shutil.which("python3")]:
        if not py or any(os.path.realpath(py) == os.path.realpath(f) for f in found):
            continue
        r = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True)
        if r.returncode == 0:
            found.append(py)
        else:
            print(f"({py} has no PyTorch: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})",
                  file=sys.stderr)
    return found


def torch_times(py, threads):
    r = subprocess.run([py, "-c", TORCH, str(threads), ",".join(d.lower() for d in DEVICES)], capture_output=True,
                       text=True, env=REFERENCE_ENV)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:  # its column is left out; the rest of the table still comes
        print(f"({py}: the PyTorch cases failed, exit status {r.returncode})", file=sys.stderr)
        return None
    return json.loads(r.stdout)


def jax_interpreter():
    """The first python3 on PATH if it has JAX, else None (the JAX column is then left out)."""
    py = shutil.which("python3")
    if py and subprocess.run([py, "-c", "import jax"], capture_output=True).returncode == 0:
        return py
    print(f"({py} has no JAX: pip install 'jax[cpu]' adds its column)", file=sys.stderr)
    return None


def jax_times(py, threads):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_models.py")
    r = subprocess.run([py, script, str(threads), ",".join(DEVICES)], capture_output=True, text=True, env=REFERENCE_ENV)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        print(f"({py}: the JAX cases failed, exit status {r.returncode})", file=sys.stderr)
        return None
    return json.loads(r.stdout)


def lowest(a, b):
    """Per case, the lower of two {case: µs} maps."""
    return {k: min(v, b.get(k, v)) for k, v in a.items()} if a else dict(b)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/bench"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    threads = int(os.environ.get("FLUXION_NUM_THREADS", os.cpu_count()))
    os.environ["FLUXION_NUM_THREADS"] = str(threads)
    pythons = torch_interpreters()
    jax_py = jax_interpreter()
    configurations(build, pythons, jax_py, threads)
    before_build = os.environ.get("BENCH_BEFORE")
    before_env = dict(v.split("=", 1) for v in os.environ.get("BENCH_BEFORE_ENV", "").split())
    fx, before, torches, versions, jaxes = {}, {}, {py: {} for py in pythons}, {}, {}
    graphs = {py: {} for py in pythons}
    gflops = None
    for _ in range(rounds):
        fx = lowest(fx, fluxion_times(build))
        if before_build:
            before = lowest(before, fluxion_times(before_build, before_env))
        for py in pythons:
            t = torch_times(py, threads)
            if t is None:
                continue
            versions[py] = t["version"]
            torches[py] = lowest(torches[py], t["times"])
            graphs[py] = lowest(graphs[py], t["graph_times"])
        if jax_py:
            t = jax_times(jax_py, threads)
            if t is not None:
                versions["jax"] = t["version"]
                jaxes = lowest(jaxes, t["times"])
        # The rate too in every round: one measured in a slow minute made the limit a third lower.
        gflops = max([peak_gflops(py, threads) for py in pythons] + ([gflops] if gflops else []), default=None)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {threads} threads; "
          f"µs per call, the lowest median of {rounds} rounds"
          + (f"; float32 matrix products at {gflops:.0f} GFLOP/s, the best of the rounds" if gflops else "") + "\n")
    pythons = [py for py in pythons if py in versions]
    others = [(f"PyTorch {versions[py]}", torches[py]) for py in pythons]
    others += [(f"PyTorch {versions[py]} CUDA graph", graphs[py]) for py in pythons if graphs[py]]
    if "jax" in versions:
        others.append((f"JAX {versions['jax']} jit", jaxes))
    if before_build:
        print(f"before: {before_build} {os.environ.get('BENCH_BEFORE_ENV', '')}; after (the fluxion column): {build}\n")
    head = "| case | fluxion |" + (" before |" if before_build else "") + "".join(f" {name} |" for name, _ in others) + " ratio | FLOP limit |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for case, us in fx.items():
        same = case.replace("_compiled", "")  # a compiled fluxion step beside the same reference case
        cells = [f"{times[same]:.1f}" if same in times else "–" for _, times in others]
        best = min((times[same] for _, times in others if same in times), default=None)
        ratio = f"{best / us:.2f}×" if best else "–"
        limit = flop_limit(case, gflops) if gflops else None
        was = ([f"{before[case]:.1f}" if case in before else "–"] if before_build else [])
        print(f"| {case} | {us:.1f} | " + " | ".join(was + cells) + (" | " if was + cells else "") + f"{ratio} | "
              + (f"{limit:.0f}" if limit else "–") + " |")

if __name__ == "__main__":
    main()
