"""Backend "dynvm" on whole models on one GPU, against eager PyTorch and `torch.compile`
(Inductor, default mode), in one run: the GPT-2-style block of tests/models (width 768,
12 heads, batch 16, sequence 512) in float32 and under bfloat16 autocast, and
torchvision's resnet50 and vit_b_16 at batch 32 (random weights, eval mode). Under
no_grad. Each figure is the median of CUDA-event timed loops after warm-up, in
milliseconds per call; "dv/eager" and "dv/ind" are time ratios (below 1: dynvm faster).
Cold compile is the first call's wall time (trace + compile + run), dynvm's kernel cache
in a fresh folder, Inductor's FX graph cache off. "max rel" is dynvm's largest
difference from eager relative to the output's scale.

    python bench/cuda_models_bench.py [--no-inductor] [--only NAME]
"""

import contextlib
import os
import pathlib
import sys
import tempfile

import torch

os.environ.setdefault("DYNVM_CACHE_DIR", tempfile.mkdtemp(prefix="dynvm-bench-cache-"))
# Inductor's caches too (FX graphs, Triton kernels): its cold compile is then cold, as
# ours is, even when an earlier run on the machine filled its default cache.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-cache-"))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-bench-cache-"))
import dynvm  # noqa: E402
from timing import cuda_cold_call, cuda_median_ms  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from models import gpt2_block  # noqa: E402


def gpt2_block_workload():
    config = gpt2_block.GPT2Config(block_size=512, n_head=12, n_embd=768, dropout=0.0)
    model = gpt2_block.build_block(0, config).cuda()
    (x,) = gpt2_block.block_inputs(16, 0, seq=512, config=config)
    return model, (x.cuda(),)


def torchvision_workload(name):
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval().cuda()
    return model, (torch.randn(32, 3, 224, 224, device="cuda"),)


WORKLOADS = {
    "gpt2_block f32 16x512x768": (gpt2_block_workload, None),
    "gpt2_block bf16 autocast": (gpt2_block_workload, torch.bfloat16),
    "resnet50 b32": (lambda: torchvision_workload("resnet50"), None),
    "vit_b_16 b32": (lambda: torchvision_workload("vit_b_16"), None),
}


def time_ms(fn, args):
    return cuda_median_ms(fn, args, loops=5, calls=10, warmup=3)


def main(argv):
    inductor = "--no-inductor" not in argv
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    if inductor:
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| model | eager ms | Inductor ms | dynvm ms | dv/eager | dv/ind | dynvm cold s | "
          "Inductor cold s | max rel | dynvm kernels |")
    print("|" + "---|" * 10)
    for name, (make, autocast) in WORKLOADS.items():
        if only and only not in name:
            continue
        model, args = make()
        ctx = (lambda: torch.autocast("cuda", dtype=autocast)) if autocast else contextlib.nullcontext
        with torch.no_grad(), ctx():
            expected = model(*args)
            dynvm.reset()
            dv = dynvm.compile(model)
            out, dv_cold = cuda_cold_call(dv, args)
            kernels = dynvm.counters["kernels"]
            scale = max(expected.float().abs().max().item(), 1.0)
            rel = (out.float() - expected.float()).abs().max().item() / scale
            ind_cold, ind_ms = float("nan"), float("nan")
            if inductor:
                torch._dynamo.reset()
                ind = torch.compile(model)
                _, ind_cold = cuda_cold_call(ind, args)
            eager_ms = time_ms(model, args)
            dv_ms = time_ms(dv, args)
            if inductor:
                ind_ms = time_ms(ind, args)
        print(f"| {name} | {eager_ms:.3f} | {ind_ms:.3f} | {dv_ms:.3f} | {dv_ms / eager_ms:.2f} | "
              f"{dv_ms / ind_ms:.2f} | {dv_cold:.2f} | {ind_cold:.2f} | {rel:.1e} | {kernels} |",
              flush=True)
        del model, args, expected, out


if __name__ == "__main__":
    main(sys.argv[1:])
