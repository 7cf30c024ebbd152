"""Runs fluxion's benchmarks and the same models in PyTorch on this machine, in one run, and
prints the medians side by side with the ratio (PyTorch time / fluxion time: above 1 means
fluxion is faster).

usage: python3 bench/compare.py BUILD_DIR
PyTorch is taken from the interpreters that have it: Debian's /usr/bin/python3 and the first
python3 on PATH; the fastest one is the one compared against.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

TORCH_DENSE = textwrap.dedent("""
    import json, statistics, sys, time, torch
    torch.manual_seed(0)
    threads = int(sys.argv[1])
    torch.set_num_threads(threads)
    results = {"version": torch.__version__}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        m = torch.nn.Sequential(torch.nn.Linear(100, 200), torch.nn.ReLU(), torch.nn.Linear(200, 1)).to(dev)
        x = torch.randn(128, 100, device=dev)
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        with torch.no_grad():
            for _ in range(200):
                m(x)
            sync()
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                for _ in range(200):
                    m(x)
                sync()
                times.append((time.perf_counter() - t0) / 200)
        results[dev] = statistics.median(times) * 1e6
    print(json.dumps(results))
""")


def fluxion_times(build):
    exe = os.path.join(build, "bin", "bench_dense")
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_repetitions=10",
                          "--benchmark_report_aggregates_only=true"], check=True, capture_output=True, text=True)
    times = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
            times[b["run_name"].split("/")[1].replace("_real_time", "")] = b["real_time"] * unit
    return times


def torch_times(threads):
    found = []
    for py in ["/usr/bin/python3", shutil.which("python3")]:
        if not py or any(py == f[0] for f in found):
            continue
        r = subprocess.run([py, "-c", TORCH_DENSE, str(threads)], capture_output=True, text=True)
        if r.returncode == 0:
            found.append((py, json.loads(r.stdout)))
    return found


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/bench"
    threads = int(os.environ.get("FLUXION_NUM_THREADS", os.cpu_count()))
    fx = fluxion_times(build)
    torches = torch_times(threads)
    print(f"Dense 100 => 200 (relu) => 1, forward, batch 128, median µs ({threads} threads)")
    for dev_fx, dev_torch in [("CPU", "cpu"), ("CUDA", "cuda")]:
        if dev_fx not in fx:
            continue
        line = f"  {dev_fx:5s} fluxion {fx[dev_fx]:8.1f}"
        best = min((t for t in torches if dev_torch in t[1]), key=lambda t: t[1][dev_torch], default=None)
        for py, t in torches:
            if dev_torch in t:
                line += f" | PyTorch {t['version']} ({py}) {t[dev_torch]:8.1f}"
        if best:
            line += f" | ratio {best[1][dev_torch] / fx[dev_fx]:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
