"""Graph breaks against eager PyTorch on the break corpus (tests/python/break_corpus).

Every scenario is a function that dynvm cannot capture as one graph: it prints, logs,
reads tensor values into Python, branches on them, calls into C extensions, raises
and catches exceptions, drives generators, trains a model... always with tensor work
before and after the break. Compiled with backend="eager" (and the default
fullgraph=False), it must behave exactly like the plain function: the harness builds
identical inputs twice from one seed, calls the function eagerly and compiled at least
three times (later calls should be served from the cache; some scenarios change
shapes or Python values in between so guards fail), and compares the result and its
aliasing with the inputs, stdout and stderr text, logging records (message, line,
function), exceptions (type, message, corpus frames of the traceback, cause and
context), the inputs and watched globals afterwards (in-place tensor updates,
gradients, module attributes and buffers, optimizer state), grad mode and the random
generators' states, then gradients through the results.

Scenarios that fail are listed in KNOWN_FAILURES as strict expected failures."""

import copy
import io
import logging
import pathlib
import random
import sys
import textwrap
import types

import pytest
import torch

import break_corpus
import dynvm
from break_corpus._harness import (assert_outcomes_same, assert_same, backward_through,
                                   capture_output, restore_globals, run_call)
from corpus._case import Args

MIN_SCENARIOS = 90
SCENARIOS = break_corpus.all_scenarios()

# Scenarios that do not behave like eager yet, each with the reason. Strict expected
# failures: one that starts passing fails the run until it is removed from here.
KNOWN_FAILURES = {
    "torch_warning_mid_function":
        "tracing runs torch.tensor(t) on a fake tensor and its UserWarning reaches the "
        "user: the first compiled call warns twice, once from dynvm/_tracing.py",
}

# The themes the corpus must cover, each with at least MIN_PER_THEME scenarios.
THEMES = {
    "printing", "logging_", "scalars", "data_control_flow", "external_calls", "nested_calls",
    "loops", "context_managers", "exceptions", "mutations", "generators", "training",
    "signatures", "value_stack", "aliasing", "callbacks", "guards",
}
MIN_PER_THEME = 4

needs_vm = pytest.mark.skipif(
    not getattr(dynvm, "vm_available", lambda: False)(), reason="the VM is not built yet")


def _params(scenarios):
    return [pytest.param(s, id=s.name, marks=pytest.mark.xfail(
        strict=True, reason=KNOWN_FAILURES[s.name])) if s.name in KNOWN_FAILURES
        else pytest.param(s, id=s.name) for s in scenarios]


def _compile(target):
    return dynvm.compile(target, backend="eager")


def _run_sequence(scn, make_first, make_second):
    """Runs the scenario's call plan on two sides made by make_first and make_second
    (each: target -> callable) and compares every call."""
    module = sys.modules[scn.fn.__module__]
    initial = {name: copy.deepcopy(vars(module)[name]) for name in scn.globals}
    undeclared = _undeclared_mutable_globals(module, scn)
    try:
        first_target = scn.fn() if scn.factory else scn.fn
        second_target = scn.fn() if scn.factory else scn.fn
        first, second = make_first(first_target), make_second(second_target)
        if scn.persistent:
            first_in = scn.build_inputs(scn.make_inputs, 0)
            second_in = scn.build_inputs(scn.make_inputs, 0)
        state = initial
        for label, maker, seed in scn.call_plan():
            if not scn.persistent:
                first_in = scn.build_inputs(maker, seed)
                second_in = scn.build_inputs(maker, seed)
            restore_globals(module, state)
            expected = run_call(first, first_in, seed=1000 + seed, module=module,
                                global_names=scn.globals)
            restore_globals(module, state)
            actual = run_call(second, second_in, seed=1000 + seed, module=module,
                              global_names=scn.globals)
            assert_outcomes_same(actual, expected, rtol=scn.rtol, atol=scn.atol, label=label)
            if scn.factory:
                assert_same(second_target, first_target, f"[{label}] the callee after the call",
                            rtol=scn.rtol, atol=scn.atol)
            if scn.backward and expected.exception is None:
                assert backward_through(actual.result) == backward_through(expected.result)
                assert_same(second_in.args, first_in.args,
                            f"[{label}] inputs after backward through the result",
                            rtol=scn.rtol, atol=scn.atol)
                if scn.factory:
                    assert_same(second_target, first_target,
                                f"[{label}] the callee after backward through the result",
                                rtol=scn.rtol, atol=scn.atol)
            state = expected.globals
    finally:
        restore_globals(module, initial)
    # A global the scenario changes must be declared (and so compared and restored).
    assert_same(_undeclared_mutable_globals(module, scn), undeclared,
                "mutable globals the scenario does not declare")


