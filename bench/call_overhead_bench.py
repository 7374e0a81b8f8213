"""Per-call cost of a compiled function on a tiny input, against eager PyTorch in the same
run: `(x + 1) * 2` on 16 float32 values, where Python and dispatch overhead dominate.

    PYTHONPATH=build/python /usr/bin/python3 bench/call_overhead_bench.py
"""
import time

import torch

import dynvm


def add_then_double(x):
    return (x + 1) * 2


def microseconds_per_call(fn, x, calls=20000):
    for _ in range(1000):
        fn(x)
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls * 1e6


def main():
    x = torch.randn(16)
    compiled = dynvm.compile(add_then_double, backend="eager")
    compiled(x)
    eager = microseconds_per_call(add_then_double, x)
    wrapped = microseconds_per_call(compiled, x)
    native = microseconds_per_call(compiled.native(), x)
    print(f"eager                          {eager:6.2f} us/call")
    print(f"dynvm.compile(backend='eager') {wrapped:6.2f} us/call  ({wrapped / eager:.2f}x eager)")
    print(f"  its native object directly   {native:6.2f} us/call  ({native / eager:.2f}x eager)")


if __name__ == "__main__":
    main()
