"""Graphs that autograd records on the CPU (runtime/graph_autograd_node.h): an MLP with
LayerNorm and GELU (width 1024, batch 256) called without torch.no_grad(), as most user
code calls a model, and a training step (forward, backward, nothing else). Eager PyTorch,
`torch.compile` (Inductor, whose AOTAutograd builds a fused backward) and dynvm (fused
forward; the backward recomputes the graph op by op) in one run; best per-call time of
interleaved rounds (bench/timing.py), in milliseconds.

    python bench/cpu_autograd_bench.py [--no-inductor] [--rounds N]
"""

import torch
from torch import nn

import dynvm
from timing import interleaved_best, take_rounds


def model():
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layers += [nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU()]
    return nn.Sequential(*layers)


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    inductor = "--no-inductor" not in argv
    m = model()
    x = torch.randn(256, 1024)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| workload | eager ms | Inductor ms | dynvm ms | dv/eager | dv/ind |")
    print("|---|---|---|---|---|---|")
    dynvm.reset()
    dv = dynvm.compile(m)
    sides = {"eager": m, "dynvm": dv}
    if inductor:
        torch._dynamo.reset()
        sides["inductor"] = torch.compile(m)

    def step(fn):
        def run(x):
            fn(x).square().mean().backward()
        return run

    for name, make in (("forward without no_grad", lambda fn: fn), ("forward + backward", step)):
        fns = [make(sides[k]) for k in ("eager", "dynvm")]
        if inductor:
            fns.append(make(sides["inductor"]))
        times = interleaved_best(fns, (x,), repeats=rounds)
        eager_ms, dv_ms = times[0] * 1e3, times[1] * 1e3
        ind_ms = times[2] * 1e3 if inductor else float("nan")
        print(f"| {name} | {eager_ms:.2f} | {ind_ms:.2f} | {dv_ms:.2f} | {dv_ms / eager_ms:.2f} | "
              f"{dv_ms / ind_ms:.2f} |", flush=True)
    print(f"dynvm counters: {dynvm.counters}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
