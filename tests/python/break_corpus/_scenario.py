"""The break corpus's building blocks: Scenario and the @scenario decorator.

A scenario is a function plus a maker of its inputs. The maker takes no arguments and
draws from torch's global generator; the harness seeds that generator before each
draw, so the same seed always gives the same inputs. The harness builds the inputs
twice with the same seed, once for the eager run and once for the compiled run, so
the two never share a mutable object (not even a generator or a closure, which
copy.deepcopy would share).
"""

import collections
import dataclasses
import typing

import torch

from corpus._case import Args

_REGISTRY = collections.defaultdict(list)


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One graph-break scenario.

    fn            the function compiled (or, with factory=True, a function returning it)
    make_inputs   () -> tuple | Args, drawing from torch's generator
    other_inputs  optional maker of inputs of other shapes or Python values, used for
                  one call in the middle of the sequence so that guards fail there
    calls         how many calls with make_inputs (at least 3)
    persistent    the inputs are built once per side and passed to every call (a model
                  and optimizer taking several steps); else new inputs for each call
    factory       fn is called once per side and its result is what gets compiled; it
                  keeps its state (closure cells, attributes) across the calls
    globals       names of globals of fn's module that the scenario writes; the harness
                  gives both sides the same starting values and compares them after
    breaks        the scenario is expected to break the graph at least once
    backward      backpropagate through tensor results that require grad and compare
                  the gradients of the inputs
    atol, rtol    tolerance for floating tensors and floats
    """

    fn: typing.Callable
    make_inputs: typing.Callable
    theme: str
    other_inputs: typing.Optional[typing.Callable] = None
    calls: int = 3
    persistent: bool = False
    factory: bool = False
    globals: tuple = ()
    breaks: bool = True
    backward: bool = True
    atol: float = 1e-6
    rtol: float = 1e-5

    @property
    def name(self):
        return self.fn.__name__

    def call_plan(self):
        """(label, maker, seed) for each call, in order. Later calls use other seeds,
        so values differ while shapes and types stay (the cache should serve them);
        other_inputs, when given, comes second to last (a guard fails there), and the
        last call goes back to make_inputs (the first variant must still be found)."""
        plan = [(f"call{i}", self.make_inputs, i) for i in range(self.calls)]
        if self.other_inputs is not None and not self.persistent:
            plan.insert(len(plan) - 1, ("other", self.other_inputs, 100))
        return plan

    def build_inputs(self, maker, seed):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            made = maker()
        if isinstance(made, Args):
            return made
        if not isinstance(made, tuple):
            raise TypeError(f"{self.name}: an input maker must return a tuple or an Args")
        return Args(made, {})


def scenario(inputs=lambda: (), *, other=None, calls=3, persistent=False, factory=False,
             globals=(), breaks=True, backward=True, atol=1e-6, rtol=1e-5):
    """Registers the decorated function as a scenario and returns it unchanged.

    `inputs` (and `other`) are makers: lambdas returning a tuple of positional
    arguments or an Args.
    """
    if calls < 3:
        raise ValueError("a scenario is called at least 3 times")
    if persistent and other is not None:
        raise ValueError("a persistent scenario keeps its inputs: it cannot have `other`")

    def register(fn):
        theme = fn.__module__.rsplit(".", 1)[-1]
        _REGISTRY[fn.__module__].append(Scenario(
            fn, inputs, theme, other_inputs=other, calls=calls, persistent=persistent,
            factory=factory, globals=tuple(globals), breaks=breaks, backward=backward,
            atol=atol, rtol=rtol))
        return fn

    return register


def registered(module_name):
    """The scenarios a module registered, in definition order."""
    return list(_REGISTRY[module_name])


# Input makers, short so that scenario headers stay on one line.


def randn(*shape, requires_grad=False):
    """A standard normal float32 tensor."""
    return torch.randn(*shape).requires_grad_(requires_grad)


def positive(*shape):
    """A tensor with values in [0.5, 1.5)."""
    return torch.rand(*shape) + 0.5


def rand_int(low, high, *shape):
    """An int64 tensor drawn uniformly from [low, high)."""
    return torch.randint(low, high, shape)


def seeded(factory, seed=0):
    """What `factory` builds from a fixed seed (a module with fixed initial weights);
    the global generator's state is left as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory()
