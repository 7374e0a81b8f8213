"""The runtime's frame hook: which frames it takes, threads, recursion, re-entrancy, an
active tracer, the cache limit and its warning, the recompile log, and `dynvm run`'s
--include/--exclude filters and report."""

import json
import shutil
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import dynvm
import test_cli_run as cli


@pytest.fixture(autouse=True)
def _fresh():
    dynvm.reset()
    yield
    dynvm.reset()


def _graphs():
    return dynvm._native.core().run_report()["graphs"]


def _break_then_more(x):
    y = x * 2
    print("dynvm-hook-test")
    return y + 1


def test_a_break_gives_two_graphs_and_the_eager_result(capsys):
    compiled = dynvm.compile(_break_then_more, backend="eager")
    x = torch.randn(5)
    for _ in range(3):
        assert torch.equal(compiled(x), _break_then_more(x))
    graphs = _graphs()
    assert len(graphs) == 2, graphs  # traced once each, then cache hits
    assert [g["ops"] for g in graphs] == [1, 1]
    assert capsys.readouterr().out == "dynvm-hook-test\n" * 6
    assert dynvm._native.core().run_report()["cache_hits"] >= 4


def test_an_active_tracer_makes_the_hook_step_aside():
    compiled = dynvm.compile(_break_then_more, backend="eager")
    x = torch.randn(5)
    calls = []

    def tracer(frame, event, arg):
        calls.append(event)
        return None

    sys.settrace(tracer)
    try:
        result = compiled(x)
    finally:
        sys.settrace(None)
    assert torch.equal(result, _break_then_more(x))
    assert _graphs() == []  # nothing was traced while a tracer was on
    assert "call" in calls  # and the tracer saw the function's frame


def _helper(x):
    return x.sin() * 3


def _calls_helper_eagerly(x):
    y = x + 1
    print("between")
    return _helper(y)  # runs after the break: its own frame, compiled by the hook


def test_callees_of_the_eager_part_are_compiled_too(capsys):
    compiled = dynvm.compile(_calls_helper_eagerly, backend="eager")
    x = torch.randn(4)
    assert torch.allclose(compiled(x), _calls_helper_eagerly(x))
    functions = {g["function"].split(" ")[0] for g in _graphs()}
    assert "_calls_helper_eagerly" in functions


def _recursive(x, n):
    if n == 0:
        return x
    print("depth", n)
    return _recursive(x * 2, n - 1) + 1


def test_recursion_through_breaks(capsys):
    compiled = dynvm.compile(_recursive, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x, 3), _recursive(x, 3))
    out = capsys.readouterr().out
    assert out.count("depth 3") == 2 and out.count("depth 1") == 2


def _uses_compiled_inside(x):
    inner = dynvm.compile(_break_then_more, backend="eager")
    return inner(x * 3) - 1


def test_a_compiled_function_calling_a_compiled_function(capsys):
    compiled = dynvm.compile(_uses_compiled_inside, backend="eager")
    x = torch.randn(4)
    assert torch.equal(compiled(x), _uses_compiled_inside(x))


def test_threads_each_get_the_eager_result(capsys):
    compiled = dynvm.compile(_break_then_more, backend="eager")
    inputs = [torch.randn(6) for _ in range(8)]
    results = [None] * len(inputs)
    errors = []

    def work(i):
        try:
            for _ in range(20):
                results[i] = compiled(inputs[i])
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for x, r in zip(inputs, results):
        assert torch.equal(r, _break_then_more(x))


def _generator_user(x):
    def gen():
        for i in range(3):
            yield x * i

    total = x * 0
    for t in gen():
        total = total + t
    return total


def test_generator_frames_are_left_to_cpython():
    compiled = dynvm.compile(_generator_user, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x), _generator_user(x))


def _scale(x):
    return x * 2 + 1


