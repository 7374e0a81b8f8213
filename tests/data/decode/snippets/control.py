"""Branches, loops, comparisons, exceptions, with and match."""


def branches(a, b, xs):
    if a < b and b <= 3 or a == 4:
        a += 1
    elif a is None or b is not None:
        a -= 1
    while a > 0:
        a //= 2
        if a != 7:
            continue
        break
    for i, x in enumerate(xs):
        if x in xs or x not in (1, 2):
            a = a if a >= i else i
    else:
        a = -a
    return a and b or not a


def exceptions(path):
    try:
        with open(path) as f:
            data = f.read()
    except (OSError, ValueError) as e:
        raise RuntimeError("bad") from e
    except Exception:
        raise
    else:
        return data
    finally:
        print("done")


def groups():
    try:
        pass
    except* ValueError as eg:
        print(eg)
    except* TypeError:
        pass


def matching(command):
    match command:
        case ["go", direction]:
            return direction
        case {"x": x, **rest}:
            return x, rest
        case Point(x=0, y=y) if y > 0:
            return y
        case str() | bytes():
            return "text"
        case _:
            return None


class Point:
    __match_args__ = ("x", "y")
