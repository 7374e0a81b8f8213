"""Backend "dynvm" (fused CPU kernels through LLVM) against eager PyTorch, TorchScript
(torch.jit.script), backend "eager" (the captured graph replayed op by op) and the peer,
`torch.compile` (Dynamo + Inductor's CPU backend, default mode), in one run, on the
workloads of the code-generation issue:

- gelu written out with tanh on 4M float32 values;
- softmax(x * 0.125, -1) on 256x1024;
- layer_norm(x + r) on 1024x1024;
- (x + 1) * 2 on 16 values (per-call cost);
- two fused groups around a cumsum (ATen) on 4M float32 values: the first group's 16 MB
  result is an intermediate in planned memory, reused across calls.

torch.set_num_threads(1) before anything is compiled: eager, dynvm's kernels and
Inductor's kernels (whose OpenMP thread count is fixed when they are generated) all run on
one thread. Each figure is the best of 3 passes that time every side in turn, each pass
the best of 5 timed loops (bench/timing.py's interleaved_best), in milliseconds or
microseconds per call, under torch.no_grad(). "dv/eager" and "dv/ind" are
time ratios (dynvm's time over eager's or Inductor's: below 1 means dynvm is faster);
"target" is the issue's bound on dv/ind and whether this run meets it. Both compiled
results are compared with eager's (largest absolute difference).

    PYTHONPATH=build/python python bench/cpu_backend_bench.py [--no-inductor]
"""

import sys
import warnings

import torch
import torch.nn.functional as F

import dynvm
from timing import interleaved_best, seconds_per_call

THREADS = 1
REPEATS = 3


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def scaled_softmax(x):
    return torch.softmax(x * 0.125, -1)


def add_layer_norm(x, r, w, b):
    return F.layer_norm(x + r, (x.shape[-1],), w, b)


def add_then_double(x):
    return (x + 1) * 2


def groups_around_cumsum(x):
    h = torch.tanh(x) * 0.5 + x
    c = torch.cumsum(h, -1)
    return torch.sigmoid(c) * h


def max_error(got, expected):
    return (got - expected).abs().max().item()


def main(with_inductor=True):
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated")
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    # (name, function, arguments, scale, unit, bound on dynvm's time over Inductor's)
    cases = [
        ("gelu (tanh form), 4M f32", gelu_tanh, (torch.randn(4 * 1024 * 1024),), 1e3, "ms",
         1.0),
        ("softmax(x*0.125), 256x1024", scaled_softmax, (torch.randn(256, 1024),), 1e3, "ms",
         1.0),
        ("layer_norm(x + r), 1024x1024", add_layer_norm,
         (torch.randn(1024, 1024), torch.randn(1024, 1024), torch.randn(1024),
          torch.randn(1024)), 1e3, "ms", 1.0),
        ("(x + 1) * 2, 16 f32", add_then_double, (torch.randn(16),), 1e6, "us", 0.5),
        ("2 groups around cumsum, 4M f32", groups_around_cumsum,
         (torch.randn(1024, 4096),), 1e3, "ms", None),
    ]
    print(f"torch {torch.__version__}, torch.set_num_threads({THREADS}) for eager, dynvm and "
          f"Inductor ({torch.get_num_threads()} intra-op thread); best of {REPEATS}x5 rounds; no_grad")
    print(f"{'workload':31} {'eager':>9} {'script':>9} {'dv-eager':>9} {'inductor':>9} "
          f"{'dynvm':>9} {'dv/eager':>8} {'dv/ind':>7} {'target':>11} {'dv err':>8} "
          f"{'ind err':>8}")
    with torch.no_grad():
        for name, fn, args, scale, unit, bound in cases:
            expected = fn(*args)
            scripted = torch.jit.script(fn)
            via_eager = dynvm.compile(fn, backend="eager")
            fused = dynvm.compile(fn, backend="dynvm")
            err = max_error(fused(*args), expected)
            fns = [fn, scripted, via_eager, fused]
            ind_cell, ratio_cell, target_cell, ind_err_cell = "-", "-", "-", "-"
            if with_inductor:
                inductor = torch.compile(fn)
                ind_err_cell = f"{max_error(inductor(*args), expected):8.1e}"
                fns.append(inductor)
            times = interleaved_best(fns, args, repeats=REPEATS)
            t_eager, t_script, t_dv_eager, t_fused = times[:4]
            if with_inductor:
                t_ind = times[4]
                ratio = t_fused / t_ind
                ind_cell = f"{t_ind * scale:7.3f}{unit}"
                ratio_cell = f"{ratio:7.2f}"
                if bound is not None:
                    target_cell = f"<={bound:.2f} {'met' if ratio <= bound else 'MISS'}"
            print(f"{name:31} {t_eager * scale:7.3f}{unit} {t_script * scale:7.3f}{unit} "
                  f"{t_dv_eager * scale:7.3f}{unit} {ind_cell:>9} {t_fused * scale:7.3f}{unit} "
                  f"{t_fused / t_eager:8.2f} {ratio_cell:>7} {target_cell:>11} {err:8.1e} "
                  f"{ind_err_cell:>8}", flush=True)


if __name__ == "__main__":
    main(with_inductor="--no-inductor" not in sys.argv[1:])
