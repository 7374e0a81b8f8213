"""`warnings.warn` inside traced code (vm/warning_calls.cpp): a call with constant arguments
whose stacklevel names a frame the trace runs is made after the graph, in the order of the
other side effects, as warn would have made it there (file, line, module and registry of
that frame), instead of breaking the graph where warn reads its caller's frame. What the
filters make of it is guarded (WARNING_FILTERS): an error is raised where eager raises
it, an ignored warning leaves nothing to run. Each case compares the warnings shown and
the results with eager's."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import dynvm

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")


class Holder:
    step = 0


HOLDER = Holder()


def warns_deprecation(x):
    y = x.sin() * 2
    warnings.warn("old api", DeprecationWarning)
    return y + 1


def _deprecated_scale(t):
    warnings.warn("_deprecated_scale is deprecated", FutureWarning, stacklevel=2)
    return t * 3


def warns_from_helper(x):
    y = _deprecated_scale(x.abs())
    return y - x


def warns_with_keywords(x):
    y = x.cos()
    warnings.warn(message=f"reduced {x.dim()} dims", category=UserWarning, stacklevel=1)
    warnings.warn("no category")
    return y.sum(0)


def warns_between_writes(x):
    HOLDER.step = 1
    warnings.warn("after the first write")
    HOLDER.step = 2
    warnings.warn("after the second write", RuntimeWarning)
    return x * 3


CASES = {f.__name__: f for f in
         (warns_deprecation, warns_from_helper, warns_with_keywords, warns_between_writes)}


def _clear_registries():
    globals().pop("__warningregistry__", None)


def _run(fn, action, calls, compiled):
    """The warnings each call shows, as (message, category, file, line, HOLDER.step when
    shown), and the results, under a fresh filter state with `action` for every warning."""
    shown, results = [], []
    _clear_registries()
    target = dynvm.compile(fn) if compiled else fn

    def record(message, category, filename, lineno, file=None, line=None):
        shown[-1].append((str(message), category, filename, lineno, HOLDER.step))

    with warnings.catch_warnings():
        warnings.simplefilter(action)
        warnings.showwarning = record
        for i in range(calls):
            HOLDER.step = 0
            shown.append([])
            results.append(target(torch.full((3,), float(i + 1))))
    return shown, results


@pytest.mark.parametrize("action", ["always", "default", "once", "module"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_warnings_are_made_after_the_graph_as_eager_makes_them(name, action):
    fn = CASES[name]
    want_shown, want = _run(fn, action, 3, compiled=False)
    dynvm.reset()
    got_shown, got = _run(fn, action, 3, compiled=True)
    assert got_shown == want_shown
    assert any(want_shown)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = dynvm.explain(fn)(torch.ones(3))
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons


def test_the_registry_is_the_module_s_as_warn_keeps_it():
    # Under "default" a warning shows once per place: a compiled call after an eager one
    # at the same place shows nothing, as a second eager call would.
    _clear_registries()
    compiled = dynvm.compile(warns_deprecation)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warns_deprecation(torch.ones(3))
        compiled(torch.ones(3))
        compiled(torch.ones(3))
    assert [str(w.message) for w in caught] == ["old api"]
    assert "__warningregistry__" in globals()


def mutates_around_a_warning(x):
    x.add_(1)
    warnings.warn("halfway", UserWarning)
    x.mul_(2)
    return x.sum()


def _raised(fn, x):
    with pytest.raises(UserWarning, match="halfway"):
        fn(x)
    return x


def test_an_error_filter_raises_where_eager_raises():
    want = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _raised(mutates_around_a_warning, want)
    dynvm.reset()
    compiled = dynvm.compile(mutates_around_a_warning)
    # First compiled under "always": the warning is deferred and the guard keeps the state.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.ones(3)
        compiled(x)
    assert [str(w.message) for w in caught] == ["halfway"]
    torch.testing.assert_close(x, torch.full((3,), 4.0))
    # Made an error later, the call raises before the write after it, as eager does.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _raised(compiled, torch.ones(3))
        torch.testing.assert_close(got, want)
        got = _raised(compiled, torch.ones(3))
        torch.testing.assert_close(got, want)


def test_an_ignored_warning_leaves_nothing_to_run_while_it_stays_ignored():
    compiled = dynvm.compile(warns_deprecation)
    dynvm.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        compiled(torch.ones(3))
        compiled(torch.ones(3))
        warnings.simplefilter("always", DeprecationWarning)
        compiled(torch.ones(3))
    assert [str(w.message) for w in caught] == ["old api"]


def warns_for_its_caller(x):
    warnings.warn("about the caller", UserWarning, stacklevel=2)
    return x + 1


def test_a_stacklevel_past_the_traced_frames_breaks_and_names_the_caller():
    # The frame at stacklevel 2 is the compiled function's caller, which the trace does
    # not run: the call breaks the graph and warn finds that frame itself.
    def places(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(torch.ones(2))
        return [(str(w.message), w.filename, w.lineno) for w in caught]

    want = places(warns_for_its_caller)
    assert [(m, f) for m, f, _ in want] == [("about the caller", __file__)]
    assert places(dynvm.compile(warns_for_its_caller)) == want
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        report = dynvm.explain(warns_for_its_caller)(torch.ones(2))
    assert report.graph_break_count >= 1


def test_a_tensor_message_is_not_deferred():
    def warns_a_value(x):
        warnings.warn(str(x.sum()))
        return x + 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dynvm.compile(warns_a_value)(torch.ones(2))
    assert [str(w.message) for w in caught] == ["tensor(2.)"]


def test_the_filters_guard_says_what_changed():
    code = (
        "import sys, warnings, torch, dynvm\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_warning_calls import warns_deprecation\n"
        "warnings.simplefilter('ignore')\n"
        "c = dynvm.compile(warns_deprecation)\n"
        "c(torch.ones(3))\n"
        "warnings.filterwarnings('ignore', message='unrelated')\n"
        "c(torch.ones(3))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "DYNVM_LOGS": "recompiles"})
    assert result.returncode == 0, result.stderr
    assert "WARNING_FILTERS" in result.stderr and "warnings.filters changed" in result.stderr, \
        result.stderr
