"""Training steps on the CPU (issue 15): forward, loss, backward and an AdamW step of a
GPT-2-style 4-layer model (width 256, sequence 128, batch 8), resnet18 (batch 16 at 64x64)
and a 3-layer MLP with LayerNorm and GELU (width 1024, batch 256). Eager PyTorch,
`torch.compile` (Inductor with AOTAutograd) and dynvm (a compiled backward,
graph/autodiff.h) each compile the model; the loss and the optimizer run eagerly on all
three sides. With --whole-step each compiler compiles the step function instead (forward,
loss, backward as a graph break, the optimizer step and zero_grad), so the AdamW update is
traced and fused too. Best per-step time of interleaved rounds (bench/timing.py), in
milliseconds, one intra-op thread unless --threads N. Also: the bytes each side keeps for
the backward (saved-tensor hooks, unique storages; not with --whole-step) and dynvm's
compile time of each half.

    PYTHONPATH=build/python:tests python bench/cpu_training_bench.py [--no-inductor]
        [--whole-step] [--rounds N] [--threads N] [names...]
"""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

import dynvm
from timing import interleaved_best, take_rounds


def gpt2(device="cpu"):
    from models import gpt2_block

    config = gpt2_block.GPT2Config(block_size=128, vocab_size=1024, n_layer=4, n_head=4,
                                   n_embd=256, dropout=0.1)
    model = gpt2_block.build_tiny_gpt2(0, config).train().to(device)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 1024, (8, 128), generator=gen).to(device)
    targets = torch.randint(0, 1024, (8, 128), generator=gen).to(device)

    def loss(out):
        return F.cross_entropy(out.view(-1, out.size(-1)), targets.view(-1))

    return model, (tokens,), loss


def resnet18(device="cpu"):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).train().to(device)
    x = torch.randn(16, 3, 64, 64, generator=torch.Generator().manual_seed(0)).to(device)
    targets = (torch.arange(16) % 10).to(device)
    return model, (x,), lambda out: F.cross_entropy(out, targets)


def mlp(device="cpu"):
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layers += [nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU()]
    x = torch.randn(256, 1024, generator=torch.Generator().manual_seed(0)).to(device)
    return nn.Sequential(*layers).to(device), (x,), lambda out: out.square().mean()


# name -> (device) -> (model, args, loss of the output), all on `device`.
WORKLOADS = {"gpt2_4layer": gpt2, "resnet18_64px": resnet18, "mlp_3layer": mlp}


def saved_bytes(fn, args):
    """Bytes of the unique storages autograd saves for the backward of one call."""
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() != 0:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    del out
    return sum(seen.values())


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    threads = 1
    if "--threads" in argv:
        at = argv.index("--threads")
        threads = int(argv[at + 1])
        del argv[at:at + 2]
    torch.set_num_threads(threads)
    inductor = "--no-inductor" not in argv
    whole_step = "--whole-step" in argv
    names = [a for a in argv if not a.startswith("--")] or list(WORKLOADS)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| workload | eager ms | Inductor ms | dynvm ms | eager/dv | ind/dv | saved MB eager | "
          "saved MB dynvm | dynvm compile fwd / bwd s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        model, args, loss_of = WORKLOADS[name]()
        sides = {"eager": model, "dynvm": copy.deepcopy(model)}
        if inductor:
            sides["inductor"] = copy.deepcopy(model)
        steps = []
        compiled = {}
        for side, m in sides.items():
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
            if side == "dynvm":
                dynvm.reset()
                compiler = dynvm.compile
            elif side == "inductor":
                torch._dynamo.reset()
                compiler = torch.compile
            else:
                compiler = None
            fn = compiler(m) if compiler is not None and not whole_step else m
            compiled[side] = fn

            def step(*a, fn=fn, opt=opt):
                loss = loss_of(fn(*a))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            steps.append(compiler(step) if compiler is not None and whole_step else step)
        steps[1](*args)  # compiles dynvm's variant
        if whole_step:
            steps[1](*args)  # the optimizer's state exists from the second step on
        counters = dict(dynvm.counters)
        times = interleaved_best(steps, args, repeats=rounds)
        eager_ms, dv_ms = times[0] * 1e3, times[1] * 1e3
        ind_ms = times[2] * 1e3 if inductor else float("nan")
        if whole_step:
            mb_eager = mb_dv = "-"
        else:
            mb_eager = f"{saved_bytes(compiled['eager'], args) / 2**20:.1f}"
            mb_dv = f"{saved_bytes(compiled['dynvm'], args) / 2**20:.1f}"
        print(f"| {name} | {eager_ms:.1f} | {ind_ms:.1f} | {dv_ms:.1f} | {eager_ms / dv_ms:.2f} | "
              f"{ind_ms / dv_ms:.2f} | {mb_eager} | {mb_dv} | "
              f"{counters['forward_compile_us'] / 1e6:.2f} / "
              f"{counters['backward_compile_us'] / 1e6:.2f} |", flush=True)
        if counters["compiled_backwards"] == 0:
            print(f"  {name}: no graph got a compiled backward: {counters}")


if __name__ == "__main__":
    main(sys.argv[1:])
