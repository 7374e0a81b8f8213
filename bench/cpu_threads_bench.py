"""Backend "dynvm" kernels split across cores: the workloads of bench/cpu_backend_bench.py
with ATen's intra-op pool at one thread and at every core, eager and compiled in the same
run (torch.set_num_threads decides both: kernels split their parallel loop with ATen's
parallel_for).

    PYTHONPATH=build/python /usr/bin/python3 bench/cpu_threads_bench.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_backend_bench import (add_layer_norm, gelu_tanh, scaled_softmax,  # noqa: E402
                               seconds_per_call)

import dynvm  # noqa: E402


def main():
    torch.manual_seed(0)
    x = torch.randn(4 * 1024 * 1024)
    s = torch.randn(256, 1024)
    ln, r = torch.randn(1024, 1024), torch.randn(1024, 1024)
    w, b = torch.randn(1024), torch.randn(1024)
    workloads = (("gelu (tanh), 4M f32", gelu_tanh, (x,)),
                 ("softmax(x*0.125), 256x1024", scaled_softmax, (s,)),
                 ("layer_norm(x + r), 1024x1024", add_layer_norm, (ln, r, w, b)))
    cores = os.cpu_count() or 1
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        with torch.no_grad():
            for name, fn, args in workloads:
                compiled = dynvm.compile(fn)
                compiled(*args)
                eager = seconds_per_call(fn, args)
                kernel = seconds_per_call(compiled, args)
                print(f"threads={threads} {name:<30} eager {eager * 1e3:8.3f} ms   "
                      f"dynvm {kernel * 1e3:7.3f} ms   {eager / kernel:6.2f}x")


if __name__ == "__main__":
    main()
