"""Break corpus: state written before a break and read after it — list and dict
mutations of inputs, attribute writes on self and on module objects, global and
nonlocal writes, a del of a local — so a resumed frame must see (and replay exactly
once) what the compiled prefix did."""

import types

import torch

from break_corpus._scenario import randn, scenario, seeded

TOTAL = 0
HISTORY = []
REGISTRY = {}
SETTINGS = types.SimpleNamespace(scale=1.0, calls=0)


@scenario(lambda: ([randn(2)], randn(2)))
def list_append_before_break_read_after(items, x):
    items.append(x * 2)
    print("list has", len(items))
    items.append(items[-1] + items[0])
    return torch.stack(items).sum(0)


@scenario(lambda: ({"a": randn(3)}, randn(3)))
def dict_update_before_break_read_after(d, x):
    d["b"] = d["a"] + x
    d.setdefault("count", 0)
    d["count"] += 1
    print("keys", sorted(d))
    d["c"] = d["b"] * d["count"]
    del d["a"]
    return d["c"].exp()


class Accumulator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.calls = 0
        self.last_norm = None
        self.register_buffer("running", torch.zeros(3))

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        self.last_norm = round(y.norm().item(), 4)
        self.running.mul_(0.9).add_(y.detach().mean(0) * 0.1)
        return y * self.calls


@scenario(lambda: (seeded(Accumulator), randn(2, 3)), persistent=True)
def attribute_writes_on_self_across_break(model, x):
    y = model(x)
    z = model(y.relu())
    return z.sum(), model.calls


@scenario(lambda: (randn(3),), globals=("TOTAL", "HISTORY"))
def global_write_before_break_read_after(x):
    global TOTAL
    y = x.exp()
    TOTAL += 1
    HISTORY.append(TOTAL)
    y = y * TOTAL
    print("total is", TOTAL)
    TOTAL = TOTAL * 10
    return y + TOTAL + len(HISTORY)


@scenario(lambda: (randn(2),), globals=("REGISTRY",))
def global_dict_registry_with_break(x):
    key = f"k{len(REGISTRY)}"
    REGISTRY[key] = x.sum()
    s = REGISTRY[key].item()
    REGISTRY[key] = REGISTRY[key] + s
    return x * len(REGISTRY), sorted(REGISTRY)


@scenario(lambda: (randn(3),), globals=("SETTINGS",))
def module_namespace_attribute_writes(x):
    y = x.relu()
    SETTINGS.calls += 1
    SETTINGS.scale = SETTINGS.scale * 2
    y = y * SETTINGS.scale
    print("calls", SETTINGS.calls)
    SETTINGS.last = y.shape[0]
    return y + SETTINGS.calls


@scenario(lambda: (randn(4),))
def nonlocal_counter_updated_around_break(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        print("bump", count)
        return t * count

    y = bump(x)
    z = bump(y + 1)
    return z, count


def closure_state_persists_across_calls():
    seen = []
    total = torch.zeros(2)

    def step(x):
        nonlocal total
        y = x.tanh()
        total = total + y
        seen.append(len(seen))
        print("seen", seen)
        return total * len(seen)

    return step


scenario(lambda: (randn(2),), factory=True)(closure_state_persists_across_calls)


@scenario(lambda: (randn(3),))
def del_local_before_break(x):
    tmp = x * 2
    y = tmp + 1
    del tmp
    print("after del, y has", y.numel())
    try:
        tmp  # noqa: F821 -- deleted above on purpose
    except NameError as error:
        print("NameError:", error)
    return y.exp()


@scenario(lambda: (randn(2, 3),))
def inplace_input_mutation_around_break(x):
    x.mul_(2)
    print("mutated once")
    x.add_(x.sum())
    return x


@scenario(lambda: (randn(4), [1, 2]))
def list_input_mutated_and_returned(x, order):
    order.reverse()
    order.insert(0, int(x.argmax()))
    y = x[order[0]] * 2
    order.pop()
    return order, y + x


class Holder:
    def __init__(self, t):
        self.t = t
        self.log = []


@scenario(lambda: (Holder(randn(3)),))
def user_object_attribute_swap(h):
    old = h.t
    h.t = old * 2
    h.log.append("doubled")
    print("holder now has", len(h.log), "entries")
    h.t = h.t + old
    h.extra = h.t.sum()
    return h.t
