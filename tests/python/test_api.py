"""The dynvm Python API: compile, explain, reset, disable and the DYNVM_* variables."""

import inspect
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import dynvm
from conftest import codegen_built, needs_codegen
from dynvm import config, stats

MISSING_VM = "the bytecode VM (vm/)"
MISSING_CODEGEN = "code generation (codegen/)"


def run_python(code, **env_vars):
    """Runs `code` in a fresh Python with the DYNVM_* variables given; returns the result."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNVM_")}
    env.update(env_vars)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def add(x, y):
    """Adds."""
    return x + y


# --- the package -------------------------------------------------------------------------


def test_version_comes_from_the_build():
    assert dynvm.__version__ == dynvm._native.core().__version__
    build_dir = os.environ.get("DYNVM_BUILD_DIR")
    if not build_dir:
        pytest.fail("DYNVM_BUILD_DIR must name the build directory (CTest sets it)")
    header = (pathlib.Path(build_dir) / "generated" / "dynvm" / "version.h").read_text()
    assert f'#define DYNVM_VERSION_STRING "{dynvm.__version__}"' in header


def test_built_against_the_torch_it_runs_with():
    import torch

    from dynvm import _version

    assert _version.TORCH_VERSION == torch.__version__
    assert dynvm._native.core() is not None


def test_another_torch_is_refused_with_a_clear_error():
    result = run_python(
        "import torch; torch.__version__ = '0.0.1'\n"
        "import dynvm\n"
        "try:\n"
        "    dynvm.reset()\n"
        "except ImportError as e:\n"
        "    print(e)\n")
    assert result.returncode == 0, result.stderr
    assert "built against torch" in result.stdout and "torch 0.0.1" in result.stdout


def test_import_does_not_import_torch():
    result = run_python("import sys, dynvm; print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "False\n"


def test_public_names():
    for name in ("compile", "explain", "reset", "disable", "__version__"):
        assert name in dynvm.__all__
        assert hasattr(dynvm, name)


# --- compile -----------------------------------------------------------------------------


def test_compile_signature_is_torch_compiles():
    parameters = inspect.signature(dynvm.compile).parameters
    assert list(parameters) == ["fn_or_module", "backend", "mode", "fullgraph", "dynamic"]
    kinds = {name: p.kind for name, p in parameters.items()}
    assert kinds["fn_or_module"] == inspect.Parameter.POSITIONAL_OR_KEYWORD
    for name in ("backend", "mode", "fullgraph", "dynamic"):
        assert kinds[name] == inspect.Parameter.KEYWORD_ONLY
    defaults = {name: p.default for name, p in parameters.items()}
    assert defaults == {
        "fn_or_module": None,
        "backend": "dynvm",
        "mode": "default",
        "fullgraph": False,
        "dynamic": None,
    }


def test_a_build_without_codegen_names_what_is_missing(monkeypatch):
    from dynvm import backends

    monkeypatch.setitem(backends._BUILT, "codegen", False)
    reason = backends.unavailable_reason("dynvm", load=False)
    assert "backend 'dynvm'" in reason
    assert MISSING_CODEGEN in reason and MISSING_VM not in reason
    assert backends.unavailable_reason("eager", load=False) is None


@needs_codegen
def test_the_default_backend_compiles_and_gives_the_eager_result(torch):
    calls = []

    def body(x):
        calls.append(x)
        return torch.tanh(x) * 2 + 1

    dynvm.reset()
    compiled = dynvm.compile(body)
    x = torch.randn(64)
    assert torch.allclose(compiled(x), torch.tanh(x) * 2 + 1, atol=1e-6)
    assert calls == [x]  # the traced run appended once, as eager does
    assert dynvm.counters["kernels"] >= 1  # one fused kernel


def test_eager_backend_runs_the_captured_graph(torch):
    dynvm.reset()
    x, y = torch.randn(3), torch.randn(3)
    assert torch.equal(dynvm.compile(add, backend="eager")(x, y), x + y)
    assert dynvm.counters["frames_traced"] == 1
    assert dynvm.compile(add, backend="eager")(1, 2) == 3


@needs_codegen
def test_decorator_without_arguments():
    @dynvm.compile
    def double(x):
        """Doubles."""
        return 2 * x

    assert callable(double)
    assert double.__name__ == "double"
    assert double.__doc__ == "Doubles."
    assert double.__wrapped__(4) == 8  # the original is reachable and untouched
    assert double.options.backend == "dynvm"
    assert double(4) == 8


@pytest.mark.parametrize(
    "kwargs, backend, mode",
    [
        ({}, "dynvm", "default"),
        ({"backend": "eager"}, "eager", "default"),
        ({"mode": "default", "fullgraph": True, "dynamic": False}, "dynvm", "default"),
    ],
)
def test_decorator_with_arguments(kwargs, backend, mode):
    @dynvm.compile(**kwargs)
    def triple(x):
        return 3 * x

    assert triple.__name__ == "triple"
    assert triple.options.backend == backend
    assert triple.options.mode == mode
    assert triple.options.fullgraph == kwargs.get("fullgraph", False)
    if backend == "dynvm" and not codegen_built():
        pytest.skip("this build has no CPU code generator")
    assert triple(1) == 3


def test_dynamic_is_kept_in_the_options():
    # What each value does is tested in test_dynamic_shapes.py.
    assert dynvm.compile(lambda x: x, dynamic=True).options.dynamic is True
    assert dynvm.compile(lambda x: x, dynamic=False).options.dynamic is False
    assert dynvm.compile(lambda x: x).options.dynamic is None


def test_max_autotune_compiles_and_runs():
    # CUDA kernels are tuned under it (tests/python/test_cuda_kernels.py); CPU kernels have
    # one schedule, so on CPU tensors it runs as mode="default" does.
    import torch

    @dynvm.compile(mode="max-autotune")
    def f(x):
        return torch.softmax(x * 2, -1) + 1

    assert f.options.mode == "max-autotune"
    x = torch.randn(4, 64)
    torch.testing.assert_close(f(x), torch.softmax(x * 2, -1) + 1)
    torch.testing.assert_close(f(x), torch.softmax(x * 2, -1) + 1)
    assert dynvm.counters["graph_failures"] == 0


@pytest.mark.parametrize("backend", ["eager", "dynvm"])
def test_reduce_overhead_on_cpu_tensors_runs_and_says_why_no_cuda_graph(backend):
    # CUDA graphs are for CUDA tensors: a CPU graph runs as in mode="default", and explain
    # says why it is not recorded.
    import torch

    if backend == "dynvm" and not codegen_built():
        pytest.skip("this build has no CPU code generator")

    def f(x, y):
        return torch.relu(x * y + 1).sum(0)

    x, y = torch.randn(4, 5), torch.randn(4, 5)
    dynvm.reset()
    compiled = dynvm.compile(f, backend=backend, mode="reduce-overhead")
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), f(x, y))
    report = dynvm.explain(compiled)(x, y)
    assert len(report.cuda_graphs) == 1
    if backend == "eager":
        assert report.cuda_graphs[0] == "not a CUDA graph: backend 'eager' runs the graph op by op"
    else:
        assert report.cuda_graphs[0] == "not a CUDA graph: its tensors are not all on one CUDA device"
    assert f"graph 0: {report.cuda_graphs[0]}" in str(report)
    # mode="default" says nothing about CUDA graphs.
    assert dynvm.explain(dynvm.compile(f, backend=backend))(x, y).cuda_graphs == []


def test_dynvm_logs_cudagraphs_says_why_a_graph_is_not_recorded():
    result = run_python(
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x: x * 2 + 1, backend='eager', mode='reduce-overhead')\n"
        "print(f(torch.ones(3)).tolist())\n",
        DYNVM_LOGS="cudagraphs",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[3.0, 3.0, 3.0]\n"
    assert ": not a CUDA graph: backend 'eager' runs the graph op by op\n" in result.stderr


def test_compiled_method_binds_like_a_function():
    class Scaler:
        @dynvm.compile(backend="eager")
        def scale(self, x):
            return x

    # Binding works: self is passed like a plain method's.
    scaler = Scaler()
    assert scaler.scale(2) == 2


def test_compiling_again_replaces_the_options():
    once = dynvm.compile(add, backend="eager")
    twice = dynvm.compile(once, backend="dynvm")
    assert twice.__wrapped__ is add
    assert twice.options.backend == "dynvm"


def test_unknown_backend_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'inductor'.*'eager', 'dynvm'"):
        dynvm.compile(add, backend="inductor")
    with pytest.raises(ValueError, match="unknown backend"):
        dynvm.compile(backend="inductor")  # decorator form validates at once
    with pytest.raises(TypeError, match="backend must be a backend name"):
        dynvm.compile(add, backend=lambda gm, inputs: gm)


def test_unknown_mode_names_the_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown mode 'fast'.*'default', 'reduce-overhead', 'max-autotune'",
    ):
        dynvm.compile(add, mode="fast")


def test_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="dynvm.compile expects a function or an nn.Module"):
        dynvm.compile(42)
    with pytest.raises(TypeError, match="got str"):
        dynvm.compile(backend="eager")("not a function")


def test_flag_arguments_are_checked():
    with pytest.raises(TypeError, match="fullgraph"):
        dynvm.compile(add, fullgraph="yes")
    with pytest.raises(TypeError, match="dynamic"):
        dynvm.compile(add, dynamic="sometimes")


# --- modules -----------------------------------------------------------------------------


@pytest.fixture()
def torch():
    return pytest.importorskip("torch")


def make_module(torch):
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 4)
            self.factor = 2.5

        def forward(self, x):
            return self.linear(x) * self.factor

        def describe(self):
            return f"scale by {self.factor}"

    return Scale()


def test_compiled_module_forwards_attributes_to_the_original(torch):
    original = make_module(torch)
    compiled = dynvm.compile(original)
    assert isinstance(compiled, torch.nn.Module)
    assert compiled is not original
    assert compiled._orig_mod is original
    assert compiled.factor == 2.5
    assert compiled.linear is original.linear
    assert compiled.describe() == "scale by 2.5"
    original.factor = 4.0
    assert compiled.factor == 4.0
    params = {id(p) for p in compiled.parameters()}
    assert params == {id(p) for p in original.parameters()}
    with pytest.raises(AttributeError):
        compiled.no_such_attribute  # noqa: B018


def test_compiled_module_train_and_eval_reach_the_original(torch):
    original = make_module(torch)
    compiled = dynvm.compile(original)
    compiled.eval()
    assert original.training is False
    compiled.train()
    assert original.training is True


@needs_codegen
def test_calling_a_compiled_module_gives_the_original_result(torch):
    original = make_module(torch)
    compiled = dynvm.compile(original, backend="eager")
    x = torch.ones(2, 3)
    assert torch.equal(compiled(x), original(x))
    assert torch.equal(compiled.forward(x), original(x))
    assert torch.allclose(dynvm.compile(original)(x), original(x), atol=1e-6)


def test_compiling_a_compiled_module_wraps_the_original(torch):
    original = make_module(torch)
    again = dynvm.compile(dynvm.compile(original), backend="eager")
    assert again._orig_mod is original


# --- explain -----------------------------------------------------------------------------


def test_explain_reports_the_graph(torch):
    explained = dynvm.explain(add)
    assert callable(explained)
    report = explained(torch.ones(2), y=torch.ones(2))
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.ops_per_graph == [["aten::add.Tensor"]]
    assert any("TENSOR_MATCH L['y']" in g for g in report.guards)


def test_explain_rejects_non_callables():
    with pytest.raises(TypeError, match="dynvm.explain expects"):
        dynvm.explain(None)


# --- disable -----------------------------------------------------------------------------


def test_disabled_function_runs_plainly_and_is_never_compiled():
    plain = dynvm.disable(add)
    assert plain(2, 3) == 5
    assert plain.__name__ == "add"
    compiled = dynvm.compile(plain)
    assert compiled is plain
    assert compiled(2, 3) == 5


def test_disable_as_a_decorator():
    @dynvm.disable
    def one():
        return 1

    @dynvm.disable()
    def two():
        return 2

    assert dynvm.compile(one)() == 1
    assert dynvm.compile(backend="eager")(two)() == 2


def test_explain_of_a_disabled_function_reports_nothing():
    output = dynvm.explain(dynvm.disable(add))(1, 2)
    assert output.graph_count == 0
    assert output.graph_break_count == 0
    assert output.break_reasons == []
    assert output.ops_per_graph == []
    assert output.guards == []
    assert "dynvm.disable" in output.note


def test_disabled_module_is_never_compiled(torch):
    module = dynvm.disable(make_module(torch))
    assert dynvm.compile(module) is module
    assert module(torch.ones(1, 3)).shape == (1, 4)


def test_disable_rejects_non_callables():
    with pytest.raises(TypeError, match="dynvm.disable expects"):
        dynvm.disable(3)


def test_dynvm_disable_returns_functions_and_modules_unchanged():
    result = run_python(
        """
        import dynvm, torch

        def f(x):
            return x + 1

        assert dynvm.compile(f) is f
        assert dynvm.compile(backend="eager")(f) is f
        module = torch.nn.Linear(2, 2)
        assert dynvm.compile(module) is module
        print(dynvm.compile(f)(41))
        out = dynvm.explain(f)(1)
        print(out.graph_count, out.graph_break_count, out.break_reasons, out.ops_per_graph,
              out.guards)
        print(out.note)
        """,
        DYNVM_DISABLE="1",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "42"
    assert lines[1] == "0 0 [] [] []"
    assert "DYNVM_DISABLE" in lines[2]


@needs_codegen
def test_dynvm_disable_off_still_compiles():
    result = run_python(
        """
        import torch, dynvm
        f = dynvm.compile(lambda x: x * 2 + 1)
        f(torch.ones(3))
        print("traced", dynvm.counters["frames_traced"])
        """,
        DYNVM_DISABLE="0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "traced 1\n"


def test_dynvm_disable_with_a_bad_value_fails_at_import():
    result = run_python("import dynvm", DYNVM_DISABLE="perhaps")
    assert result.returncode == 1
    assert "ValueError: DYNVM_DISABLE: cannot read 'perhaps'" in result.stderr


# --- DYNVM_LOGS --------------------------------------------------------------------------


def test_dynvm_logs_are_parsed():
    result = run_python(
        "import dynvm.config as c; print(sorted(c.enabled_logs()))",
        DYNVM_LOGS=" graph, guards ,,perf",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['graph', 'guards', 'perf']\n"


def test_unknown_dynvm_logs_name_fails_at_import_listing_valid_names():
    result = run_python("import dynvm", DYNVM_LOGS="graph,kernel")
    assert result.returncode == 1
    assert (
        "ValueError: DYNVM_LOGS: unknown log name 'kernel'; "
        "valid names: graph, guards, breaks, recompiles, kernels, loops, glue, perf"
    ) in result.stderr


def test_every_documented_log_name_is_valid():
    names = "graph,guards,breaks,recompiles,kernels,loops,glue,perf"
    assert config.parse_logs(names) == frozenset(names.split(","))
    assert config.parse_logs("") == frozenset()
    with pytest.raises(ValueError, match="unknown log name 'all'"):
        config.parse_logs("all")


# --- DYNVM_CACHE_DIR ---------------------------------------------------------------------

_CACHED_PROGRAM = """
import json, torch, dynvm
from dynvm import _native
def f(x):
    return torch.sin(x) * 2 + 1
