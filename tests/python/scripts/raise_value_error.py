"""Dies of an uncaught ValueError raised two frames deep."""


def fail(value):
    raise ValueError(f"bad value: {value}")


print("before the error")
fail(42)
