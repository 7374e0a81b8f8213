"""Corpus: f-strings and string operations over values known at trace time, used
as dict keys, to pick entries, or returned."""

from torch import nn

from corpus._case import Args, case, randn


@case((2, 3))
def fstring_keys_in_dict(x):
    return {f"layer_{i}": x * i for i in range(3)}


@case((2, 3))
def fstring_of_shape_returned(x):
    return x * 2, f"{x.shape[0]}x{x.shape[1]}"


@case((2,))
def fstring_format_specs(x):
    n = 7
    ratio = 3.14159
    return x + n, f"{n:03d}|{ratio:.2f}|{n!r}|{'s':>3}|{n:x}", f"{ratio:e}"


@case((2,))
def fstring_of_dtype_and_device(x):
    return x.double(), f"{x.dtype}", f"{x.device}", str(x.dtype)


@case((2,))
def string_methods(x):
    name = "Block.Attention"
    parts = name.lower().split(".")
    joined = "-".join(parts)
    return (x * len(parts), joined, name.startswith("Block"), name.replace("Block", "B"),
            name.endswith("x"), " pad ".strip(), "a,b".partition(","))


@case((2,))
def percent_and_format(x):
    n = 5
    return x - n, "%d items, %.1f%%" % (n, 12.5), "{}-{name}".format(1, name="k")


def _named_blocks():
    blocks = nn.ModuleDict({f"block{i}": nn.Linear(3, 3) for i in range(3)})
    return (blocks.eval(), randn(2, 3))


@case(inputs=_named_blocks)
def fstring_selects_submodule(blocks, x):
    for i in range(3):
        x = blocks[f"block{i}"](x)
    return x


@case(inputs=lambda: Args.of({"w_a": randn(2), "w_b": randn(2)}, randn(2), "b"))
def fstring_looks_up_argument_dict(weights, x, suffix):
    key = f"w_{suffix}"
    return x * weights[key], key


@case((3,))
def string_concatenation_in_loop(x):
    label = ""
    for i in range(3):
        label += str(i) + ("," if i < 2 else "")
    return x * len(label), label, label * 2


@case((2, 2))
def fstring_nested_expressions(x):
    dims = [x.size(0), x.size(1)]
    return x.sum(), f"dims={'x'.join(str(d) for d in dims)} total={sum(dims)}"