def g(x):
    return torch.cos(x).sum(-1)
torch.manual_seed(0)
x = torch.randn(8, 5)
# Sums of fast cos may differ from eager's by a few float32 ulps of the terms: an absolute
# tolerance, since a sum can come out near zero (unseeded inputs failed about 1 run in 300).
assert torch.allclose(dynvm.compile(f)(x), f(x), atol=1e-6)
assert torch.allclose(dynvm.compile(g)(x), g(x), atol=1e-6)
report = _native.core().run_report()
print(json.dumps([report["kernels_compiled"], report["kernels_from_disk"]]))
"""


@needs_codegen
def test_a_shared_kernel_cache_directory_is_refused_once_and_compiling_goes_on(tmp_path):
    shared = tmp_path / "shared"
    (shared / "kernels").mkdir(parents=True)
    (shared / "kernels").chmod(0o777)
    result = run_python(_CACHED_PROGRAM, DYNVM_CACHE_DIR=str(shared))
    assert result.returncode == 0, result.stderr
    compiled, from_disk = json.loads(result.stdout)
    assert compiled >= 2 and from_disk == 0  # two kernels compiled, one warning for the dir
    warnings = [line for line in result.stderr.splitlines() if "kernel cache" in line]
    assert len(warnings) == 1, result.stderr
    assert "writable by others" in warnings[0] and str(shared) in warnings[0]
    assert list((shared / "kernels").iterdir()) == []


@needs_codegen
def test_the_kernel_cache_is_created_private_and_serves_a_second_process(tmp_path):
    cache = tmp_path / "new" / "cache"
    counts = []
    for _ in range(2):
        result = run_python(_CACHED_PROGRAM, DYNVM_CACHE_DIR=str(cache))
        assert result.returncode == 0, result.stderr
        assert "kernel cache" not in result.stderr
        counts.append(json.loads(result.stdout))
    (compiled, _), (compiled_again, from_disk) = counts
    assert compiled >= 2 and compiled_again == 0 and from_disk == compiled, counts
    for directory in (tmp_path / "new", cache, cache / "kernels"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    entries = sorted((cache / "kernels").iterdir())
    assert len(entries) == compiled and all(e.stat().st_mode & 0o077 == 0 for e in entries)
    # Damaged entries are compiled again and rewritten, not loaded.
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    result = run_python(_CACHED_PROGRAM, DYNVM_CACHE_DIR=str(cache))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [compiled, 0]
    assert sorted((cache / "kernels").iterdir()) == entries
    assert all(e.read_bytes()[:8] == b"DYNVMK1\n" for e in entries)


# --- reset -------------------------------------------------------------------------------


def test_reset_clears_the_counters():
    counters = stats.current()
    counters.frames_compiled = 3
    counters.cache_hits = 7
    counters.graphs.append({"name": "g0"})
    counters.graph_breaks.append({"reason": "r", "filename": "f.py", "lineno": 1})
    counters.time_tracing_s = 1.5
    assert dynvm.reset() is None
    assert stats.current() is counters  # cleared in place
    assert counters == stats.CompileStats()


@needs_codegen
def test_compiled_functions_behave_the_same_after_reset():
    compiled = dynvm.compile(add)
    assert compiled(1, 2) == 3
    dynvm.reset()
    assert compiled(1, 2) == 3


def test_many_compiled_modules_each_keep_their_own_variants():
    # The module wrapper's code object used to be shared by every compiled module, so the
    # ninth one compiled hit cache_size_limit and ran eagerly with a warning.
    import warnings

    import torch

    modules = [torch.nn.Linear(4, 4) for _ in range(12)]
    compiled = [dynvm.compile(m, backend="eager") for m in modules]
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.no_grad():
            for c, m in zip(compiled, modules):
                for _ in range(2):
                    assert torch.allclose(c(x), m(x))
    assert dynvm.counters["frames_traced"] == 12
    assert dynvm.counters["recompiles"] == 0
    assert dynvm.counters["eager_calls"] == 0
    assert "Linear.__call__" in repr(compiled[0]._compiled_call)
