"""Counters of what dynvm compiled in this process, read by the run report, cleared by reset()."""

import dataclasses


@dataclasses.dataclass
class CompileStats:
    """What was compiled so far. Lists hold one dict per event."""

    frames_compiled: int = 0
    graphs: list = dataclasses.field(default_factory=list)
    graph_breaks: list = dataclasses.field(default_factory=list)  # reason, filename, lineno
    recompiles: list = dataclasses.field(default_factory=list)  # reason, filename, lineno
    cache_hits: int = 0
    time_tracing_s: float = 0.0


_current = CompileStats()


def current():
    """The live counters of this process."""
    return _current


def clear():
    """Sets every counter back to zero, in place."""
    fresh = CompileStats()
    for field in dataclasses.fields(CompileStats):
        setattr(_current, field.name, getattr(fresh, field.name))
