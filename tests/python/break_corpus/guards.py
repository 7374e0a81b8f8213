"""Break corpus: the first call takes a path the VM captures whole; a later call,
with another Python value, shape, dtype, attribute, training flag or closure state,
takes a path with a break. Only guards on what decided the path keep the first
variant from being replayed for the later call."""

import torch

from corpus._case import Args
from break_corpus._scenario import randn, scenario, seeded


@scenario(lambda: (randn(3), False), other=lambda: (randn(3), True))
def bool_argument_enables_print(x, verbose):
    y = x * 2
    if verbose:
        print("verbose:", y.shape)
    return y.relu()


@scenario(lambda: (randn(3), 0), other=lambda: (randn(3), 3))
def int_argument_enables_item(x, level):
    y = x.exp()
    if level > 2:
        y = y / y.max().item()
    return y + level


@scenario(lambda: (randn(3), {"scale": 2.0}),
          other=lambda: (randn(3), {"scale": 2.0, "debug": 1}))
def dict_key_presence_enables_print(x, options):
    y = x * options["scale"]
    if "debug" in options:
        print("debug", sorted(options))
    return y.sin()


@scenario(lambda: (randn(2, 3),), other=lambda: (randn(5, 3),))
def shape_enables_data_dependent_branch(x):
    y = x.tanh()
    if x.shape[0] > 3:
        if y.sum() > 0:
            y = y * 2
    return y.cumsum(0)


@scenario(lambda: (randn(3),), other=lambda: (randn(3).double(),))
def dtype_enables_tolist(x):
    y = x * 3
    if y.dtype == torch.float64:
        print("values", [round(v, 3) for v in y.tolist()])
    return y + 1


@scenario(lambda: (randn(3),), other=lambda: (randn(3, requires_grad=True),))
def requires_grad_enables_print(x):
    y = x * x
    if x.requires_grad:
        print("tracking gradients")
    return y.sum() * 2


class Flagged:
    def __init__(self, debug):
        self.debug = debug
        self.w = torch.ones(3)


@scenario(lambda: (Flagged(False), randn(3)), other=lambda: (Flagged(True), randn(3)))
def object_attribute_enables_print(obj, x):
    y = x + obj.w
    if obj.debug:
        print("debug on", y.shape)
    return y * 2


class Switchable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        if self.training:
            print("training mode, mean", round(h.mean().item(), 4))
        return h.relu()


def _module_in(mode):
    module = seeded(Switchable)
    return module.train(mode == "train")


@scenario(lambda: (_module_in("eval"), randn(2, 3)),
          other=lambda: (_module_in("train"), randn(2, 3)))
def training_flag_enables_item(module, x):
    return module(x * 2) + 1


def closure_flag_flips_after_first_call():
    state = {"calls": 0}

    def step(x):
        state["calls"] += 1
        y = x * 2
        if state["calls"] > 1:
            print("call", state["calls"], "prints")
        return y.exp()

    return step


scenario(lambda: (randn(3),), factory=True)(closure_flag_flips_after_first_call)


@scenario(lambda: Args.of(randn(3)), other=lambda: Args.of(randn(3), report=True))
def keyword_argument_enables_logging(x, report=False):
    y = x.abs()
    if report:
        import logging

        logging.getLogger("break_corpus.guards").info("max %.3f", y.max().item())
    return y.sqrt()


@scenario(lambda: ([randn(2), randn(2)],), other=lambda: ([randn(2), randn(2), randn(2)],))
def list_length_enables_print(tensors):
    total = torch.stack(tensors).sum(0)
    if len(tensors) > 2:
        print("long list of", len(tensors))
    return total * 2
