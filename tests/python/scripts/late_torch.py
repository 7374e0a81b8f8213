"""Imports torch only after some plain Python has run; the functions called after the
import are compiled."""
import sys


def scale(x):
    return x * 2 + 1


total = sum(range(10))  # plain Python first, torch not loaded yet
print("before", "torch" in sys.modules, "dynvm._C" in sys.modules)
import torch  # noqa: E402

x = torch.arange(4.0)
for _ in range(3):
    y = scale(x)
print("after", y.tolist(), "dynvm._C" in sys.modules)