def test_cache_limit_warns_once_naming_the_function_and_guard():
    # dynamic=False: sizes are guarded exactly, so a new shape each call is a new variant
    # (under the default, the second size would make the dimension symbolic).
    compiled = dynvm.compile(_scale, backend="eager", dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 13):
            x = torch.randn(n)
            assert torch.equal(compiled(x), _scale(x))
    ours = [w for w in caught if "cache_size_limit" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    message = str(ours[0].message)
    assert "_scale" in message and "L['x']" in message


def _branch_on_int(x, k):
    if k % 2 == 0:
        return x + k
    return x - k


def test_a_changing_int_stops_being_specialised():
    # After its value changes once, k is traced as an opaque int: the arithmetic and the
    # branch on it run eagerly at graph breaks, and no more variants are made per value.
    compiled = dynvm.compile(_branch_on_int, backend="eager")
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(20):
            assert torch.equal(compiled(x, k), _branch_on_int(x, k))
    assert not [w for w in caught if "cache_size_limit" in str(w.message)]
    assert dynvm.counters["recompiles"] <= 6, dynvm.counters["recompiles"]


def test_reset_forgets_which_ints_changed():
    # dynvm.reset() cleared a code object's variants but not the record of its numbers that
    # had changed, so after a reset k stayed opaque: the branch on it was a graph break.
    compiled = dynvm.compile(_branch_on_int, backend="eager")
    x = torch.randn(3)
    for k in range(3):
        assert torch.equal(compiled(x, k), _branch_on_int(x, k))
    assert dynvm.explain(_branch_on_int)(x, 4).graph_break_count >= 1
    dynvm.reset()
    report = dynvm.explain(_branch_on_int)(x, 4)
    assert report.graph_break_count == 0, str(report)
    assert torch.equal(compiled(x, 5), _branch_on_int(x, 5))


def test_recompiles_log_names_the_failing_guard(tmp_path):
    script = tmp_path / "recompile.py"
    script.write_text(
        "import torch, dynvm\n"
        "def f(x, k):\n"
        "    return x * k\n"
        "c = dynvm.compile(f, backend='eager')\n"
        "c(torch.ones(2), 2)\n"
        "c(torch.ones(2), 3)\n"
    )
    env = cli.base_env(cli.package_dir())
    env["DYNVM_LOGS"] = "recompiles"
    result = subprocess.run([cli.PYTHON, str(script)], env=env, capture_output=True, text=True,
                            timeout=cli.TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert "dynvm: recompiling f" in result.stderr
    assert "L['k'] == 2" in result.stderr, result.stderr


def _write_filter_scripts(tmp_path):
    lib = tmp_path / "mylib.py"
    lib.write_text(
        "import torch\n"
        "def work(x):\n"
        "    return (x + 1) * 2\n"
    )
    main = tmp_path / "main.py"
    main.write_text(
        "import torch\n"
        "import mylib\n"
        "def step(x):\n"
        "    return x.relu() - 1\n"
        "def main():\n"  # a generator: left to CPython, so step and work are frames
        "    x = torch.ones(4)\n"
        "    for _ in range(3):\n"
        "        y = mylib.work(step(x))\n"
        "        yield\n"
        "    print(float(y.sum()))\n"
        "def finish(y):\n"
        "    return float(y.sum())\n"
        "for _ in main():\n"
        "    pass\n"
        "print(finish(torch.ones(2)))\n"
    )
    return main


def _run_report(tmp_path, *options):
    main = _write_filter_scripts(tmp_path)
    report_file = tmp_path / "report.json"
    result = cli.dynvm("run", "--backend", "eager", "--report", "json", str(report_file),
                       *options, str(main), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "8.0\n2.0\n"  # (relu(1) - 1 + 1) * 2, four times
    return json.loads(report_file.read_text())


def test_dynvm_run_compiles_user_frames_and_reports_them(tmp_path):
    report = _run_report(tmp_path)
    functions = {g["function"].split(" ")[0] for g in report["graphs"]}
    assert {"step", "work"} <= functions, report["graphs"]
    assert report["cache_hits"] >= 4
    breaks = {(b["filename"].rsplit("/", 1)[-1], b["lineno"]) for b in report["graph_breaks"]}
    assert ("main.py", 12) in breaks, report["graph_breaks"]  # float(tensor) in finish()


def test_dynvm_run_reduce_overhead_reports_what_became_of_each_graph(tmp_path):
    # CPU graphs are not recorded: the mode passes through to the runtime, which says why.
    report = _run_report(tmp_path, "--mode", "reduce-overhead")
    assert report["mode"] == "reduce-overhead"
    notes = {(e["graph"].split(" ")[0], e["note"]) for e in report["cuda_graphs"]}
    assert ("step", "not a CUDA graph: backend 'eager' runs the graph op by op") in notes, notes
    assert _run_report(tmp_path)["cuda_graphs"] == []


def test_dynvm_run_exclude_glob_leaves_a_file_to_cpython(tmp_path):
    report = _run_report(tmp_path, "--exclude", "*/mylib.py")
    functions = {g["function"].split(" ")[0] for g in report["graphs"]}
    assert "work" not in functions and "step" in functions, report["graphs"]


def test_dynvm_run_graphs_writes_graphviz_with_fused_clusters(tmp_path):
    from conftest import codegen_built

    script = tmp_path / "attention_scores.py"
    script.write_text(
        "import torch\n"
        "def scores(x, w):\n"
        "    return torch.softmax(x @ w * 0.125, -1).relu()\n"
        "def main():\n"
        "    with torch.no_grad():\n"
        "        return scores(torch.ones(8, 8), torch.ones(8, 8))\n"
        "print(float(main().sum()))\n"
    )
    graphs = tmp_path / "graphs"
    result = cli.dynvm("run", "--graphs", str(graphs), "--report", "none", str(script),
                       cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "8.0\n"
    dots = sorted(graphs.glob("*-main.dot"))  # scores() is inlined into main()
    assert dots, list(graphs.iterdir())
    text = dots[0].read_text()
    assert text.startswith("digraph")
    assert "extern aten::mm" in text  # the matmul stays an ATen call
    if codegen_built():
        assert "subgraph cluster" in text  # the scaled softmax and relu: one fused group
        assert ": cpu kernel fused_" in text  # the group says which target compiled it
    if shutil.which("dot"):
        assert dots[0].with_suffix(".svg").exists()


def test_the_cache_size_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("DYNVM_CACHE_SIZE_LIMIT", "2")
    compiled = dynvm.compile(_scale, backend="eager", dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 6):
            x = torch.randn(n)
            assert torch.equal(compiled(x), _scale(x))
    ours = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    assert len(ours) == 1 and "recompiled 2 times" in ours[0], ours
    monkeypatch.setenv("DYNVM_CACHE_SIZE_LIMIT", "lots")
    with pytest.raises(ValueError, match="DYNVM_CACHE_SIZE_LIMIT"):
        dynvm.compile(_scale, backend="eager")(torch.randn(1))


@pytest.fixture
def installed_module():
    """A module written into an installed-package directory of this Python (as transformers
    is), imported, and removed afterwards."""
    import importlib
    import os

    directories = [d for d in dynvm._native.installed_package_directories()
                   if os.path.isdir(d) and os.access(d, os.W_OK)]
    if not directories:
        pytest.skip("no writable installed-package directory")
    name = f"_dynvm_installed_test_{os.getpid()}"
    path = os.path.join(directories[0], name + ".py")
    with open(path, "w") as f:
        f.write("def library_layer(x):\n"
                "    y = x * 2\n"
                "    print('library break')\n"
                "    return y + 1\n")
    try:
        importlib.invalidate_caches()
        yield importlib.import_module(name)
    finally:
        sys.modules.pop(name, None)
        os.remove(path)


def test_callees_in_installed_packages_are_compiled_below_a_compiled_function(
        installed_module, capsys):
    # Under dynvm.compile(model), what the model calls is the model: a library frame the
    # eager part calls (here after a break) is compiled, as Dynamo does, not left to CPython.
    def model(x):
        h = x - 1
        print("user break")
        return installed_module.library_layer(h)

    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(4)
    for _ in range(2):
        assert torch.equal(compiled(x), model(x))
    functions = {g["function"].split(" ")[0] for g in _graphs()}
    assert "library_layer" in functions, _graphs()


def test_dynvm_run_leaves_installed_packages_to_cpython(installed_module, tmp_path):
    script = tmp_path / "main.py"
    script.write_text(f"import torch, {installed_module.__name__} as lib\n"
                      "def step(x):\n"
                      "    return lib.library_layer(x) * 3\n"
                      "for _ in range(3):\n"
                      "    step(torch.ones(2))\n")
    report_file = tmp_path / "r.json"
    result = cli.dynvm("run", "--backend", "eager", "--report", "json", str(report_file),
                       str(script), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    functions = {g["function"].split(" ")[0] for g in json.loads(report_file.read_text())["graphs"]}
    assert "step" in functions and "library_layer" not in functions, functions
