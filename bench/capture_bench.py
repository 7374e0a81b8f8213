"""Capture time against Dynamo's: how long dynvm's VM takes to trace a model into guarded
graphs (`dynvm.explain`, from a fresh `dynvm.reset()`: no code generation) and how long
Dynamo takes (`torch._dynamo.explain`, from a fresh `torch._dynamo.reset()`: Dynamo's
bytecode tracing with a backend that records each graph and returns its `forward`, so no
AOTAutograd and no Inductor), on the models of bench/models_peer_bench.py (batch 1) by
default, or on models of tests/models' registry named on the command line (batch 2).

Both explains also run the call once (the parts after a graph break have to see real
values), so each wall time includes one run of the model, op by op. The table gives the
wall times ("first": the first trace of the process, which also warms torch's fake-tensor
machinery up; "best": the best of `--rounds` later ones, default 3 for dynvm and 2 for
Dynamo) and the capture times, each side's time spent compiling rather than running,
measured within the same explain call: for Dynamo, the sum of its own per-frame
`entire_frame_compile_time_s` (torch._dynamo.utils' compilation metrics: tracing, guards,
bytecode, the backend call); for dynvm, the explain's wall time less the time its run
report spent running graphs (so tracing, guards, graph passes and everything else count
as capture). "capture" is the ratio Dynamo/dynvm of the best capture times; the issue's
target is at least 10 on every model. "wall" is the ratio of the best wall times, and
"net" the ratio with one eager forward (best of 3) taken off both walls, the estimate
earlier versions of this table used. Graphs and graph breaks are each side's count for
the call. One intra-op thread (torch.set_num_threads(1)), no_grad.

    PYTHONPATH=build/python python bench/capture_bench.py [--rounds N] [model ...]
"""
import os
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)

import dynvm  # noqa: E402
from dynvm import _native  # noqa: E402
import models_peer_bench  # noqa: E402
from timing import take_rounds  # noqa: E402

THREADS = 1
TARGET = 10.0


def model_and_inputs(name):
    if name in models_peer_bench.MODELS:
        build, make_inputs = models_peer_bench.MODELS[name]
        return build(), make_inputs()
    from models import registry

    spec = registry.spec(name)
    return spec.build(), spec.make_inputs(2, 0)


def dynvm_trace(model, args):
    """(wall time, capture time, report) of one dynvm.explain from a fresh reset."""
    dynvm.reset()
    start = time.perf_counter()
    report = dynvm.explain(model)(*args)
    wall = time.perf_counter() - start
    running = _native.loaded().run_report()["run_seconds"]
    return wall, wall - running, report


def dynamo_trace(model, args):
    """(wall time, capture time, report) of one torch._dynamo.explain from a fresh reset."""
    import torch._dynamo
    from torch._dynamo import utils

    torch._dynamo.reset()
    utils.clear_compilation_metrics()
    start = time.perf_counter()
    report = torch._dynamo.explain(model)(*args)
    wall = time.perf_counter() - start
    capture = sum(m.entire_frame_compile_time_s or 0.0 for m in utils.get_compilation_metrics())
    return wall, capture, report


def best_forward(model, args, rounds=3):
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        model(*args)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    names = argv or list(models_peer_bench.MODELS)
    warnings.filterwarnings("ignore")
    torch.set_grad_enabled(False)
    torch.set_num_threads(THREADS)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread; dynvm.explain "
          f"(best of {rounds}) against torch._dynamo.explain (best of {max(1, rounds - 1)})")
    print(f"{'model':19} {'ops':>5} {'dv g/b':>7} {'Dy g/b':>7} {'dv first':>9} {'dv best':>9} "
          f"{'Dy first':>9} {'Dy best':>9} {'dv capt':>9} {'Dy capt':>9} {'forward':>9} "
          f"{'wall':>6} {'net':>6} {'capture':>8} {'target':>10}")
    for name in names:
        model, args = model_and_inputs(name)
        model(*args)
        dv_first, _, report = dynvm_trace(model, args)
        dv_runs = [dynvm_trace(model, args) for _ in range(rounds)]
        dy_first, _, theirs = dynamo_trace(model, args)
        dy_runs = [dynamo_trace(model, args) for _ in range(max(1, rounds - 1))]
        dv_best, dy_best = min(r[0] for r in dv_runs), min(r[0] for r in dy_runs)
        dv_capture, dy_capture = min(r[1] for r in dv_runs), min(r[1] for r in dy_runs)
        forward = best_forward(model, args)
        wall = dy_best / dv_best
        net = (dy_best - forward) / max(dv_best - forward, 1e-9)
        capture = dy_capture / max(dv_capture, 1e-9)
        ops = sum(len(ops) for ops in report.ops_per_graph)
        target = f">={TARGET:.0f} {'met' if capture >= TARGET else 'MISS'}"
        print(f"{name:19} {ops:5d} {report.graph_count:>3}/{report.graph_break_count:<3} "
              f"{theirs.graph_count:>3}/{theirs.graph_break_count:<3} "
              f"{dv_first * 1e3:7.0f}ms {dv_best * 1e3:7.0f}ms {dy_first * 1e3:7.0f}ms "
              f"{dy_best * 1e3:7.0f}ms {dv_capture * 1e3:7.0f}ms {dy_capture * 1e3:7.0f}ms "
              f"{forward * 1e3:7.1f}ms {wall:6.1f} {net:6.1f} {capture:8.1f} {target:>10}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
