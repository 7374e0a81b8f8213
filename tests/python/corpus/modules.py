"""Corpus: nn.Module calls: Linear, Conv2d, BatchNorm (eval, and train with its
running statistics as a side effect), LayerNorm, Sequential, ModuleList, ModuleDict,
submodules, buffers, parameters, `self.training` branches, forward hooks, and
`super()` in module subclasses. Modules come in as arguments (deep-copied per call)
or as module globals."""

import torch
from torch import nn

from corpus._case import Args, case, fixed_module, randn


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.scale = 0.5

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) * self.scale


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(4.0))
        self.weight = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * self.weight + self.offset


class TrainingBranch(nn.Module):
    def forward(self, x):
        if self.training:
            return x * 2
        return x - 1


class Stack(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return x


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"mean": nn.Linear(4, 2), "scale": nn.Linear(4, 2)})

    def forward(self, x):
        return {name: head(x) for name, head in self.heads.items()}


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)

    def describe(self):
        return "base"


class Child(Base):
    def forward(self, x):
        return super().forward(x).relu() + 1

    def describe(self):
        return super().describe() + "+child"


class GrandChild(Child):
    def forward(self, x):
        return super().forward(x) * 2


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.calls += 1
        return self.lin(x) + self.calls


class HelperMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def _normalize(self, x, eps=1e-5):
        return x / (x.norm(dim=-1, keepdim=True) + eps)

    def forward(self, x):
        return self._normalize(self.lin(x))


_GLOBAL_MLP = fixed_module(lambda: nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 2)))


def _module_and(factory, *shapes, train=False):
    def make():
        module = factory()
        module.train(train)
        return (module, *[randn(*s) for s in shapes])

    return make


@case(inputs=_module_and(lambda: nn.Linear(4, 3), (2, 4)))
def linear_module(m, x):
    return m(x)


@case(inputs=_module_and(lambda: nn.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 6)))
def conv2d_module(m, x):
    return m(x), m.weight.shape


@case(inputs=_module_and(lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)))
def batchnorm_eval(m, x):
    return m(x)


@case(inputs=_module_and(lambda: nn.BatchNorm2d(3), (4, 3, 2, 2), train=True))
def batchnorm_train_updates_running_stats(m, x):
    return m(x), m.num_batches_tracked + 0


@case(inputs=_module_and(lambda: nn.LayerNorm(5), (2, 3, 5)))
def layernorm_module(m, x):
    return m(x)


@case(inputs=_module_and(
    lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)),
    (3, 4)))
def sequential_eval_with_dropout(m, x):
    return m(x), m[0](x), len(m)


@case(inputs=_module_and(lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)),
                         (2, 4)))
def sequential_index_and_slice(m, x):
    return m[1:](x), m[-1](m[0](x))


@case(inputs=_module_and(lambda: Stack(3), (2, 4)))
def modulelist_iteration(m, x):
    return m(x), len(m.layers)


@case(inputs=_module_and(lambda: Stack(3), (2, 4)))
def modulelist_indexing(m, x):
    return m.layers[0](x) + m.layers[-1](x), m.layers[1].weight.sum()


@case(inputs=_module_and(Heads, (2, 4)))
def moduledict_items_and_keys(m, x):
    out = m(x)
    return out, m.heads["scale"](x), list(m.heads.keys()), "mean" in m.heads


@case(inputs=_module_and(TwoLayer, (2, 4)))
def submodule_attributes(m, x):
    return m(x), m.fc1.out_features, m.fc2.bias * m.scale


@case(inputs=_module_and(WithBuffer, (3, 4)))
def buffers_and_parameters(m, x):
    n_params = sum(p.numel() for p in m.parameters())
    names = [name for name, _ in m.named_buffers()]
    return m(x), n_params, names, m.offset * 2


@case(inputs=_module_and(TwoLayer, (2, 4)))
def parameters_reduction(m, x):
    total = sum(p.sum() for p in m.parameters())
    names = [name for name, _ in m.named_parameters()]
    return m(x) + total, names


@case(inputs=_module_and(TrainingBranch, (3,)))
def training_flag_eval(m, x):
    return m(x), m.training


@case(inputs=_module_and(TrainingBranch, (3,), train=True))
def training_flag_train(m, x):
    return m(x), m.training


@case(inputs=_module_and(GrandChild, (2, 4)))
def super_in_module_subclasses(m, x):
    return m(x), m.describe()


@case(inputs=_module_and(Counting, (2, 3)))
def module_attribute_mutated_in_forward(m, x):
    a = m(x)
    b = m(x)
    return b - a, m.calls


@case(inputs=_module_and(HelperMethods, (2, 4)))
def module_helper_methods(m, x):
    return m(x), m._normalize(x, eps=0.1)


@case((3, 4))
def global_module_called(x):
    return _GLOBAL_MLP(x), _GLOBAL_MLP[0].weight.shape


@case(inputs=_module_and(lambda: nn.Linear(3, 3), (2, 3)))
def shared_module_called_twice(m, x):
    return m(m(x)), m(x) + m(x)


def _with_hook():
    m = nn.Linear(3, 3)
    m.register_forward_hook(lambda module, args, out: out * 2)
    m.register_forward_pre_hook(lambda module, args: (args[0] + 1,))
    return (m.eval(), randn(2, 3))


@case(inputs=_with_hook)
def module_forward_hooks(m, x):
    return m(x)


@case(inputs=_module_and(lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(),
                                               nn.Identity()), (2, 1, 5, 5)))
def children_iteration(m, x):
    kinds = [type(child).__name__ for child in m.children()]
    out = x
    for child in m.children():
        out = child(out)
    return out, kinds


@case(inputs=lambda: Args.of(nn.Embedding(10, 4).eval(), torch.randint(0, 10, (2, 5))))
def embedding_module(m, tokens):
    return m(tokens), m(tokens).mean(1)


@case(inputs=_module_and(lambda: nn.Linear(4, 4), (2, 4)))
def direct_weight_use(m, x):
    return x @ m.weight.t() + m.bias, torch.nn.functional.linear(x, m.weight)
