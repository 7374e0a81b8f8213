"""Training sweep: every model of tests/models/transformers_zoo.py in train mode (dropout
on, grad mode on). A causal LM's training step (forward with labels, `loss.backward()`) is
compiled whole with dynvm.compile and run three times against eager with the same seeds
(the models start equal); other models' forwards are explained under grad. Prints a
markdown table: graphs and breaks of one step (`dynvm.explain`; `loss.backward()` in a
step compiled whole is one break), the frames traced again in steps 2 and 3 (a guard that
fails on every call shows here), the largest loss difference over the steps and the
largest gradient difference relative to eager's largest gradient, and the first break
reason. Not a test; docs/status.md records the result.

    PYTHONPATH=build/python python bench/transformers_training_sweep.py \\
        [--cuda] [--dtype bfloat16] [name ...]
"""
import argparse
import copy
import pathlib
import sys
import warnings

import torch

import dynvm

_TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS), str(_TESTS / "python")]
from models import transformers_zoo as zoo  # noqa: E402


def training_step(model, kwargs):
    out = model(**kwargs, labels=kwargs["input_ids"])
    out.loss.backward()
    return out.loss.detach()


def _reason(report):
    if not report.break_reasons:
        return ""
    first = report.break_reasons[0]
    return f"{first.reason[:70]} ({pathlib.Path(first.filename).name}:{first.lineno})"


def _largest_gradient_difference(compiled, eager):
    largest, scale = 0.0, 0.0
    for (name, p), (_, q) in zip(compiled.named_parameters(), eager.named_parameters()):
        if q.grad is None:
            continue
        if p.grad is None:
            return float("inf")
        largest = max(largest, (p.grad.float() - q.grad.float()).abs().max().item())
        scale = max(scale, q.grad.float().abs().max().item())
    return largest / scale if scale else largest


def sweep_one(name, device, dtype):
    model = zoo.build(name).train().to(device=device, dtype=dtype)
    kwargs = {k: v.to(device) for k, v in zoo.inputs(name, model).items()}
    for k, v in kwargs.items():
        if v.is_floating_point():
            kwargs[k] = v.to(dtype)
    dynvm.reset()
    if zoo.entry(name).kind != "causal_lm":
        report = dynvm.explain(model)(**kwargs)
        return f"| {name} | forward | {report.graph_count} | {report.graph_break_count} | | | | " \
               f"{_reason(report)} |"
    eager = copy.deepcopy(model)
    report = dynvm.explain(training_step)(copy.deepcopy(model), kwargs)
    compiled = dynvm.compile(training_step)
    loss_difference = 0.0
    for step in range(3):
        torch.manual_seed(step)
        want = training_step(eager, kwargs)
        torch.manual_seed(step)
        got = compiled(model, kwargs)
        loss_difference = max(loss_difference, (got.float() - want.float()).abs().item())
        if step == 0:
            traced = dynvm.counters["frames_traced"]
    retraced = dynvm.counters["frames_traced"] - traced
    gradient = _largest_gradient_difference(model, eager)
    return (f"| {name} | step | {report.graph_count} | {report.graph_break_count} | "
            f"{retraced} | {loss_difference:.2e} | {gradient:.2e} | {_reason(report)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    device = "cuda" if args.cuda else "cpu"
    dtype = getattr(torch, args.dtype)
    print(f"device {device}, {args.dtype}, torch {torch.__version__}")
    print("| model | what | graphs | breaks | traced again after step 1 | loss diff |"
          " grad diff (rel.) | first break |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.names or zoo.NAMES:
        try:
            print(sweep_one(name, device, dtype), flush=True)
        except Exception as e:  # a sweep row, not a test: say what failed and go on
            print(f"| {name} | failed | | | | | | {type(e).__name__}: {str(e)[:80]} |",
                  flush=True)


if __name__ == "__main__":
    main()
