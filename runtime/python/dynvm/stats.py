"""Counters of what dynvm compiled in this process, read by the run report, cleared by reset()."""

from dynvm._record import Record


class CompileStats(Record):
    """What was compiled so far. Lists hold one dict per event (graph_breaks and
    recompiles: reason, filename, lineno). A plain class: `dynvm run` imports this module
    before the script starts, and dataclasses cost 30 ms of start-up."""

    FIELDS = ("frames_compiled", "graphs", "graph_breaks", "recompiles", "cache_hits",
              "time_tracing_s")

    def __init__(self):
        self.frames_compiled = 0
        self.graphs = []
        self.graph_breaks = []
        self.recompiles = []
        self.cache_hits = 0
        self.time_tracing_s = 0.0



_current = CompileStats()


def current():
    """The live counters of this process."""
    return _current


def clear():
    """Sets every counter back to zero, in place."""
    fresh = CompileStats()
    for field in CompileStats.FIELDS:
        setattr(_current, field, getattr(fresh, field))
