"""Issue 16's acceptance sweep, too long for CI (tests/python/test_dynamic_shapes.py runs a
subset): a GPT-2-style block and a BERT-style encoder called with every sequence length
2..512 in random order, then batch sizes 1..32; resnet18 with batch sizes 1..64. Each
model is compiled once with dynamic=True; every result is compared with eager, and the
traces and cache-limit warnings are counted.

    python bench/dynamic_shapes_sweep.py [--backend eager|dynvm] [--width N]
"""

import pathlib
import random
import sys
import time
import warnings

import torch

import dynvm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from test_dynamic_shapes import Block, Encoder  # noqa: E402


def sweep(name, model, inputs, backend, atol=1e-4):
    dynvm.reset()
    compiled = dynvm.compile(model, backend=backend, dynamic=True)
    mismatches = 0
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for args in inputs:
            if not torch.allclose(compiled(*args), model(*args), atol=atol, rtol=1e-4):
                mismatches += 1
    limit = sum("cache_size_limit" in str(w.message) for w in caught)
    print(f"| {name} | {len(inputs)} | {dynvm.counters['frames_traced']} | {mismatches} | "
          f"{limit} | {time.perf_counter() - start:.1f} |")
    return mismatches == 0 and limit == 0


def main(argv):
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else "eager"
    width = int(argv[argv.index("--width") + 1]) if "--width" in argv else 32
    torch.manual_seed(0)
    rng = random.Random(0)
    lengths = list(range(2, 513))
    rng.shuffle(lengths)
    print(f"torch {torch.__version__}, backend {backend}, width {width}")
    print("| model | calls | traces | mismatches | cache-limit warnings | seconds |")
    print("|---|---|---|---|---|---|")
    ok = True
    block = Block(width).eval()
    ok &= sweep("GPT-2-style block", block,
                [(torch.randn(2, t, width),) for t in lengths] +
                [(torch.randn(b, 16, width),) for b in range(1, 33)], backend)

    def encoder_inputs(b, t):
        mask = torch.zeros(b, t, dtype=torch.bool)
        mask[:, t - 1] = True
        return torch.randn(b, t, width), mask

    encoder = Encoder(width).eval()
    ok &= sweep("BERT-style encoder", encoder,
                [encoder_inputs(2, t) for t in lengths] +
                [encoder_inputs(b, 16) for b in range(1, 33)], backend)
    try:
        import torchvision
    except ImportError:
        print("resnet18: skipped (no torchvision)")
    else:
        resnet = torchvision.models.resnet18(num_classes=10).eval()
        ok &= sweep("resnet18", resnet, [(torch.randn(b, 3, 32, 32),) for b in range(1, 65)],
                    backend)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
