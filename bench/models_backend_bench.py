"""Every model of the VM issue under torch.no_grad(): eager PyTorch, backend "eager" (the
captured graph replayed op by op) and backend "dynvm" (fused CPU kernels + ATen for
convolutions and matmuls), in one run, with the largest difference from eager.

    PYTHONPATH=build/python:tests /usr/bin/python3 bench/models_backend_bench.py [names...]
"""
import sys

import torch

import dynvm
from models import registry
from timing import seconds_per_call


def seconds(fn, x, rounds=5):
    return seconds_per_call(fn, (x,), min_time=0, rounds=rounds, warmup=2)


def main():
    names = sys.argv[1:] or registry.ALL_NAMES
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; best of 5")
    print(f"{'model':18} {'eager':>9} {'dv-eager':>9} {'dynvm':>9} {'x eager':>8} "
          f"{'x dv-eager':>10} {'kernels':>8} {'max err':>9}")
    with torch.no_grad():
        for name in names:
            spec = registry.spec(name)
            model = spec.build()
            (x,) = spec.make_inputs(2, 0)
            dynvm.reset()
            via_eager = dynvm.compile(model, backend="eager")
            fused = dynvm.compile(model, backend="dynvm")
            expected = model(x)
            before = dynvm.counters["kernels"]
            err = (fused(x) - expected).abs().max().item()
            kernels = dynvm.counters["kernels"] - before
            t_eager = seconds(model, x)
            t_dv = seconds(via_eager, x)
            t_fused = seconds(fused, x)
            print(f"{name:18} {t_eager * 1e3:7.1f}ms {t_dv * 1e3:7.1f}ms {t_fused * 1e3:7.1f}ms "
                  f"{t_eager / t_fused:7.2f}x {t_dv / t_fused:9.2f}x {kernels:8d} {err:9.2e}")


if __name__ == "__main__":
    main()
