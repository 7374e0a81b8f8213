"""What dynvm.explain reports about one call: graphs, breaks and guards."""

import dataclasses
import re

_OP = re.compile(r"= ([A-Za-z_][\w]*::[\w.]+)\(")


@dataclasses.dataclass
class BreakReason:
    """One graph break: why the VM stopped, and where in the user's code."""

    reason: str
    filename: str
    lineno: int

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}"


@dataclasses.dataclass
class ExplainOutput:
    """The result of dynvm.explain(fn)(*args, **kwargs)."""

    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = dataclasses.field(default_factory=list)  # of BreakReason
    ops_per_graph: list = dataclasses.field(default_factory=list)  # of lists of op names
    guards: list = dataclasses.field(default_factory=list)  # of guard descriptions
    # mode="reduce-overhead": per graph, whether it replays as a CUDA graph, or why not
    cuda_graphs: list = dataclasses.field(default_factory=list)
    note: str = ""  # why the numbers are what they are, when that needs saying

    @classmethod
    def from_native(cls, native):
        """Builds the report from dynvm._C.CompiledFunction.explain()'s dictionary."""
        ops = [_OP.findall(text) for text in native["graphs"]]
        return cls(
            graph_count=len(native["graphs"]),
            graph_break_count=len(native["breaks"]),
            break_reasons=[BreakReason(r, f, l) for r, f, l in native["breaks"]],
            ops_per_graph=ops,
            guards=list(native["guards"]),
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
        lines += [f"graph {index}: {note}" for index, note in enumerate(self.cuda_graphs)]
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)
