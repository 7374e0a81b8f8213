"""Model inference against the peer: eager PyTorch, dynvm (backend "dynvm": fused CPU
kernels + ATen for convolutions and matmuls) and `torch.compile` (Dynamo + Inductor's CPU
backend, default mode), in one run, on the models of the code-generation issue:

- torchvision resnet50, mobilenet_v3_large and vit_b_16 (weights=None, seeded), one
  224x224 image;
- GPT-2 small (transformers GPT2LMHeadModel, GPT2Config() defaults: 12 layers, 768 wide,
  50257-token vocabulary; random weights, use_cache=False), 64 tokens, the logits;
- BERT-base (transformers BertModel, BertConfig() defaults, random weights), 128 tokens,
  the last hidden state.

Batch 1, eval mode, torch.no_grad(), and torch.set_num_threads(1) before anything is
compiled, so eager, dynvm and Inductor all run on one intra-op thread. Each time is the
best of `--rounds` calls (default 7) after two warm-up calls, the three sides called in
turn (bench/timing.py's interleaved_best). "dv/eager"
and "dv/ind" are time ratios (below 1: dynvm is faster); the issue's target is
dv/ind <= 1.10 on every model. "first" is each compiler's first call (capture, code
generation and one run); "dv err" and "ind err" are the largest absolute differences from
eager's output. bench/capture_bench.py times the capture of the same models against
Dynamo's.

    PYTHONPATH=build/python python bench/models_peer_bench.py [--rounds N] [model ...]
"""
import sys
import time
import warnings

import torch

import dynvm
from timing import interleaved_best, take_rounds

THREADS = 1
TARGET = 1.10


def _torchvision(name):
    def build():
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None)
        if name.startswith("vit_"):
            # torchvision starts the head at zero: every output would be 0.
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model.eval()

    def inputs():
        return (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)

    return build, inputs


def _gpt2():
    import transformers

    config = transformers.GPT2Config()
    config.use_cache = False
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def _bert():
    import transformers

    torch.manual_seed(0)
    return transformers.BertModel(transformers.BertConfig()).eval()


def _tokens(count, vocab):
    def inputs():
        return (torch.randint(0, vocab, (1, count), generator=torch.Generator().manual_seed(0)),)

    return inputs


# name -> (build: () -> model in eval mode, inputs: () -> tuple of positional arguments)
MODELS = {
    "resnet50": _torchvision("resnet50"),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large"),
    "vit_b_16": _torchvision("vit_b_16"),
    "gpt2": (_gpt2, _tokens(64, 50257)),
    "bert_base": (_bert, _tokens(128, 30522)),
}


def output_tensor(out):
    """The tensor to compare: the output itself, or a transformers ModelOutput's first
    field (GPT-2's logits, BERT's last hidden state)."""
    return out if isinstance(out, torch.Tensor) else out[0]


def max_error(got, expected):
    return (output_tensor(got) - output_tensor(expected)).abs().max().item()


def first_call(fn, args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main(argv):
    rounds, argv = take_rounds(argv, 7)
    names = argv or list(MODELS)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(THREADS)
    print(f"torch {torch.__version__}, torch.set_num_threads({THREADS}) for eager, dynvm and "
          f"Inductor; batch 1, eval, no_grad; best of {rounds}")
    print(f"{'model':19} {'eager':>9} {'inductor':>9} {'dynvm':>9} {'dv/eager':>8} "
          f"{'dv/ind':>7} {'target':>11} {'ind first':>9} {'dv first':>9} {'kernels':>7} "
          f"{'dv err':>8} {'ind err':>8}")
    with torch.no_grad():
        for name in names:
            build, make_inputs = MODELS[name]
            model = build()
            args = make_inputs()
            expected = model(*args)
            dynvm.reset()
            torch._dynamo.reset()
            fused = dynvm.compile(model, backend="dynvm")
            before = dynvm.counters["kernels"]
            out, dv_first = first_call(fused, args)
            kernels = dynvm.counters["kernels"] - before
            dv_err = max_error(out, expected)
            inductor = torch.compile(model)
            out, ind_first = first_call(inductor, args)
            ind_err = max_error(out, expected)
            t_eager, t_ind, t_fused = interleaved_best(
                (model, inductor, fused), args, repeats=rounds, warmup=2, min_time=0, rounds=1)
            ratio = t_fused / t_ind
            target = f"<={TARGET:.2f} {'met' if ratio <= TARGET else 'MISS'}"
            print(f"{name:19} {t_eager * 1e3:7.1f}ms {t_ind * 1e3:7.1f}ms {t_fused * 1e3:7.1f}ms "
                  f"{t_fused / t_eager:8.2f} {ratio:7.2f} {target:>11} {ind_first:8.1f}s "
                  f"{dv_first:8.2f}s {kernels:7d} {dv_err:8.1e} {ind_err:8.1e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
