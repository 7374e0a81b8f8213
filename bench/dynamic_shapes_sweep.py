"""Issue 16's acceptance sweep, too long for CI (tests/python/test_dynamic_shapes.py runs a
subset): a GPT-2-style block and a BERT-style encoder called with every sequence length
2..512 in random order, then batch sizes 1..32; resnet18 with batch sizes 1..64. Each
model is compiled once with dynamic=True; every result is compared with eager, and the
traces and cache-limit warnings are counted.

    python bench/dynamic_shapes_sweep.py [--backend eager|dynvm] [--width N] [--cuda]

With --cuda the models and inputs are on the GPU, and a last column counts the NVRTC
compilations of the sweep (backend "dynvm": each distinct CUDA kernel source is compiled
once; kernels take their parallel loop's extent at run time). cuDNN's TF32 convolutions
are turned off there: with them eager's and dynvm's convolutions (channels-last) differ
by about 1e-3 on resnet18, which hides the comparison this sweep makes.
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


def _nvrtc_compilations():
    from dynvm import _native

    count = getattr(_native.core(), "nvrtc_compilations", None)
    return count() if count is not None else 0


def sweep(name, model, inputs, backend, atol=1e-4, device="cpu"):
    model = model.to(device)
    inputs = [tuple(a.to(device) for a in args) for args in inputs]
    dynvm.reset()
    compiles = _nvrtc_compilations()
    compiled = dynvm.compile(model, backend=backend, dynamic=True)
    mismatches = 0
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for args in inputs:
            if not torch.allclose(compiled(*args), model(*args), atol=atol, rtol=1e-4):
                mismatches += 1
    if device == "cuda":
        torch.cuda.synchronize()
    limit = sum("cache_size_limit" in str(w.message) for w in caught)
    nvrtc = f" {_nvrtc_compilations() - compiles} |" if device == "cuda" else ""
    print(f"| {name} | {len(inputs)} | {dynvm.counters['frames_traced']} | {mismatches} | "
          f"{limit} | {time.perf_counter() - start:.1f} |{nvrtc}")
    return mismatches == 0 and limit == 0


def main(argv):
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else "eager"
    width = int(argv[argv.index("--width") + 1]) if "--width" in argv else 32
    device = "cuda" if "--cuda" in argv else "cpu"
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    rng = random.Random(0)
    lengths = list(range(2, 513))
    rng.shuffle(lengths)
    print(f"torch {torch.__version__}, backend {backend}, width {width}, {device}")
    cuda = device == "cuda"
    print("| model | calls | traces | mismatches | cache-limit warnings | seconds |" +
          (" NVRTC compiles |" if cuda else ""))
    print("|---|---|---|---|---|---|" + ("---|" if cuda else ""))
    ok = True
    block = Block(width).eval()
    ok &= sweep("GPT-2-style block", block,
                [(torch.randn(2, t, width),) for t in lengths] +
                [(torch.randn(b, 16, width),) for b in range(1, 33)], backend, device=device)

    def encoder_inputs(b, t):
        mask = torch.zeros(b, t, dtype=torch.bool)
        mask[:, t - 1] = True
        return torch.randn(b, t, width), mask

    encoder = Encoder(width).eval()
    ok &= sweep("BERT-style encoder", encoder,
                [encoder_inputs(2, t) for t in lengths] +
                [encoder_inputs(b, 16) for b in range(1, 33)], backend, device=device)
    try:
        import torchvision
    except ImportError:
        print("resnet18: skipped (no torchvision)")
    else:
        resnet = torchvision.models.resnet18(num_classes=10).eval()
        ok &= sweep("resnet18", resnet, [(torch.randn(b, 3, 32, 32),) for b in range(1, 65)],
                    backend, device=device)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