def _undeclared_mutable_globals(module, scn):
    return {name: copy.deepcopy(value) for name, value in vars(module).items()
            if name not in scn.globals and not name.startswith("__")
            and type(value) in (list, dict, set, types.SimpleNamespace)}


@needs_vm
@pytest.mark.parametrize("scn", _params(SCENARIOS))
def test_compiled_matches_eager(scn):
    dynvm.reset()
    _run_sequence(scn, lambda target: target, _compile)


@needs_vm
@pytest.mark.parametrize("scn", [s for s in SCENARIOS if s.breaks], ids=lambda s: s.name)
def test_scenario_breaks_the_graph(scn):
    """The scenario really is a graph break: compiled with fullgraph=True, a call on the
    inputs of at least one step of its call plan raises GraphBreakError (so the
    comparison above exercises breaks, not just one graph)."""
    module = sys.modules[scn.fn.__module__]
    initial = {name: copy.deepcopy(vars(module)[name]) for name in scn.globals}
    broke = []
    try:
        for label, maker, seed in scn.call_plan():
            dynvm.reset()
            target = scn.fn() if scn.factory else scn.fn
            compiled = dynvm.compile(target, backend="eager", fullgraph=True)
            # A factory's state may decide the path: replay the calls before this one.
            for _, earlier_maker, earlier_seed in scn.call_plan():
                if (earlier_maker, earlier_seed) == (maker, seed):
                    break
                if scn.factory:
                    with capture_output():
                        inputs = scn.build_inputs(earlier_maker, earlier_seed)
                        target(*inputs.args, **inputs.kwargs)
            inputs = scn.build_inputs(maker, seed)
            restore_globals(module, initial)
            with capture_output():
                try:
                    compiled(*inputs.args, **inputs.kwargs)
                except dynvm.GraphBreakError as error:
                    assert "graph break" in str(error)
                    broke.append(label)
                except Exception:  # noqa: BLE001 -- the scenario's own exception
                    pass
            if broke:
                break
    finally:
        restore_globals(module, initial)
    assert broke, "no call of the plan breaks the graph"


# --- the corpus itself (eager only; no dynvm needed) -------------------------------------


