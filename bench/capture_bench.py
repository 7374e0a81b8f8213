"""Capture time: how long dynvm's VM takes to trace a model into a guarded graph (no code
generation, no execution), against one eager forward pass of the same model.

    PYTHONPATH=build/python /usr/bin/python3 bench/capture_bench.py [model ...]

Each trace starts from a fresh dynvm.reset(); the first trace of a process also pays for
torch's fake-tensor machinery warming up, so it is reported apart from the median of the
later ones."""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import dynvm  # noqa: E402
from models import registry  # noqa: E402

DEFAULT = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "densenet121",
           "squeezenet1_1", "vit_b_16", "gpt2_block", "text_classifier"]


def trace_seconds(model, x):
    dynvm.reset()
    start = time.perf_counter()
    report = dynvm.explain(model)(x)
    elapsed = time.perf_counter() - start
    assert report.graph_count == 1 and report.graph_break_count == 0, report
    return elapsed, sum(len(ops) for ops in report.ops_per_graph)


def main(names):
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'model':<16} {'ops':>5} {'first trace':>12} {'median trace':>13} {'eager forward':>14}")
    for name in names:
        spec = registry.spec(name)
        model = spec.build()
        (x,) = spec.make_inputs(2, 0)
        first, ops = trace_seconds(model, x)
        later = [trace_seconds(model, x)[0] for _ in range(5)]
        start = time.perf_counter()
        model(x)
        eager = time.perf_counter() - start
        print(f"{name:<16} {ops:>5} {first * 1e3:>10.1f}ms {statistics.median(later) * 1e3:>11.1f}ms"
              f" {eager * 1e3:>12.1f}ms")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
