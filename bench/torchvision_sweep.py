"""Coverage sweep: traces every torchvision classification model (random weights, eval
mode, batch 1, no grad) with dynvm.explain and prints its graph and break counts and the
time the trace took. Not a test (the largest ViTs take a minute each); docs/status.md
records the result.

    PYTHONPATH=build/python /usr/bin/python3 bench/torchvision_sweep.py [name ...]
"""
import sys
import time
import warnings

import torch
import torchvision

import dynvm


def classification_models():
    if hasattr(torchvision.models, "list_models"):
        return torchvision.models.list_models(module=torchvision.models)
    return sorted(n for n, f in vars(torchvision.models).items()
                  if callable(f) and n.islower() and not n.startswith("_")
                  and n not in ("get_model", "get_weight", "get_model_weights", "list_models"))


def main(names):
    warnings.filterwarnings("ignore")
    torch.set_grad_enabled(False)
    one_graph = 0
    for name in names:
        model = getattr(torchvision.models, name)(weights=None).eval()
        size = 299 if name == "inception_v3" else 224
        start = time.perf_counter()
        report = dynvm.explain(model)(torch.randn(1, 3, size, size))
        elapsed = time.perf_counter() - start
        ok = report.graph_count == 1 and report.graph_break_count == 0
        one_graph += ok
        reasons = "; ".join(str(b) for b in report.break_reasons)
        print(f"{name:24s} {'one graph' if ok else 'BREAK':9s} {elapsed * 1e3:8.0f} ms {reasons}",
              flush=True)
    print(f"{one_graph} of {len(names)} models captured as one graph")


if __name__ == "__main__":
    main(sys.argv[1:] or classification_models())
