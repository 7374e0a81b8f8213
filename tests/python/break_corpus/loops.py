"""Break corpus: breaks inside loops — for over range, over lists of tensors, over
enumerate and zip, nested loops, while loops — with loop-carried tensors, and
break/continue decided after the breaking instruction."""

import torch

from break_corpus._scenario import randn, scenario


@scenario(lambda: (randn(3),), other=lambda: (randn(5),))
def print_in_range_loop(x):
    acc = torch.zeros_like(x)
    for i in range(3):
        acc = acc + x * i
        print("step", i, acc.shape)
        acc = acc.tanh()
    return acc * 2


@scenario(lambda: ([randn(2), randn(2), randn(2)],))
def item_in_loop_over_tensor_list(tensors):
    total = torch.zeros(2)
    maxima = []
    for t in tensors:
        total = total + t.exp()
        maxima.append(round(t.max().item(), 4))
    return total / len(tensors), maxima


@scenario(lambda: ([randn(3), randn(3), randn(3), randn(3)],))
def enumerate_with_data_dependent_continue(tensors):
    out = torch.zeros(3)
    for i, t in enumerate(tensors):
        t = t * (i + 1)
        if t.sum() < 0:
            continue
        out = out + t
    return out.relu()


@scenario(lambda: ([randn(2), randn(2)], [randn(2), randn(2)]))
def zip_loop_with_print(xs, ys):
    products = []
    for a, b in zip(xs, ys):
        p = (a * b).sum()
        print(f"dot={p.item():.4f}")
        products.append(p + 1)
    return torch.stack(products)


@scenario(lambda: (randn(4),))
def loop_with_data_dependent_break(x):
    y = x.clone()
    for i in range(10):
        y = y * 0.5 + 1
        if y.abs().max() < 2.2:
            break
    return y - 1, i


@scenario(lambda: (randn(2, 3),))
def nested_loops_with_print_in_inner(x):
    out = x.clone()
    for i in range(2):
        row = out[i]
        for j in range(3):
            if j == 1:
                print("cell", i, j, row[j].item() > 0)
            row = row * 1.5
        out = torch.cat([out[:i], row.unsqueeze(0), out[i + 1:]])
    return out


@scenario(lambda: (randn(3),))
def while_loop_counter_with_print(x):
    i = 0
    y = x
    while i < 3:
        y = y.sin() + i
        print("while", i)
        i += 1
    return y.cos()


@scenario(lambda: (randn(4, 2),))
def for_over_tensor_rows_with_item(x):
    kept = []
    for row in x:
        if row[0].item() > row[1].item():
            kept.append(row * 2)
        else:
            kept.append(row.flip(0))
    return torch.stack(kept).sum(0)


@scenario(lambda: (randn(3),))
def for_else_clause_after_break(x):
    y = x * 2
    for k in range(3):
        y = y - 0.1
        if bool(y.sum() > 100):
            break
    else:
        print("no break in the loop")
        y = y * -1
    return y


@scenario(lambda: ({"a": randn(2), "b": randn(2), "c": randn(2)},))
def loop_over_dict_items_with_print(params):
    total = torch.zeros(2)
    for name, p in params.items():
        scaled = p * 2
        print(name, tuple(scaled.shape))
        total = total + scaled
    return total


@scenario(lambda: ([randn(3), randn(3), randn(3)],))
def return_from_inside_loop_inside_with(tensors):
    acc = torch.zeros(3)
    with torch.no_grad():
        for i, t in enumerate(tensors):
            acc = acc + t
            if acc.sum() > 1:
                print("returning early at", i)
                return acc * 2, i
    return acc, -1


@scenario(lambda: ([randn(2), randn(2), randn(2)],))
def loop_carried_value_changes_type_across_breaks(tensors):
    acc = 0
    for t in tensors:
        print("acc is a", type(acc).__name__)
        acc = acc + t * 2
    return acc.relu()
