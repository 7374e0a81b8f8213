"""What dynvm.explain reports about one call: graphs, breaks and guards."""

import collections

from dynvm._record import Record

# Plain classes, not dataclasses, and `re` imported on first use: `import dynvm` (and so
# `dynvm run`) stays quick.


class BreakReason(collections.namedtuple("BreakReason", "reason filename lineno")):
    """One graph break: why the VM stopped, and where in the user's code."""

    __slots__ = ()

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}"


def _op_names(graph_text):
    import re

    return re.findall(r"= ([A-Za-z_][\w]*::[\w.]+)\(", graph_text)


def _symbols(graph_text):
    """'s0 = L['x'].size()[0]' per size symbol a graph declares (dynamic shapes)."""
    import re

    return [f"{name} = {source}" for name, source in
            re.findall(r'^symbol (s\d+) = -?\d+ from "(.*)"$', graph_text, re.MULTILINE)]


class ExplainOutput(Record):
    """The result of dynvm.explain(fn)(*args, **kwargs): graph_count, graph_break_count,
    break_reasons (BreakReason), ops_per_graph (lists of op names), guards (their
    descriptions), symbols (per graph, its size symbols and where each is read: dynamic
    shapes), cuda_graphs (mode="reduce-overhead": per graph, whether it replays as a
    CUDA graph, or why not) and note (why the numbers are what they are, when that needs
    saying)."""

    FIELDS = ("graph_count", "graph_break_count", "break_reasons", "ops_per_graph", "guards",
              "symbols", "cuda_graphs", "note")

    def __init__(self, graph_count=0, graph_break_count=0, break_reasons=None,
                 ops_per_graph=None, guards=None, symbols=None, cuda_graphs=None, note=""):
        self.graph_count = graph_count
        self.graph_break_count = graph_break_count
        self.break_reasons = [] if break_reasons is None else break_reasons
        self.ops_per_graph = [] if ops_per_graph is None else ops_per_graph
        self.guards = [] if guards is None else guards
        self.symbols = [] if symbols is None else symbols
        self.cuda_graphs = [] if cuda_graphs is None else cuda_graphs
        self.note = note


    @classmethod
    def from_native(cls, native):
        """Builds the report from dynvm._C.CompiledFunction.explain()'s dictionary."""
        ops = [_op_names(text) for text in native["graphs"]]
        return cls(
            graph_count=len(native["graphs"]),
            graph_break_count=len(native["breaks"]),
            break_reasons=[BreakReason(r, f, l) for r, f, l in native["breaks"]],
            ops_per_graph=ops,
            guards=list(native["guards"]),
            symbols=[_symbols(text) for text in native["graphs"]],
            cuda_graphs=list(native.get("cuda_graphs", [])),
        )

    def __str__(self):
        lines = [
            f"graphs: {self.graph_count}",
            f"graph breaks: {self.graph_break_count}",
        ]
        lines += [f"  break at {reason}" for reason in self.break_reasons]
        for index, ops in enumerate(self.ops_per_graph):
            lines.append(f"graph {index}: {len(ops)} ops: {', '.join(ops)}")
        lines += [f"guard: {guard}" for guard in self.guards]
        lines += [f"graph {index}: dynamic sizes {', '.join(symbols)}"
                  for index, symbols in enumerate(self.symbols) if symbols]
        lines += [f"graph {index}: {note}" for index, note in enumerate(self.cuda_graphs)]
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)
