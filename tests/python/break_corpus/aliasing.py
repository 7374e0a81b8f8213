"""Break corpus: identities that must survive a break — two locals naming one list,
a view made before the break and written through after it, a tensor object compared
with `is`, closure cells rebound after the break, random draws on both sides. A
resumed frame rebuilt from copies instead of the original objects gets these wrong."""

import torch

from break_corpus._scenario import randn, scenario


@scenario(lambda: (randn(3),))
def two_locals_naming_one_list(x):
    a = [x * 2]
    b = a
    print("lists made")
    b.append(x + 1)
    return torch.stack(a).sum(0), a is b, len(a)


@scenario(lambda: (randn(2, 3),))
def view_made_before_break_written_after(x):
    base = x * 1.0
    row = base[0]
    print("view taken")
    row.mul_(10)
    return base, row._base is base


@scenario(lambda: (randn(4),))
def input_view_written_after_break(x):
    v = x.view(2, 2)
    print("writing through the view")
    v[0].fill_(0.5)
    return x.sum() * 2


@scenario(lambda: (randn(3),))
def same_tensor_object_under_two_names(x):
    a = x.relu()
    b = a
    print("checking identity")
    b.add_(1)
    return a, b, a is b


@scenario(lambda: (randn(3),))
def closure_cell_rebound_after_break(x):
    k = 1.0
    scale = lambda t: t * k  # noqa: E731
    first = scale(x)
    print("rebinding k")
    k = 3.0
    return first, scale(x)


@scenario(lambda: (randn(3),))
def random_draws_on_both_sides_of_break(x):
    a = x + torch.rand(3)
    print("between draws")
    b = a * torch.rand(3)
    return a, b, torch.randn(1)


@scenario(lambda: (randn(3),))
def dropout_before_and_after_break(x):
    y = torch.nn.functional.dropout(x.exp(), p=0.5, training=True)
    print("dropped", int((y == 0).sum()))
    return torch.nn.functional.dropout(y, p=0.3, training=True)


@scenario(lambda: ({"w": randn(2)},))
def dict_value_tensor_identity_kept(d):
    w = d["w"]
    d["alias"] = w
    print("aliased")
    w.mul_(3)
    return d["alias"] is d["w"], d["alias"].sum()


@scenario(lambda: (randn(3, requires_grad=True),))
def leaf_created_in_prefix_requires_grad_after(x):
    w = torch.ones(3)
    print("made w")
    w.requires_grad_()
    y = (x * w).sum()
    y.backward()
    return w.grad, y.detach()


@scenario(lambda: (randn(4),))
def input_reassigned_before_break_original_untouched(x):
    original = x
    x = x * 2
    print("rebound x")
    x.add_(1)
    return original, x
