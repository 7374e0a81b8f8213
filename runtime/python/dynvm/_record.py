"""Record: equality and repr over a class's FIELDS, for the small value classes that
`import dynvm` and `dynvm run` load (dataclasses would cost 30 ms of start-up)."""


class Record:
    """A base class whose instances compare and print by the attributes named in FIELDS."""

    FIELDS = ()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    __hash__ = None  # mutable, like a dataclass without frozen=True

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS)
        return f"{type(self).__name__}({fields})"
