"""Warm start: the first call of a model in a new process, with the kernel disk cache
empty (cold) and then filled by that first process (warm). Each side runs in a child
process of its own; it prints the first call's wall time, the time spent tracing
(capture), the kernels compiled and those reused from the disk cache (the run report's
figures). Issue 18 asks that a warm first call of resnet50 take at most its capture time
+ 20% and compile no kernel.

    PYTHONPATH=build/python python bench/warm_start_bench.py [model ...]   (default resnet50)
"""
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import torch, torchvision
import dynvm
from dynvm import _native
torch.set_num_threads(1)
model = getattr(torchvision.models, sys.argv[1])().eval()
x = torch.randn(1, 3, 224, 224)
compiled = dynvm.compile(model)
with torch.no_grad():
    start = time.perf_counter()
    compiled(x)
    first = time.perf_counter() - start
    start = time.perf_counter()
    compiled(x)
    second = time.perf_counter() - start
report = _native.core().run_report()
print(json.dumps({"first_s": first, "second_s": second, "trace_s": report["trace_seconds"],
                  "compiled": report["kernels_compiled"], "from_disk": report["kernels_from_disk"]}))
"""


def run_child(model, cache_dir):
    env = dict(os.environ, DYNVM_CACHE_DIR=cache_dir)
    done = subprocess.run([sys.executable, "-c", CHILD, model], env=env, capture_output=True,
                          text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    models = sys.argv[1:] or ["resnet50"]
    print("| model | process | first call s | capture s | first / capture | kernels compiled | "
          "from disk | second call s |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        with tempfile.TemporaryDirectory(prefix="dynvm-warm-") as cache:
            for side in ("cold", "warm"):
                r = run_child(model, cache)
                print(f"| {model} | {side} | {r['first_s']:.3f} | {r['trace_s']:.3f} | "
                      f"{r['first_s'] / r['trace_s']:.2f} | {r['compiled']} | {r['from_disk']} | "
                      f"{r['second_s']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
