"""Break corpus: generators and coroutines — consumed in a for loop with a break in
the loop body, generator functions that break inside themselves, generators passed
in as arguments (what is left in them is compared), yield from, send(), and
coroutines driven by hand."""

import torch

from break_corpus._scenario import randn, scenario


def _scaled(t, n):
    for i in range(n):
        yield t * (i + 1)


@scenario(lambda: (randn(3),))
def generator_loop_with_print_in_body(x):
    total = torch.zeros(3)
    for part in _scaled(x, 3):
        print("part sum positive:", bool(part.sum() > 0))
        total = total + part
    return total


def _noisy(t):
    yield t + 1
    print("generator resumed")
    yield t * 2
    print("generator finishing")


@scenario(lambda: (randn(2),))
def generator_function_breaks_inside(x):
    y = x.exp()
    parts = list(_noisy(y))
    return parts[0] + parts[1]


@scenario(lambda: (randn(3), (t for t in [randn(3) for _ in range(4)])))
def generator_argument_partly_consumed(x, source):
    acc = x.clone()
    for t in source:
        acc = acc + t
        if acc.sum().item() > 0:
            break
    return acc


@scenario(lambda: (randn(2),))
def generator_break_out_of_loop_closes_it(x):
    closed = []

    def gen(t):
        try:
            for i in range(5):
                yield t * i
        finally:
            closed.append("closed")
            print("generator closed")

    out = torch.zeros(2)
    g = gen(x)
    for v in g:
        out = out + v
        if v.abs().sum() > 0:
            break
    g.close()
    return out, closed


def _inner(t):
    yield t.sin()
    yield t.cos()
    return "inner done"


def _outer(t):
    result = yield from _inner(t)
    print("yield from returned", result)
    yield t * 0


@scenario(lambda: (randn(3),))
def yield_from_with_return_value(x):
    vals = [v * 2 for v in _outer(x + 1)]
    return torch.stack(vals).sum(0)


def _averager():
    total = torch.zeros(2)
    count = 0
    avg = None
    while True:
        value = yield avg
        total = total + value
        count += 1
        avg = total / count


@scenario(lambda: ([randn(2), randn(2), randn(2)],))
def generator_send_running_average(values):
    g = _averager()
    next(g)
    out = []
    for v in values:
        avg = g.send(v * 2)
        print("average norm", round(avg.norm().item(), 4))
        out.append(avg)
    return torch.stack(out)


async def _scale_async(t, factor):
    print("coroutine running")
    return t * factor


@scenario(lambda: (randn(3),))
def coroutine_driven_by_send(x):
    y = x + 1
    coro = _scale_async(y, 3)
    try:
        coro.send(None)
    except StopIteration as stop:
        result = stop.value
    return result - y


@scenario(lambda: (randn(2, 3),))
def generator_expression_with_item(x):
    values = sum(v.item() for v in x.sum(dim=1))
    return x * values


@scenario(lambda: (randn(3),))
def generator_returned_from_compiled_function(x):
    y = x * 2
    print("making a generator")
    return (y + i for i in range(3))


@scenario(lambda: (randn(2), iter([randn(2), randn(2), randn(2), randn(2)])))
def list_iterator_argument_next_then_break(x, it):
    first = next(it) * x
    print("took one")
    second = next(it)
    return first + second


@scenario(lambda: ([randn(2), randn(2), randn(2)], [randn(2), randn(2), randn(2)]))
def zip_object_consumed_across_break(xs, ys):
    pairs = zip(xs, ys)
    a, b = next(pairs)
    head = a * b
    print("first pair done")
    rest = [u + v for u, v in pairs]
    return head + sum(rest)


@scenario(lambda: (randn(3), enumerate([randn(3), randn(3), randn(3)])))
def enumerate_argument_partly_consumed(x, items):
    total = x.clone()
    for i, t in items:
        total = total + t * i
        if i == 1:
            print("stopping after", i)
            break
    return total


@scenario(lambda: (randn(2), map(lambda t: t * 2, [randn(2), randn(2), randn(2)])))
def map_argument_consumed_before_and_after_break(x, mapped):
    a = next(mapped) + x
    print("mapped one")
    b = next(mapped) - x
    return a * b


@scenario(lambda: (reversed([randn(2), randn(2), randn(2)]),))
def reversed_iterator_argument(it):
    last = next(it).exp()
    middle = next(it)
    print("two taken")
    return last + middle
