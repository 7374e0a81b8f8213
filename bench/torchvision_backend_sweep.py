"""Backend sweep: runs every torchvision classification model (random weights, eval mode,
batch 1, no grad) through dynvm.compile(backend="dynvm") four times: the first call traces
and compiles, the fourth runs through the variant's native function where it has one (at
most 512 guards) and from C++ otherwise. Each output is compared with eager's, relative to
its largest magnitude; prints the kernels compiled, the error, which path the fourth call
took, and the first call's, eager's and the fourth call's times (single calls: the fourth
includes compiling the native function). Not a test (the largest
models take minutes here); docs/status.md records the result.

    PYTHONPATH=build/python /usr/bin/python3 bench/torchvision_backend_sweep.py [name ...]
"""
import sys
import time
import warnings

import torch
import torchvision

import dynvm
from torchvision_sweep import classification_models

# Input sizes: the smallest each family accepts, to keep the sweep within minutes.
SIZES = {"inception_v3": 75, "googlenet": 64}
VIT_SIZE = 224  # ViT and Swin need their training resolution (patch grids are fixed)


def input_size(name):
    if name.startswith(("vit_", "swin_", "maxvit")):
        return VIT_SIZE
    return SIZES.get(name, 64)


def seconds(fn, x):
    start = time.perf_counter()
    out = fn(x)
    return out, time.perf_counter() - start


def main(names):
    warnings.filterwarnings("ignore")
    torch.set_grad_enabled(False)
    passed = 0
    for name in names:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        size = input_size(name)
        x = torch.randn(1, 3, size, size)
        dynvm.reset()
        try:
            expected, t_eager = seconds(model, x)
            compiled = dynvm.compile(model, backend="dynvm")
            errors = []
            times = []
            for _ in range(4):
                actual, t = seconds(compiled, x)
                times.append(t)
                scale = max(expected.abs().max().item(), 1.0)
                errors.append((actual - expected).abs().max().item() / scale)
        except Exception as e:  # a sweep reports and goes on
            print(f"{name:24s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        c = dynvm.counters
        native = c["glue_runs"] >= 1
        ok = max(errors) <= 1e-4 and c["graph_failures"] == 0 and native == (c["guard_glues"] > 0)
        passed += ok
        print(f"{name:24s} {'ok' if ok else 'MISMATCH':8s} {size:3d}px kernels {c['kernels']:3d} "
              f"err {max(errors):.1e} first {times[0] * 1e3:8.0f} ms eager {t_eager * 1e3:7.1f} ms "
              f"4th ({'glue' if native else 'C++ '}) {times[3] * 1e3:7.1f} ms "
              f"breaks {c['graph_breaks']} failures {c['graph_failures']}", flush=True)
    print(f"{passed} of {len(names)} models within 1e-4 of eager")


if __name__ == "__main__":
    main(sys.argv[1:] or classification_models())
