"""Operators, slices, f-strings, unpacking, comprehensions, closures, generators."""


def operators(a, b):
    c = a + b - a * b / 2 // 3 % 4 ** 2 @ b
    c <<= 1
    c >>= 1
    c &= a | b ^ ~a
    return -c, +c, not c, a[1:2], a[::2], a[b:], a[1:2:3]


def slices(seq, value):
    seq[1:3] = value
    del seq[0:1]
    seq[0] = value
    del seq[0]
    x, *rest, y = seq
    (p, q), r = value
    return x, rest, y, p, q, r


def strings(name, width):
    return f"{name!r:>{width}} {name!s} {name!a} {width:04d} {name}"


def comprehensions(xs):
    squares = [x * x for x in xs if x]
    mapping = {x: y for x, y in zip(xs, xs)}
    unique = {x % 3 for x in xs}
    total = sum(x for x in xs)
    return squares, mapping, unique, total


def closures(n):
    count = 0

    def bump(step=1):
        nonlocal count
        count += step * n
        return count

    return bump


def generator(xs):
    yield 1
    yield from xs
    return (yield)


async def coroutine(session, urls):
    async with session as s:
        async for url in s.fetch(urls):
            await url
    return [u async for u in session]


def walrus(data):
    if (n := len(data)) > 10:
        return n
    return (
        data
        .strip()
        .upper()
    )
