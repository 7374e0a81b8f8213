"""Per-call cost of a compiled function on a tiny input: `(x + 1) * 2` on 16 float32
values, where Python and dispatch overhead dominate. In one run it measures

- eager PyTorch calling the Python function;
- the compiled function (a cache hit: the Python wrapper, the frame hook, the guards,
  running the graph and returning through the frame), and its native object without the
  Python wrapper;
- the same variant's graph run directly from C++ (its ATen ops, no hook and no guards),
  and its guards alone;
- the same computation as an nn.Module: eager, `dynvm.compile(module)` as users call it,
  and the native object behind the wrapper. The wrapper's share is the difference: since
  its __call__ is dynvm._C.wrapper_call, a cache hit runs no Python frame of dynvm's own.

The cache-hit overhead is the native object's call minus the graph run directly.

    PYTHONPATH=build/python python bench/call_overhead_bench.py [--backend dynvm]
"""
import argparse
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


class AddThenDouble(torch.nn.Module):
    def forward(self, x):
        return (x + 1) * 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="eager", choices=("eager", "dynvm"))
    backend = parser.parse_args().backend
    x = torch.randn(16)
    compiled = dynvm.compile(add_then_double, backend=backend)
    compiled(x)
    compiled(x)
    eager = microseconds_per_call(add_then_double, x)
    wrapped = microseconds_per_call(compiled, x)
    native = microseconds_per_call(compiled.native(), x)
    core = _native.core()
    guards, graph = [], []
    for _ in range(5):
        timing = core.time_cached_variant(add_then_double, (x,), backend, 20000)
        guards.append(timing["guards_ns"] / 1000)
        graph.append(timing["run_ns"] / 1000)
    graph_us, guards_us = min(graph), min(guards)
    module = AddThenDouble()
    compiled_module = dynvm.compile(module, backend=backend)
    compiled_module(x)
    compiled_module(x)
    module_eager = microseconds_per_call(module, x)
    module_wrapped = microseconds_per_call(compiled_module, x)
    module_native = microseconds_per_call(compiled_module._compiled_call.native(), x)
    print(f"eager                              {eager:6.2f} us/call")
    print(f"dynvm.compile(backend={backend!r}){' ' * (8 - len(backend))}"
          f"{wrapped:6.2f} us/call  ({wrapped / eager:.2f}x eager)")
    print(f"  its native object directly       {native:6.2f} us/call  ({native / eager:.2f}x eager)")
    print(f"  the variant's graph run directly {graph_us:6.2f} us/call (ATen ops + result)")
    print(f"  its guards alone                 {guards_us:6.2f} us/call")
    print(f"cache-hit overhead (native object - graph run directly): {native - graph_us:5.2f} us")
    print(f"  median of the graph runs: {statistics.median(graph):.2f} us")
    print(f"eager nn.Module                    {module_eager:6.2f} us/call")
    print(f"dynvm.compile(module)              {module_wrapped:6.2f} us/call  "
          f"({module_wrapped / module_eager:.2f}x eager)")
    print(f"  its native object directly       {module_native:6.2f} us/call  "
          f"(the wrapper's share: {module_wrapped - module_native:5.2f} us)")


if __name__ == "__main__":
    main()
