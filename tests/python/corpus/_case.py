"""The corpus's building blocks: Case, the @case decorator that registers one, Args
for calls with keyword arguments, and small seeded input makers.

A case is a function plus a maker of its inputs. The maker takes no arguments and
draws from torch's global generator; the harness seeds that generator before each
call, so the same seed always gives the same inputs, and two seeds give inputs of
the same types and shapes with different values.
"""

import collections
import dataclasses
import typing

import torch

# Cases registered so far, per defining module, in definition order.
_REGISTRY = collections.defaultdict(list)


@dataclasses.dataclass(frozen=True)
class Args:
    """Positional and keyword arguments of one call of a corpus function."""

    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)

    @staticmethod
    def of(*args, **kwargs):
        return Args(tuple(args), dict(kwargs))


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus entry: `fn` called with what `make_inputs` returns."""

    fn: typing.Callable
    make_inputs: typing.Callable
    theme: str

    @property
    def name(self):
        return self.fn.__name__

    def inputs(self, seed):
        """The arguments for one call, drawn with `seed`, as an Args."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            made = self.make_inputs()
        if isinstance(made, Args):
            return made
        if not isinstance(made, tuple):
            raise TypeError(f"{self.name}: make_inputs must return a tuple or an Args")
        return Args(made, {})


def _tensors_of_shapes(shapes):
    def make():
        return tuple(torch.randn(*shape) for shape in shapes)

    return make


def case(*shapes, inputs=None):
    """Registers the decorated function as a corpus case and returns it unchanged.

    `@case((3, 4), (4,))` calls it with float32 tensors of those shapes;
    `@case(inputs=lambda: (...))` with what the lambda returns (a tuple of positional
    arguments, or an Args).
    """
    if inputs is not None and shapes:
        raise TypeError("case: give shapes or inputs, not both")
    make = inputs if inputs is not None else _tensors_of_shapes(shapes)

    def register(fn):
        theme = fn.__module__.rsplit(".", 1)[-1]
        _REGISTRY[fn.__module__].append(Case(fn, make, theme))
        return fn

    return register


def registered(module_name):
    """The cases a module registered, in definition order."""
    return list(_REGISTRY[module_name])


# Input makers, short so that case headers stay on one line.


def randn(*shape, dtype=torch.float32, requires_grad=False):
    """A standard normal tensor."""
    return torch.randn(*shape, dtype=dtype).requires_grad_(requires_grad)


def rand_int(low, high, *shape, dtype=torch.int64):
    """A tensor of integers drawn uniformly from [low, high)."""
    return torch.randint(low, high, shape, dtype=dtype)


def rand_bool(*shape):
    """A tensor of random booleans."""
    return torch.rand(*shape) > 0.5


def positive(*shape):
    """A tensor with values in [0.5, 1.5): safe for log, sqrt and division."""
    return torch.rand(*shape) + 0.5


def fixed_module(factory, seed=0):
    """A module built by `factory` from a fixed seed, in eval mode, for module globals.

    The global generator's state is left as it was.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory().eval()
