"""mode="reduce-overhead" on one GPU: small models where launches, not the GPU, set the
time. dynvm replays each variant as a CUDA graph; Inductor's reduce-overhead does the same
with its cudagraph trees. In one run: the GPT-2-style block of tests/models at batch 1,
sequence 32 (width 768), and a 3-layer MLP (width 512, batch 1), under no_grad, for eager,
`torch.compile(mode="reduce-overhead")` and dynvm (default mode and reduce-overhead).

"call µs" is the median wall time of one call followed by torch.cuda.synchronize() (end
to end, as a server answering one request sees it); "host µs" is the median wall time of
the call alone, the GPU idle before it (what the CPU spends per call on a cache hit), with
the same argument each call and the result dropped; "host µs, served" the same with a
new argument each call (one of 8 tensors in turn) and the previous result still held, as
a server's loop has it (dynvm then copies the argument in and the held result out).
"vs ind" is dynvm reduce-overhead's call time over Inductor reduce-overhead's.

    python bench/cuda_overhead_bench.py [--no-inductor] [--calls N]
"""

import os
import pathlib
import statistics
import sys
import tempfile
import time

import torch
from torch import nn

os.environ.setdefault("DYNVM_CACHE_DIR", tempfile.mkdtemp(prefix="dynvm-bench-cache-"))
# Inductor's caches too (FX graphs, Triton kernels): its cold compile is then cold, as
# ours is, even when an earlier run on the machine filled its default cache.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-cache-"))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-bench-cache-"))
import dynvm  # noqa: E402
from timing import cuda_cold_call  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from models import gpt2_block  # noqa: E402


def gpt2_block_b1():
    config = gpt2_block.GPT2Config(block_size=64, n_head=12, n_embd=768, dropout=0.0)
    model = gpt2_block.build_block(0, config).cuda().eval()
    return model, (torch.randn(1, 32, 768, device="cuda"),)


def mlp_b1():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 512)).cuda().eval()
    return model, (torch.randn(1, 512, device="cuda"),)


WORKLOADS = {"gpt2_block b1 s32": gpt2_block_b1, "mlp 3x512 b1": mlp_b1}


def per_call_us(fn, args, calls, synchronize):
    """Median microseconds of one call (and a synchronize after it when `synchronize`),
    the GPU idle before each call."""
    for _ in range(20):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args)
        if synchronize:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if not synchronize:
            torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def served_host_us(fn, args, calls):
    """Median microseconds of the call alone, with a different first argument each call
    (8 copies in turn) and the previous result held until the call returns."""
    pool = [args[0].clone() for _ in range(8)]
    rest = tuple(args[1:])
    held = fn(pool[0], *rest)
    for i in range(20):
        held = fn(pool[i % 8], *rest)
    torch.cuda.synchronize()
    times = []
    for i in range(calls):
        start = time.perf_counter()
        result = fn(pool[i % 8], *rest)
        times.append(time.perf_counter() - start)
        held = result  # noqa: F841 (the previous result lived through the call)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def main(argv):
    inductor = "--no-inductor" not in argv
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 500
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| workload | eager call µs | Inductor r-o call µs | dynvm default call µs | "
          "dynvm r-o call µs | vs eager | vs ind | dynvm r-o host µs | Inductor r-o host µs | "
          "dynvm r-o host µs, served | Inductor r-o host µs, served | "
          "dynvm cold s | Inductor cold s | max diff |")
    print("|" + "---|" * 14)
    for name, make in WORKLOADS.items():
        model, args = make()
        with torch.no_grad():
            expected = model(*args)
            dynvm.reset()
            dv = dynvm.compile(model, mode="reduce-overhead")
            _, dv_cold = cuda_cold_call(dv, args)  # trace, compile, run (recorded at call 2)
            dv_default = dynvm.compile(model)
            dv_default(*args)
            for _ in range(3):
                out = dv(*args)
            diff = (out - expected).abs().max().item()
            notes = [e["note"] for e in dynvm._native.core().run_report()["cuda_graphs"]]
            ind = None
            ind_cold = float("nan")
            if inductor:
                torch._dynamo.reset()
                ind = torch.compile(model, mode="reduce-overhead")
                _, ind_cold = cuda_cold_call(ind, args)
            eager_us = per_call_us(model, args, calls, True)
            default_us = per_call_us(dv_default, args, calls, True)
            dv_us = per_call_us(dv, args, calls, True)
            dv_host = per_call_us(dv, args, calls, False)
            dv_served = served_host_us(dv, args, calls)
            ind_us = ind_host = ind_served = float("nan")
            if ind is not None:
                ind_us = per_call_us(ind, args, calls, True)
                ind_host = per_call_us(ind, args, calls, False)
                ind_served = served_host_us(ind, args, calls)
        print(f"| {name} | {eager_us:.1f} | {ind_us:.1f} | {default_us:.1f} | {dv_us:.1f} | "
              f"{dv_us / eager_us:.2f} | {dv_us / ind_us:.2f} | {dv_host:.1f} | {ind_host:.1f} | "
              f"{dv_served:.1f} | {ind_served:.1f} | "
              f"{dv_cold:.2f} | {ind_cold:.2f} | {diff:.1e} |", flush=True)
        print(f"  dynvm CUDA graphs: {notes}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
