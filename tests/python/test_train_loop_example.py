"""examples/train_loop.py: a training loop with graph breaks (.item() and print every
few steps, an early stop on a tensor comparison). `dynvm run` must print exactly what
python3 prints, and train() compiled with dynvm.compile must train exactly like eager:
same printed losses, parameters, gradients and optimizer state."""

import copy
import json
import importlib.util
import pathlib

import pytest
import torch

import dynvm
import test_cli_run as cli
from break_corpus._harness import assert_same, capture_output

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_loop.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("train_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _without_recompile_warning(stderr):
    lines = stderr.splitlines(keepends=True)
    kept, skip_next = [], False
    for line in lines:
        if skip_next:
            skip_next = False
            continue
        if "RuntimeWarning: dynvm:" in line and "cache_size_limit" in line:
            skip_next = True  # the warning's source line follows it
            continue
        kept.append(line)
    return "".join(kept)


@pytest.mark.parametrize("options, script_args", [
    ([], []),
    (["--backend", "eager"], []),
    (["--backend", "eager"], ["--optimizer", "adam", "--steps", "25"]),
], ids=["default-backend", "eager-backend", "eager-backend-adam"])
def test_dynvm_run_prints_what_python_prints(options, script_args):
    mine = cli.dynvm("run", *options, str(EXAMPLE), *script_args)
    theirs = cli.python(str(EXAMPLE), *script_args)
    assert theirs.returncode == 0, theirs.stderr
    script_stderr, report = cli.split_report(mine.stderr)
    assert mine.stdout == theirs.stdout
    # dynvm's own warning that a part of train() kept recompiling (the loop index is
    # guarded by value) is the one thing python3 does not print.
    assert _without_recompile_warning(script_stderr) == theirs.stderr
    assert mine.returncode == theirs.returncode
    assert "run report for train_loop.py" in report
    # The script really trains and logs: the comparison above is not of empty output.
    lines = theirs.stdout.splitlines()
    assert lines[0].startswith("training a 1249-parameter MLP")
    assert sum(line.startswith("step ") for line in lines) >= 4
    assert lines[-1].endswith("improved: True")


def _setup(example, optimizer_name):
    model = example.make_model()
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    return model, optimizer


@pytest.mark.skipif(not getattr(dynvm, "vm_available", lambda: False)(),
                    reason="the VM is not built yet")
@pytest.mark.parametrize("optimizer_name", ["sgd", "adam"])
def test_compiled_train_matches_eager(optimizer_name):
    dynvm.reset()
    example = _load_example()
    x, y = example.make_data()
    eager_model, eager_opt = _setup(example, optimizer_name)
    model, opt = copy.deepcopy((eager_model, eager_opt))
    compiled_train = dynvm.compile(example.train, backend="eager")
    # Three calls on the same model: the first traces, the second should hit the
    # cache, the third changes a Python argument (a guard fails) and stops early.
    calls = [dict(steps=12, log_every=4), dict(steps=12, log_every=4),
             dict(steps=40, log_every=3, target_loss=0.2)]
    for index, kwargs in enumerate(calls):
        with capture_output() as expected:
            expected_losses = example.train(eager_model, eager_opt, x, y, **kwargs)
        with capture_output() as actual:
            losses = compiled_train(model, opt, x, y, **kwargs)
        where = f"call {index}"
        assert actual["stdout"] == expected["stdout"], where
        assert expected["stdout"].count("step ") >= 2, where
        assert actual["logs"] == expected["logs"], where
        assert_same(losses, expected_losses, f"{where}: losses", atol=1e-5)
        assert_same(model, eager_model, f"{where}: model", atol=1e-5)
        assert_same(opt, eager_opt, f"{where}: optimizer", atol=1e-5)
    assert "reached the target loss" in expected["stdout"]


def _line_of(text):
    for number, line in enumerate(EXAMPLE.read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} is not in {EXAMPLE}")


def test_dynvm_run_report_lists_the_breaks_the_script_has(tmp_path):
    report_file = tmp_path / "report.json"
    result = cli.dynvm("run", "--report", "json", str(report_file), str(EXAMPLE),
                       "--steps", "12")
    assert result.returncode == 0, result.stderr
    report = json.loads(report_file.read_text())
    here = {b["lineno"] for b in report["graph_breaks"]
            if b["filename"] == str(EXAMPLE.resolve())}
    # backward() and .item() break the training step; print() after them; the loss
    # comparison branches on a tensor.
    for statement in ("loss.backward()", "value = loss.item()", 'print(f"step'):
        assert _line_of(statement) in here, (statement, sorted(here))
    assert report["frames_compiled"] >= 1 and report["graphs"], report
    assert all(g["ops"] > 0 for g in report["graphs"])


def test_quickstart_under_dynvm_run_reports_its_compiled_graph():
    quickstart = EXAMPLE.parent / "quickstart.py"
    mine = cli.dynvm("run", str(quickstart))
    theirs = cli.python(str(quickstart))
    assert theirs.returncode == 0, theirs.stderr
    assert mine.returncode == 0, mine.stderr
    script_stderr, report = cli.split_report(mine.stderr)

    def figures(stdout):
        lines = stdout.splitlines()
        checksum = [float(l.split(": ")[1]) for l in lines if l.startswith("logits checksum")]
        # Timings differ; and the two calls that "deterministic" compares are two call
        # sites, compiled into two graphs fused differently, so they round differently.
        rest = [l for l in lines
                if "checksum" not in l and " ms" not in l and "deterministic" not in l]
        return rest, checksum

    mine_rest, mine_sum = figures(mine.stdout)
    their_rest, their_sum = figures(theirs.stdout)
    assert mine_rest == their_rest
    # Fused kernels round differently from ATen's (float32): the sum of the logits
    # agrees to a relative 1e-5.
    assert len(mine_sum) == 1 and abs(mine_sum[0] - their_sum[0]) <= 1e-5 * abs(their_sum[0])
    assert "run report for quickstart.py" in report
    sizes = [int(line.split("graph of ")[1].split(" ops")[0])
             for line in report.splitlines() if "graph of " in line]
    assert sizes and max(sizes) >= 50, report  # ResNet-18's forward, one graph
