"""Corpus: arithmetic and constants: Python scalars with tensors, int/float/bool
promotion, //, %, **, unary operators, comparisons, `is` and `in`."""

import torch

from corpus._case import Args, case, positive, rand_bool, rand_int, randn


@case((3, 4))
def add_int_scalar(x):
    return x + 1


@case((3, 4))
def scalar_on_the_left(x):
    return 2.5 * x, 1 - x, 3 + x


@case(inputs=lambda: (rand_int(-5, 5, 3, 4),))
def int_tensor_times_float_promotes(x):
    y = x * 1.5
    return y, y.dtype, x * 2


@case(inputs=lambda: (rand_int(-5, 5, 3, 4),))
def int_tensor_true_division(x):
    return x / 2, x / 4.0


@case(inputs=lambda: (rand_int(-9, 9, 4, 4),))
def int_floor_divide_and_modulo(x):
    return x // 3, x % 3, (-x) % 4, x // -2


@case((3, 4))
def float_floor_divide_and_modulo(x):
    return x // 0.5, x % 0.75, x % -1.25


@case((3, 4))
def power_forms(x):
    return x ** 2, x.abs() ** 0.5, 2 ** x, x ** 3, pow(x, 2)


@case(inputs=lambda: (rand_bool(3, 4), randn(3, 4)))
def bool_tensor_promotion(mask, x):
    return mask + 1, mask * x, mask * 2.5, (mask + mask).dtype


@case((3, 4))
def unary_operators(x):
    return -x, +x, abs(x), ~(x > 0)


@case((3, 4), (3, 4))
def comparison_operators(x, y):
    return x < y, x <= y, x == y, x != y, x >= 0.0, 0 < x


@case((3, 4))
def python_int_arithmetic_feeds_tensor(x):
    a = 7
    b = a // 2
    c = a % 4
    d = -a // 2
    e = 2 ** 10
    f = 7 / 2
    return x * b + c - d, e, f, d


@case((3, 4))
def python_mixed_promotion(x):
    n = 3 + 2.0
    k = True + 2
    m = 5 * False
    return x * n + k, type(n) is float, k, m


@case(inputs=lambda: (randn(2, 3), None))
def none_argument_checked_with_is(x, bias):
    if bias is None:
        return x * 2
    return x + bias


@case(inputs=lambda: (randn(2, 3), randn(3)))
def not_none_argument_checked_with_is_not(x, bias):
    if bias is not None:
        x = x + bias
    return x


@case(inputs=lambda: Args.of(randn(3), 4, 0.5))
def python_scalar_arguments(x, n, alpha):
    return x * n + alpha, n * alpha, n // 3


@case((4,))
def in_operator_on_constants(x):
    ops = ("add", "mul")
    out = x
    if "mul" in ops:
        out = out * 3
    if "sub" not in ops:
        out = out + 1
    return out, 3 in [1, 2, 3], "z" in "xyz"


@case((3, 3))
def divmod_and_round_constants(x):
    q, r = divmod(17, 5)
    return x * q + r, round(3.7), round(2.5), round(1.23456, 2)


@case(inputs=lambda: (rand_int(0, 16, 8, dtype=torch.int32),))
def bitwise_int_tensor(x):
    return x & 5, x | 8, x ^ 3, x << 1, x >> 1, ~x


@case(inputs=lambda: (rand_bool(5), rand_bool(5)))
def bitwise_bool_tensor(a, b):
    return a & b, a | b, a ^ b, ~a


@case((3, 4))
def augmented_assign_python_scalar(x):
    s = 1
    s += 2
    s *= 3
    s -= 1
    s //= 2
    s **= 2
    s %= 7
    return x * s, s


@case((3, 4))
def reflected_tensor_ops(x):
    d = x.abs() + 1
    return 1 - x, 2 / d, 3 // d, 2 ** x, 5 % d


@case((2, 3), (3,))
def broadcasting_arithmetic(x, b):
    return x + b, x * b[None, :], (x - b).sum(0)


@case(inputs=lambda: (randn(3, dtype=torch.float64), randn(3)))
def tensor_dtype_promotion(x64, x32):
    y = x64 + x32
    return y, y.dtype, (x32 * 2).dtype


@case(inputs=lambda: (rand_int(0, 5, 3), randn(3)))
def int_tensor_plus_float_tensor(i, x):
    return i + x, (i + x).dtype, i * i


@case((3,))
def zero_dim_tensor_promotion(x):
    s = torch.tensor(2)
    d = torch.tensor(2.5, dtype=torch.float64)
    return x * s, x * d, (x * d).dtype


@case((4,))
def python_float_and_int_operators(x):
    a = 7.5 // 2
    b = 7.5 % 2
    c = -7 % 3
    d = int(3.9)
    e = float(2)
    return x + a + b, a, c, d, e


@case((3, 4))
def comparison_results_as_values(x):
    a = 3 < 4 <= 4
    b = not (2 == 3)
    c = 1 < 2 > 3
    return x * int(a), a, b, c


@case((3, 4), (3, 4))
def torch_binary_functions(x, y):
    return (torch.add(x, y, alpha=2), torch.sub(x, y), torch.mul(x, 3),
            torch.div(x, 2, rounding_mode="floor"), torch.maximum(x, y),
            torch.minimum(x, y), torch.div(x, 3, rounding_mode="trunc"))


@case((3, 4))
def torch_unary_functions(x):
    return (torch.exp(x), torch.sin(x), torch.tanh(x), torch.sigmoid(x),
            torch.sqrt(x.abs()), torch.log1p(x.abs()), torch.floor(x), torch.sign(x))


@case(inputs=lambda: (positive(3, 4),))
def logs_and_reciprocals(x):
    return x.log(), x.reciprocal(), x.rsqrt(), torch.log2(x), 1 / x


@case((3, 4))
def where_and_clamp(x):
    return (torch.where(x > 0, x, x * 0.1), torch.clamp(x, -0.5, 0.5),
            x.clamp(min=0), x.clamp(max=0.25))


@case((3, 4))
def constant_tensor_creation(x):
    t = torch.tensor([1.0, 2.0, 3.0, 4.0])
    return (x + t, torch.ones(3, 4) * 2, torch.zeros_like(x) + 1,
            torch.full((3, 4), 0.5) * x, torch.arange(4) * 2, torch.eye(4) @ x.t())


@case((3, 4))
def float_constants_inf(x):
    big = float("inf")
    return x.clamp(min=-big, max=1.0), x * 1e-3, x + 1e3 - 1e3