def test_corpus_is_large_enough_with_unique_names():
    assert len(SCENARIOS) >= MIN_SCENARIOS, f"{len(SCENARIOS)} scenarios"
    names = [s.name for s in SCENARIOS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"names used twice: {duplicates}"
    assert set(KNOWN_FAILURES) <= set(names), set(KNOWN_FAILURES) - set(names)


def test_every_theme_is_present_and_populated():
    counts = {}
    for s in SCENARIOS:
        counts[s.theme] = counts.get(s.theme, 0) + 1
    assert THEMES <= set(counts), f"themes without scenarios: {sorted(THEMES - set(counts))}"
    thin = {theme: n for theme, n in counts.items() if n < MIN_PER_THEME}
    assert not thin, f"themes with fewer than {MIN_PER_THEME} scenarios: {thin}"


@pytest.mark.parametrize("scn", SCENARIOS, ids=lambda s: s.name)
def test_eager_runs_are_deterministic(scn):
    """Two eager runs on inputs built from the same seeds agree exactly by the same
    comparison: a difference in the compiled run is dynvm's, not the corpus's."""
    _run_sequence(scn, lambda target: target, lambda target: target)


# --- the harness catches what it claims to catch ------------------------------------------

# Generated functions get a file name in the corpus directory, so that their traceback
# frames count as corpus frames (the file itself never exists).
_SELFTEST_FILE = str(pathlib.Path(break_corpus.__file__).parent / "_selftest_generated.py")

# Pairs of functions differing in one observable way only.
_PAIRS = {
    "result value": ("def f(x):\n return x + 1\n", "def f(x):\n return x + 1.001\n"),
    "result dtype": ("def f(x):\n return x.sum()\n", "def f(x):\n return x.double().sum()\n"),
    "result container": ("def f(x):\n return [x]\n", "def f(x):\n return (x,)\n"),
    "result aliasing": ("def f(x):\n return x\n", "def f(x):\n return x.clone()\n"),
    "result view of input": ("def f(x):\n return x.view(-1)\n",
                             "def f(x):\n return x.reshape(-1).clone()\n"),
    "stdout text": ("def f(x):\n print('a', 1)\n return x\n",
                    "def f(x):\n print('a', 2)\n return x\n"),
    "stdout order": ("def f(x):\n print('a')\n print('b')\n return x\n",
                     "def f(x):\n print('b')\n print('a')\n return x\n"),
    "stderr": ("import sys\ndef f(x):\n print('e', file=sys.stderr)\n return x\n",
               "import sys\ndef f(x):\n print('e')\n return x\n"),
    "log line": ("def f(x):\n logging.getLogger('t').info('m')\n return x\n",
                 "def f(x):\n\n logging.getLogger('t').info('m')\n return x\n"),
    "log message": ("def f(x):\n logging.getLogger('t').info('m %d', 1)\n return x\n",
                    "def f(x):\n logging.getLogger('t').info('m %d', 2)\n return x\n"),
    "log level": ("def f(x):\n logging.getLogger('t').info('m')\n return x\n",
                  "def f(x):\n logging.getLogger('t').warning('m')\n return x\n"),
    "exception type": ("def f(x):\n raise ValueError('m')\n",
                       "def f(x):\n raise KeyError('m')\n"),
    "exception message": ("def f(x):\n raise ValueError('m')\n",
                          "def f(x):\n raise ValueError('n')\n"),
    "exception line": ("def f(x):\n raise ValueError('m')\n",
                       "def f(x):\n\n raise ValueError('m')\n"),
    "exception raised or not": ("def f(x):\n raise ValueError('m')\n",
                                "def f(x):\n return x\n"),
    "exception cause": ("def f(x):\n raise ValueError('m') from KeyError('k')\n",
                        "def f(x):\n raise ValueError('m')\n"),
    "input mutated in place": ("def f(x):\n x.add_(1)\n return 0\n",
                               "def f(x):\n return 0\n"),
    "input gradient": ("def f(x):\n return x * 2\n",
                       "def f(x):\n return (x * 2).detach() + x - x.detach()\n"),
    "global written": ("def f(x):\n THING.append(1)\n return x\n", "def f(x):\n return x\n"),
    "grad mode left off": ("def f(x):\n torch.set_grad_enabled(False)\n return x\n",
                           "def f(x):\n return x\n"),
    "torch random draws": ("def f(x):\n torch.rand(1)\n return x\n",
                           "def f(x):\n return x\n"),
    "python random draws": ("def f(x):\n random.random()\n return x\n",
                            "def f(x):\n return x\n"),
}


def _outcome_of(source, what):
    namespace = {"torch": torch, "logging": logging, "random": random, "THING": []}
    exec(compile(textwrap.dedent(source), _SELFTEST_FILE, "exec"), namespace)
    x = torch.ones(3, requires_grad=what == "input gradient")
    try:
        outcome = run_call(namespace["f"], Args((x,), {}), seed=0)
    finally:
        torch.set_grad_enabled(True)
    outcome.globals = {"THING": list(namespace["THING"])}
    if what == "input gradient":
        backward_through(outcome.result)
    return outcome


@pytest.mark.parametrize("what", sorted(_PAIRS))
def test_harness_detects_a_difference_in(what):
    first, second = _PAIRS[what]
    with pytest.raises(AssertionError):
        assert_outcomes_same(_outcome_of(second, what), _outcome_of(first, what))
    # while each function agrees with another run of itself
    for source in (first, second):
        assert_outcomes_same(_outcome_of(source, what), _outcome_of(source, what))


def test_harness_compares_iterators_and_stateful_objects():
    with pytest.raises(AssertionError):
        assert_same(iter([1, 2]), iter([1, 3]))
    with pytest.raises(AssertionError):
        assert_same((i for i in [1, 2]), (i for i in [1]))
    assert_same((i for i in [torch.ones(2)]), (i for i in [torch.ones(2)]))
    with pytest.raises(AssertionError):
        assert_same(io.StringIO("a"), io.StringIO("b"))
    first, second = random.Random(1), random.Random(1)
    assert_same(first, second)
    first.random()
    with pytest.raises(AssertionError):
        assert_same(first, second)
    first, second = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert_same(first, second)
    torch.rand(1, generator=first)
    with pytest.raises(AssertionError):
        assert_same(first, second)


def test_harness_compares_module_buffers_and_optimizer_state():
    a, b = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    assert_same(a, b)
    a(torch.randn(4, 3))
    with pytest.raises(AssertionError):
        assert_same(a, b)
    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    opt_a = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    opt_b = torch.optim.SGD([q], lr=0.1, momentum=0.9)
    assert_same(opt_a, opt_b)
    p.grad = torch.ones(2)
    opt_a.step()
    with pytest.raises(AssertionError):
        assert_same(opt_a, opt_b)
