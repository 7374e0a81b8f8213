"""Guard checks of a cache hit: the variant's compiled guards (host glue through the ORC
JIT) against the C++ guard interpreter, on the same guards and the same call, for a small
function and for modules whose guards cover every parameter and submodule. Sets of every
size are compiled here (DYNVM_GUARD_GLUE_MAX is raised), to show where the policy's limit
comes from.

    PYTHONPATH=build/python /usr/bin/python3 bench/guard_bench.py
"""
import os

os.environ["DYNVM_GUARD_GLUE_MAX"] = "1000000"  # read when the first variant is built

import torch
import torchvision

import dynvm
from dynvm import _native


def add_then_double(x):
    return (x + 1) * 2


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.layers(x).softmax(-1)


def cases():
    yield "(x + 1) * 2", add_then_double, (torch.randn(16),)
    mlp = MLP().eval()
    yield "MLP (3 Linear)", type(mlp).forward, (mlp, torch.randn(4, 32))
    resnet = torchvision.models.resnet18().eval()
    yield "ResNet-18", type(resnet).forward, (resnet, torch.randn(1, 3, 32, 32))
    shuffle = torchvision.models.shufflenet_v2_x0_5().eval()
    yield "ShuffleNetV2 x0.5", type(shuffle).forward, (shuffle, torch.randn(1, 3, 32, 32))
    effnet = torchvision.models.efficientnet_b0().eval()
    yield "EfficientNet-B0", type(effnet).forward, (effnet, torch.randn(1, 3, 32, 32))


def main():
    core = _native.core()
    print(f"{'function':<18} {'guards':>6} {'interpreter':>12} {'compiled':>10} {'speedup':>8} "
          f"{'compile':>9}")
    for name, fn, args in cases():
        dynvm.reset()
        compiled = dynvm.compile(fn, backend="eager")
        with torch.no_grad():
            for _ in range(4):  # past the policy's interpreter checks: the guards compile
                compiled(*args)
            best = None
            for _ in range(5):
                t = core.time_cached_variant(fn, args, "eager", 2000, 0)  # guards only
                if best is None or t["guards_ns"] < best["guards_ns"]:
                    best = t
        assert best["guards_compiled"], "the guards did not compile (no LLVM?)"
        interp = best["interpreted_guards_ns"] / 1000
        jit = best["guards_ns"] / 1000
        print(f"{name:<18} {best['guard_count']:>6} {interp:>9.2f} us {jit:>7.2f} us "
              f"{interp / jit:>7.2f}x {best['guards_compile_ms']:>6.1f} ms")


if __name__ == "__main__":
    main()
