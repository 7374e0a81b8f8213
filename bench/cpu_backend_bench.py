"""Backend "dynvm" (fused CPU kernels through LLVM) against eager PyTorch, TorchScript
(torch.jit.script) and backend "eager" (the captured graph replayed op by op), in one run,
on the workloads of the code-generation issue:

- gelu written out with tanh on 4M float32 values;
- softmax(x * 0.125, -1) on 256x1024;
- layer_norm(x + r) on 1024x1024;
- (x + 1) * 2 on 16 values (per-call cost);
- two fused groups around a cumsum (ATen) on 4M float32 values: the first group's 16 MB
  result is an intermediate in planned memory, reused across calls.

Each figure is the best of several timed rounds (milliseconds or microseconds per call).

    PYTHONPATH=build/python /usr/bin/python3 bench/cpu_backend_bench.py
"""

import torch
import torch.nn.functional as F

import dynvm
from timing import seconds_per_call


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


def main():
    torch.manual_seed(0)
    cases = [
        ("gelu (tanh form), 4M f32", gelu_tanh, (torch.randn(4 * 1024 * 1024),), 1e3, "ms"),
        ("softmax(x*0.125), 256x1024", scaled_softmax, (torch.randn(256, 1024),), 1e3, "ms"),
        ("layer_norm(x + r), 1024x1024", add_layer_norm,
         (torch.randn(1024, 1024), torch.randn(1024, 1024), torch.randn(1024),
          torch.randn(1024)), 1e3, "ms"),
        ("(x + 1) * 2, 16 f32", add_then_double, (torch.randn(16),), 1e6, "us"),
        ("2 groups around cumsum, 4M f32", groups_around_cumsum,
         (torch.randn(1024, 4096),), 1e3, "ms"),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads")
    header = f"{'workload':32} {'eager':>9} {'script':>9} {'dv-eager':>9} {'dynvm':>9}" \
             f" {'x eager':>8} {'x script':>8} {'max err':>9}"
    print(header)
    for name, fn, args, scale, unit in cases:
        scripted = torch.jit.script(fn)
        via_eager = dynvm.compile(fn, backend="eager")
        fused = dynvm.compile(fn, backend="dynvm")
        err = (fused(*args) - fn(*args)).abs().max().item()
        t_eager = seconds_per_call(fn, args)
        t_script = seconds_per_call(scripted, args)
        t_dv_eager = seconds_per_call(via_eager, args)
        t_fused = seconds_per_call(fused, args)
        print(f"{name:32} {t_eager * scale:7.3f}{unit} {t_script * scale:7.3f}{unit} "
              f"{t_dv_eager * scale:7.3f}{unit} {t_fused * scale:7.3f}{unit} "
              f"{t_eager / t_fused:7.2f}x {t_script / t_fused:7.2f}x {err:9.2e}")


if __name__ == "__main__":
    main()
