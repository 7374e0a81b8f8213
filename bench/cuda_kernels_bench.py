"""Backend "dynvm" (fused CUDA kernels through NVRTC) against eager PyTorch and the peer,
`torch.compile` (Dynamo + Inductor, Triton kernels, default mode), in one run on one GPU,
on the memory-bound workloads of the CUDA issue:

- gelu written out with tanh on 64M float32 values;
- layer_norm(x + r) on 8192x4096;
- softmax(x * 0.125, -1) on 64x1024x1024;
- RMSNorm on 8192x4096;
- bias + gelu after a Linear (4096x4096 @ 4096x4096, float32);
- beyond the issue's list: a mean squared error over 64M float32 values (one reduction
  over everything, which dynvm splits across blocks).

Each figure is the median of CUDA-event timed loops (100 calls per loop, 5 loops) after
warm-up, in microseconds per call. "dv/eager" and "dv/ind" are time ratios (below 1:
dynvm is faster); "GB/s" is the bytes each workload must move (inputs read once, outputs
written once) over dynvm's time, against the device's copy bandwidth measured here (a
1 GiB tensor copied). Cold compile: the wall time of the first call of each compiled
function (trace + compile + run), with dynvm's kernel cache in a fresh folder and
Inductor's caches off. Results are compared with eager's (largest absolute difference).

    python bench/cuda_kernels_bench.py [--no-inductor]
"""

import os
import sys
import tempfile

import torch
import torch.nn.functional as F

os.environ.setdefault("DYNVM_CACHE_DIR", tempfile.mkdtemp(prefix="dynvm-bench-cache-"))
# Inductor's caches too (FX graphs, Triton kernels): its cold compile is then cold, as
# ours is, even when an earlier run on the machine filled its default cache.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-cache-"))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-bench-cache-"))
import dynvm  # noqa: E402
from timing import cuda_cold_call, cuda_median_ms  # noqa: E402


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def add_layer_norm(x, r, w, b):
    return F.layer_norm(x + r, (x.shape[-1],), w, b)


def scaled_softmax(x):
    return torch.softmax(x * 0.125, -1)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def linear_bias_gelu(x, weight, bias):
    return F.gelu(x @ weight.t() + bias, approximate="tanh")


def mse(x, y):
    return ((x - y) ** 2).mean()


def workloads():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=dev, generator=g)

    n = 64 * 1024 * 1024
    x_ln, r_ln = randn(8192, 4096), randn(8192, 4096)
    w_ln, b_ln = randn(4096), randn(4096)
    x_lin, w_lin, b_lin = randn(4096, 4096), randn(4096, 4096) / 64, randn(4096)
    f32 = 4
    return [
        ("gelu_tanh 64M", gelu_tanh, (randn(n),), 2 * n * f32),
        ("layer_norm(x + r) 8192x4096", add_layer_norm, (x_ln, r_ln, w_ln, b_ln),
         3 * x_ln.numel() * f32),
        ("softmax(x * 0.125) 64x1024x1024", scaled_softmax, (randn(64, 1024, 1024),),
         2 * 64 * 1024 * 1024 * f32),
        ("rms_norm 8192x4096", rms_norm, (randn(8192, 4096), randn(4096)),
         2 * 8192 * 4096 * f32),
        ("linear + bias + gelu 4096", linear_bias_gelu, (x_lin, w_lin, b_lin),
         None),
        ("mse loss 64M", mse, (randn(n), randn(n)), 2 * n * f32),
    ]


def time_us(fn, args, loops=5, calls=100):
    return cuda_median_ms(fn, args, loops=loops, calls=calls) * 1000.0


def copy_bandwidth_gbs():
    src = torch.empty(256 * 1024 * 1024, device="cuda")
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), (), loops=5, calls=20)
    return 2 * src.numel() * 4 / (us * 1e-6) / 1e9


def main(argv):
    inductor = "--no-inductor" not in argv
    if inductor:
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False
        inductor_config.autotune_local_cache = False
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"dynvm {dynvm.__version__}")
    copy = copy_bandwidth_gbs()
    print(f"copy bandwidth (1 GiB copy_): {copy:.0f} GB/s")
    header = (f"| workload | eager µs | Inductor µs | dynvm µs | dv/eager | dv/ind | dynvm GB/s "
              f"(of copy) | dynvm cold s | Inductor cold s | max |diff| |")
    print(header)
    print("|" + "---|" * 10)
    with torch.no_grad():
        for name, fn, args, nbytes in workloads():
            expected = fn(*args)
            dv = dynvm.compile(fn)
            dv_out, dv_cold = cuda_cold_call(dv, args)
            diff = (dv_out - expected).abs().max().item()
            ind_cold = float("nan")
            if inductor:
                torch._dynamo.reset()
                ind = torch.compile(fn)
                _, ind_cold = cuda_cold_call(ind, args)
            eager_us = time_us(fn, args)
            dv_us = time_us(dv, args)
            ind_us = time_us(ind, args) if inductor else float("nan")
            bw = f"{nbytes / (dv_us * 1e-6) / 1e9:.0f} ({nbytes / (dv_us * 1e-6) / 1e9 / copy:.2f})" \
                if nbytes else "-"
            print(f"| {name} | {eager_us:.1f} | {ind_us:.1f} | {dv_us:.1f} | "
                  f"{dv_us / eager_us:.2f} | {dv_us / ind_us:.2f} | {bw} | {dv_cold:.2f} | "
                  f"{ind_cold:.2f} | {diff:.2e} |", flush=True)
    print("dynvm counters:", dict(dynvm.counters))


if __name__ == "__main__":
    main(sys.argv[1:])
