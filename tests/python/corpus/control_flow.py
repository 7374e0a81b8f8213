"""Corpus: control flow decided by values the VM knows at trace time: Python
arguments, shapes, dtypes, constants; early returns, ternaries, short-circuit
and/or on Python values, try/except/finally, assert, raise on a path not taken,
and match statements."""

import torch

from corpus._case import Args, case, randn


@case(inputs=lambda: Args.of(randn(3), True))
def branch_on_bool_argument(x, flag):
    if flag:
        return x.relu()
    return x.sigmoid()


@case(inputs=lambda: Args.of(randn(3), False))
def branch_on_false_argument(x, flag):
    if not flag:
        x = x * -1
    return x


@case((2, 5))
def branch_on_shape(x):
    if x.shape[-1] > 4:
        x = x[..., :4]
    elif x.shape[-1] == 4:
        x = x * 2
    else:
        x = x + 1
    return x


@case((3,))
def ternary_expression(x):
    mode = "fast"
    scale = 2 if mode == "fast" else 3
    return x * scale if x.dim() == 1 else x


@case((3,))
def short_circuit_on_python_values(x):
    name = ""
    label = name or "default"
    size = 0
    chosen = size and 10
    both = [1] and "yes"
    return x * len(label), label, chosen, both


@case((2, 2))
def early_return_in_nested_ifs(x):
    rank = x.dim()
    if rank == 2:
        if x.shape[0] == x.shape[1]:
            return x @ x
        return x.t()
    return x


@case((3,))
def try_except_nothing_raised(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x - 1
    return y


@case((3,))
def try_except_key_error_caught(x):
    table = {"a": 1}
    try:
        k = table["b"]
    except KeyError:
        k = 5
    return x * k


@case((3,))
def try_finally(x):
    log = []
    try:
        y = x * 2
        log.append("body")
    finally:
        log.append("finally")
    return y, log


@case((2, 3))
def assert_on_shapes(x):
    assert x.dim() == 2, "expected a matrix"
    assert x.shape[1] == 3
    return x.sum(1)


@case((2, 3))
def raise_on_path_not_taken(x):
    if x.dim() != 2:
        raise ValueError(f"expected 2 dims, got {x.dim()}")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError("expected floats")
    return x * 3


@case((4,))
def match_on_literal(x):
    kind = "double"
    match kind:
        case "half":
            return x / 2
        case "double":
            return x * 2
        case _:
            return x


@case((2, 3))
def match_on_shape_sequence(x):
    match tuple(x.shape):
        case (n,):
            return x * n
        case (rows, cols):
            return x.reshape(cols, rows), rows, cols
        case _:
            return x


@case(inputs=lambda: Args.of(randn(3), "gelu"))
def dispatch_on_string_argument(x, activation):
    if activation == "relu":
        return torch.relu(x)
    if activation == "gelu":
        return torch.nn.functional.gelu(x)
    return x


@case((3,))
def walrus_in_condition(x):
    sizes = [3, 1, 2]
    if (n := len(sizes)) > 2:
        x = x * n
    return x, n


@case(inputs=lambda: Args.of(randn(3), None, 2.0))
def optional_arguments_chain(x, weight, scale):
    if weight is not None:
        x = x * weight
    if scale is not None and scale != 1.0:
        x = x * scale
    return x


@case((2, 3))
def loop_with_early_return(x):
    for i in range(5):
        x = x + i
        if i == 2:
            return x, i
    return x, -1
