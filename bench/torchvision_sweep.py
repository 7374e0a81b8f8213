"""Coverage sweep of image models (tests/python/vision_zoo.py: random weights, eval mode,
small seeded inputs, no grad): each model is traced by dynvm.explain and by Dynamo's
explain in the same process, then compiled with dynvm under backend "dynvm" (fused
kernels) and backend "eager" (the graphs replayed op by op) and called twice, each output
compared with eager's. Prints a markdown table (graphs and breaks side by side, the
result under each backend with its largest error relative to the output's magnitude, the
most frequent break reason of the model), a summary, and the break reasons counted over
models. Not a test (the whole zoo takes most of an hour on 2 cores); docs/status.md
records the result.

    PYTHONPATH=build/python python bench/torchvision_sweep.py [torchvision | timm | name ...]

With no argument it sweeps every torchvision classification, detection and segmentation
model; "timm" sweeps the timm list (bench/timm_sweep.py does the same); a name is
"timm/<name>", "torchvision/<name>", or a bare torchvision model name.
"""
import collections
import pathlib
import sys
import time
import traceback
import warnings

import torch

import dynvm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
import model_compare as compare  # noqa: E402
import vision_zoo  # noqa: E402

BACKENDS = ("dynvm", "eager")


def classification_models():
    """Every torchvision classification model's name (bench/torchvision_backend_sweep.py)."""
    import torchvision

    return torchvision.models.list_models(module=torchvision.models)


def _error(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"


def _check_backend(model, args, expected, backend):
    """"ok 3e-07" when two calls of dynvm.compile(model, backend) give eager's outputs,
    "WRONG <error>" when one does not, "FAILED <exception>" when compiling or calling
    raises."""
    dynvm.reset()
    worst = 0.0
    try:
        compiled = dynvm.compile(model, backend=backend)
        for _ in range(2):  # the second call runs the cached variants
            got = compiled(*args)
            worst = max(worst, compare.max_relative_error(got, expected))
            compare.assert_outputs_close(got, expected)
        return True, f"ok {worst:.0e}"
    except AssertionError as e:
        return False, f"WRONG {worst:.1e} ({str(e).splitlines()[0][:60]})"
    except Exception as e:  # a sweep reports and goes on
        return False, f"FAILED {_error(e)}"


def _top_reason(report):
    counts = collections.Counter(compare.reason_key(b) for b in report.break_reasons)
    if not counts:
        return ""
    key, count = counts.most_common(1)[0]
    site = next(b for b in report.break_reasons if compare.reason_key(b) == key)
    return (f"{count} x {key} ({pathlib.Path(site.filename).name}:{site.lineno})"
            .replace("|", "/"))


def sweep(names):
    warnings.filterwarnings("ignore")
    torch.set_grad_enabled(False)
    reasons = collections.Counter()  # reason -> models breaking for it
    example = {}
    rows = 0
    as_few = []
    correct = []
    print("| model | input | dynvm graphs | dynvm breaks | Dynamo graphs | Dynamo breaks |"
          " backend dynvm | backend eager | dynvm s | Dynamo s | top break reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        rows += 1
        try:
            model = vision_zoo.build(name)
            args = vision_zoo.inputs(name, model)
            expected = model(*args)
        except Exception as e:
            print(f"| {name} | - | eager failed: {_error(e)} |||||||||", flush=True)
            continue
        size = "x".join(map(str, vision_zoo.input_size(name, model)))
        dynvm.reset()
        try:
            ours, ours_s = compare.timed_explain(dynvm.explain, model, args)
            ours_cells = f"{ours.graph_count} | {ours.graph_break_count}"
        except Exception as e:
            ours, ours_s = None, 0.0
            ours_cells = f"FAILED {_error(e)} | -"
            traceback.print_exc()
        try:
            theirs, theirs_s = compare.dynamo_explain(model, args)
            theirs_cells = f"{theirs.graph_count} | {theirs.graph_break_count}"
        except Exception as e:
            theirs, theirs_s = None, 0.0
            theirs_cells = f"FAILED {_error(e)} | -"
        if ours is not None and (theirs is None or ours.graph_count <= theirs.graph_count):
            as_few.append(name)
        results = [_check_backend(model, args, expected, b) for b in BACKENDS]
        if all(ok for ok, _ in results):
            correct.append(name)
        top = ""
        if ours is not None:
            top = _top_reason(ours)
            for key in {compare.reason_key(b) for b in ours.break_reasons}:
                reasons[key] += 1
                example.setdefault(key, name)
        print(f"| {name} | {size} | {ours_cells} | {theirs_cells} | {results[0][1]} | "
              f"{results[1][1]} | {ours_s:.1f} | {theirs_s:.1f} | {top} |", flush=True)
        del model, expected
    print(f"\n{len(as_few)} of {rows} models in no more graphs than Dynamo; "
          f"{len(correct)} of {rows} give eager's results under both backends.")
    print("\nBreak reasons under dynvm, by the number of models that break for them:")
    for key, count in reasons.most_common(20):
        print(f"- {count} models: {key} (e.g. {example[key]})")


def main(argv):
    names = []
    for arg in argv or ["torchvision"]:
        if arg == "torchvision":
            names += vision_zoo.torchvision_names()
        elif arg == "timm":
            names += vision_zoo.timm_names()
        else:
            names.append(arg if "/" in arg else f"torchvision/{arg}")
    sweep(names)


if __name__ == "__main__":
    main(sys.argv[1:])
