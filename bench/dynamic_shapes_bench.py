"""Dynamic shapes against exact sizes: the GPT-2-style block of tests/models compiled once
with `dynamic=True` (one trace serves every sequence length) against a variant compiled
for each exact length (`dynamic=False`), eager PyTorch and, unless --no-inductor,
`torch.compile(dynamic=True)`; in one run, under no_grad, batch 1, best per-call time of
interleaved rounds (bench/timing.py), in milliseconds. The issue's bar: the dynamic
variant at least 0.9x as fast as the exact one at every length.

    python bench/dynamic_shapes_bench.py [--backend dynvm|eager] [--width N] [--cuda]
                                         [--no-inductor] [--rounds N]
"""

import pathlib
import sys

import torch

import dynvm
from timing import interleaved_best, take_rounds

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from models import gpt2_block  # noqa: E402

LENGTHS = (8, 64, 256, 512)


def option(argv, name, default):
    return type(default)(argv[argv.index(name) + 1]) if name in argv else default


def synchronized(fn):
    def call(*args):
        out = fn(*args)
        torch.cuda.synchronize()
        return out
    return call


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    backend = option(argv, "--backend", "dynvm")
    width = option(argv, "--width", 768)
    inductor = "--no-inductor" not in argv
    device = "cuda" if "--cuda" in argv else "cpu"
    config = gpt2_block.GPT2Config(block_size=512, n_head=12, n_embd=width, dropout=0.0)
    model = gpt2_block.build_block(0, config).eval().to(device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, backend {backend}, "
          f"{device}, width {width}")
    dynamic = dynvm.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        dynamic(torch.randn(1, 100, width, device=device))  # traced at another length
    retraced = 0  # traces the dynamic variant made after its first
    peer = torch.compile(model, dynamic=True) if inductor else None
    print("| length | eager ms | exact ms | dynamic ms | dynamic/exact speed |"
          + (" Inductor dynamic ms |" if inductor else "") + " max diff |")
    print("|---|---|---|---|---|" + ("---|" if inductor else "") + "---|")
    worst = float("inf")
    for length in LENGTHS:
        x = torch.randn(1, length, width, device=device)
        exact = dynvm.compile(model, backend=backend, dynamic=False)
        with torch.no_grad():
            before = dynvm.counters["frames_traced"]
            diff = (dynamic(x) - model(x)).abs().max().item()
            retraced += dynvm.counters["frames_traced"] - before
            sides = [model, exact, dynamic] + ([peer] if inductor else [])
            if device == "cuda":  # each call's time includes its kernels
                sides = [synchronized(side) for side in sides]
            times = interleaved_best(sides, (x,), repeats=rounds)
        ms = [t * 1e3 for t in times]
        speed = times[1] / times[2]
        worst = min(worst, speed)
        row = f"| {length} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} | {speed:.2f} |"
        if inductor:
            row += f" {ms[3]:.3f} |"
        print(row + f" {diff:.1e} |")
    print(f"dynamic variant: traced at length 100, then {retraced} more traces")
    print(f"worst dynamic/exact speed: {worst:.2f} (bar: 0.9)")
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
