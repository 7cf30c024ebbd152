"""Times the f32 matrix-product libraries fluxion could call on the shapes it calls
(bench/gemm_candidates.cpp), at 1 and 2 threads, and prints one Markdown table per thread count:
GFLOP/s, by process CPU time over the threads at one thread (steady on a shared machine), by wall
time otherwise. OpenBLAS runs once per kernel (OPENBLAS_CORETYPE): the one fluxion picks from the
CPU's features and the generic one (Prescott) that OpenBLAS 0.3.21 falls back to on CPUs it does
not know.

usage: python3 bench/gemm_candidates.py [BUILD_DIR] [THREADS...]      (default build/release 1 2)
BLIS's column needs Debian's libblis4-openmp (apt-get install libblis4-openmp); without it, it is left out.
"""
import json
import os
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
threads = [int(t) for t in sys.argv[2:]] or [1, 2]
exe = os.path.join(build, "bin", "gemm_candidates")
cores = os.environ.get("GEMM_OPENBLAS_CORES", "Cooperlake,SkylakeX,Haswell,Prescott").split(",")
candidates = [("OpenBLAS " + c, "openblas", {"OPENBLAS_CORETYPE": c}) for c in cores]
candidates += [("BLIS", "blis", {}), ("oneDNN", "onednn", {})]

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
for t in threads:
    rows, names = {}, []
    for name, lib, env in candidates:
        r = subprocess.run([exe, lib], capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS=str(t), BLIS_NUM_THREADS=str(t), **env))
        if r.returncode != 0:
            print(f"({name}: {r.stderr.strip()})", file=sys.stderr)
            continue
        names.append(name)
        for line in r.stdout.splitlines():
            d = json.loads(line)
            rows.setdefault((d["use"], d["shape"]), {})[name] = d["cpu_gflops" if t == 1 else "wall_gflops"]
    print(f"\n{cpu}, {t} thread{'s' if t > 1 else ''}: GFLOP/s ({'CPU' if t == 1 else 'wall'} time)\n")
    print("| product | shape (m×n×k) | " + " | ".join(names) + " |")
    print("| --- | --- |" + " --- |" * len(names))
    for (use, shape), by in rows.items():
        best = max(by.values())
        cells = [(f"**{by[n]:.0f}**" if by[n] == best else f"{by[n]:.0f}") if n in by else "–" for n in names]
        print(f"| {use} | {shape} | " + " | ".join(cells) + " |")
