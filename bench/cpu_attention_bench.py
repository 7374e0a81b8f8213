"""The GPT-2-style block of tests/models on the CPU, whose attention is written by hand
(`softmax(q @ k^T * scale, masked) @ v`): backend "dynvm" rewrites it to
scaled_dot_product_attention (graph pass `attention`). Against eager PyTorch and
`torch.compile` (Inductor) in one run, under no_grad, batch 4, width 768, 12 heads; best
per-call time of interleaved rounds (bench/timing.py), in milliseconds.

    python bench/cpu_attention_bench.py [--no-inductor] [--rounds N]
"""

import pathlib
import sys

import torch

import dynvm
from timing import interleaved_best, take_rounds

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from models import gpt2_block  # noqa: E402


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    inductor = "--no-inductor" not in argv
    config = gpt2_block.GPT2Config(block_size=512, n_head=12, n_embd=768, dropout=0.0)
    model = gpt2_block.build_block(0, config).eval()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| sequence | eager ms | Inductor ms | dynvm ms | dv/eager | dv/ind | max diff |")
    print("|---|---|---|---|---|---|---|")
    for seq in (128, 512):
        x = torch.randn(4, seq, 768)
        with torch.no_grad():
            dynvm.reset()
            dv = dynvm.compile(model)
            diff = (dv(x) - model(x)).abs().max().item()
            sides = [model, dv]
            if inductor:
                torch._dynamo.reset()
                sides.append(torch.compile(model))
            times = interleaved_best(sides, (x,), repeats=rounds)
        eager_ms, dv_ms = times[0] * 1e3, times[1] * 1e3
        ind_ms = times[2] * 1e3 if inductor else float("nan")
        print(f"| {seq} | {eager_ms:.2f} | {ind_ms:.2f} | {dv_ms:.2f} | {dv_ms / eager_ms:.2f} | "
              f"{dv_ms / ind_ms:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
