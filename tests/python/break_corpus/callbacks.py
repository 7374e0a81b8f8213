"""Break corpus: the break happens in Python code called back from elsewhere — a
sorted()/max()/map() key, a property getter, __init__ of an object the function
creates, __len__/__bool__/__eq__ dunders, a forward hook, a custom
torch.autograd.Function. The runtime cannot resume in the middle of the C code that
made the call, so it must still give eager's behaviour."""

import torch

from break_corpus._scenario import randn, scenario, seeded


@scenario(lambda: ([randn(2), randn(2), randn(2)],))
def sorted_with_item_key(tensors):
    doubled = [t * 2 for t in tensors]
    ordered = sorted(doubled, key=lambda t: t.sum().item())
    return torch.stack(ordered).cumsum(0)


@scenario(lambda: ([randn(3), randn(3)],))
def max_with_printing_key(tensors):
    def key(t):
        print("key of", tuple(t.shape))
        return float(t.norm())

    best = max((t.exp() for t in tensors), key=key)
    return best * 2


@scenario(lambda: (randn(3),))
def map_with_breaking_function(x):
    y = x.sin()

    def scaled(i):
        print("map", i)
        return y * i

    parts = list(map(scaled, range(3)))
    return torch.stack(parts).sum(0)


class Box:
    def __init__(self, t):
        print("Box created with", t.numel(), "values")
        self.t = t * 2



class Holder:
    def __init__(self, t):
        self.t = t

    @property
    def total(self):
        print("reading total")
        return self.t.sum()

    def __len__(self):
        return int(self.t.numel())

    def __bool__(self):
        return bool(self.t.sum() > 0)


@scenario(lambda: (randn(3),))
def break_in_init_of_created_object(x):
    y = x.exp()
    box = Box(y)
    return box.t + y


@scenario(lambda: (randn(3),))
def break_in_property_getter(x):
    box = Holder(x.relu())
    total = box.total
    return box.t / (total + 1)


@scenario(lambda: (randn(3),), other=lambda: (-randn(3).abs(),))
def break_in_bool_dunder(x):
    box = Holder(x * 2)
    if box:
        return box.t.exp()
    return box.t.neg(), len(box)


class Hooked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.lin.register_forward_hook(self._hook)

    @staticmethod
    def _hook(module, inputs, output):
        print("hook saw", tuple(output.shape))
        return output * 2

    def forward(self, x):
        return self.lin(x.tanh()).relu()


@scenario(lambda: (seeded(Hooked), randn(2, 3)))
def break_in_forward_hook(model, x):
    y = x + 1
    return model(y).sum(1)


class _PrintingSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        print("custom forward", tuple(t.shape))
        return t * t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return grad * 2 * t


@scenario(lambda: (randn(3, requires_grad=True),))
def break_in_custom_autograd_function(x):
    y = x * 3
    z = _PrintingSquare.apply(y)
    return z.sum() + y.mean()


class Tagged:
    def __init__(self, t, tag):
        self.t, self.tag = t, tag

    def __eq__(self, other):
        print("comparing", self.tag, other.tag)
        return bool((self.t == other.t).all())

    __hash__ = None


@scenario(lambda: (randn(3),))
def break_in_eq_dunder_via_list_index(x):
    items = [Tagged(x * i, f"t{i}") for i in range(3)]
    probe = Tagged(x * 2, "probe")
    where = items.index(probe)
    return items[where].t + x, where


@scenario(lambda: (randn(2, 2),))
def break_in_dict_comprehension(x):
    stats = {name: getattr(x, name)().item() for name in ("sum", "mean", "max")}
    return x * stats["max"] - stats["mean"], stats
