"""Per-call cost of a compiled function on a tiny input: `(x + 1) * 2` on 16 float32
values, where Python and dispatch overhead dominate. In one run it measures

- eager PyTorch calling the Python function;
- the compiled function (a cache hit: the Python wrapper, the frame hook, the guards,
  running the graph and returning through the frame), and its native object without the
  Python wrapper;
- the same variant's graph run directly from C++ (its ATen ops, no hook and no guards),
  and its guards alone.

The cache-hit overhead is the native object's call minus the graph run directly.

    PYTHONPATH=build/python /usr/bin/python3 bench/call_overhead_bench.py
"""
import statistics
import time

import torch

import dynvm
from dynvm import _native


def add_then_double(x):
    return (x + 1) * 2


def microseconds_per_call(fn, x, calls=20000, repeats=5):
    for _ in range(1000):
        fn(x)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return min(samples)


def main():
    x = torch.randn(16)
    compiled = dynvm.compile(add_then_double, backend="eager")
    compiled(x)
    compiled(x)
    eager = microseconds_per_call(add_then_double, x)
    wrapped = microseconds_per_call(compiled, x)
    native = microseconds_per_call(compiled.native(), x)
    core = _native.core()
    guards, graph = [], []
    for _ in range(5):
        timing = core.time_cached_variant(add_then_double, (x,), "eager", 20000)
        guards.append(timing["guards_ns"] / 1000)
        graph.append(timing["run_ns"] / 1000)
    graph_us, guards_us = min(graph), min(guards)
    print(f"eager                              {eager:6.2f} us/call")
    print(f"dynvm.compile(backend='eager')     {wrapped:6.2f} us/call  ({wrapped / eager:.2f}x eager)")
    print(f"  its native object directly       {native:6.2f} us/call  ({native / eager:.2f}x eager)")
    print(f"  the variant's graph run directly {graph_us:6.2f} us/call (ATen ops + result)")
    print(f"  its guards alone                 {guards_us:6.2f} us/call")
    print(f"cache-hit overhead (native object - graph run directly): {native - graph_us:5.2f} us")
    print(f"  median of the graph runs: {statistics.median(graph):.2f} us")


if __name__ == "__main__":
    main()
