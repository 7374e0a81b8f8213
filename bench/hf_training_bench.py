"""A Hugging Face model's training step compiled whole, against eager and Inductor: a
4-layer GPT-2 (width 256, 4 heads, sequence 128, batch 8, the "sdpa" attention, no
dropout) called with labels, loss.backward() after each call, float32 with TF32 off.
Reports whether dynvm's gradients match eager's, dynvm's counters (graphs, breaks,
recompiles, compiled backwards) and, per round, the mean step time of each side over 20
steps after a synchronize, in milliseconds. Needs transformers.

    PYTHONPATH=build/python python bench/hf_training_bench.py [--device cuda|cpu]
        [--no-inductor] [--rounds N]
"""

import argparse
import copy
import time

import torch

import dynvm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    config = transformers.GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1000,
                                     n_positions=256, attn_pdrop=0.0, resid_pdrop=0.0,
                                     embd_pdrop=0.0)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).to(options.device).train()
    eager = copy.deepcopy(model)
    compiled = dynvm.compile(model)
    ids = torch.randint(0, 1000, (8, 128), device=options.device)

    def step(fn):
        fn(ids, labels=ids).loss.backward()

    for _ in range(2):
        step(compiled)
        step(eager)
    error = max(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item()
                for p, q in zip(model.parameters(), eager.parameters()))
    print(f"gradients after two steps: {error:.2g} relative from eager's")
    sides = {"eager": eager, "dynvm": compiled}
    if not options.no_inductor:
        sides["inductor"] = torch.compile(copy.deepcopy(eager))
        start = time.perf_counter()
        step(sides["inductor"])
        print(f"Inductor's first step: {time.perf_counter() - start:.1f} s")

    def mean_ms(fn, steps=20):
        for _ in range(3):
            step(fn)
        if options.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step(fn)
        if options.device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps * 1e3

    for n in range(options.rounds):
        print(f"round {n}: " + ", ".join(f"{name} {mean_ms(fn):.2f} ms"
                                        for name, fn in sides.items()))
    keys = ("frames_traced", "graph_breaks", "recompiles", "compiled_backwards")
    print({k: v for k, v in dynvm.counters.items() if k in keys})


if __name__ == "__main__":
    main()
