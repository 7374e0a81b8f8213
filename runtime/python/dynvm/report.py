"""The report `dynvm run` gives at exit: what was compiled, where it broke, and time spent."""

import os

from dynvm import _native, _version, backends, config


def compile_status(compile_requested, backend):
    """One sentence saying whether compilation happened, and if not, why."""
    if not compile_requested:
        return "compilation was turned off by --no-compile; the script ran in plain CPython"
    if config.disabled():
        return "compilation was turned off by DYNVM_DISABLE; the script ran in plain CPython"
    reason = backends.unavailable_reason(backend, load=False)
    if reason is not None:
        return (
            f"compilation is not available in this build: {reason}; "
            "the script ran in plain CPython"
        )
    return "compiled"


def build(run, stats, time_running_s):
    """The report as a JSON-ready dict. `run` is the _cli.RunSettings of this run."""
    import sys

    status = compile_status(run.compile, run.backend)
    from dynvm import _cli

    if status == "compiled" and _cli.effective_backend() is None and "torch" not in sys.modules:
        status = "the script never imported torch, so there was nothing to compile"

    effective = _cli.effective_backend()
    if run.compile and not config.disabled() and effective is not None:
        # The frame hook ran: the native core has the figures (the report never loads
        # the core itself, which would import torch at exit).
        native = _native.loaded().run_report()
        status = "compiled"
        if effective != run.backend:
            status = (
                f"compiled; backend {run.backend!r} is not built yet "
                f"({backends.unavailable_reason(run.backend, load=False)}), "
                f"so graphs ran with backend {effective!r}"
            )
        return {
            "dynvm_version": _version.__version__,
            "script": run.script,
            "backend": effective,
            "mode": run.mode,
            "status": status,
            "frames_compiled": len(native["frames_compiled"]),
            "frames": native["frames_compiled"],
            "graphs": native["graphs"],
            "graph_breaks": native["breaks"],
            "recompiles": native["recompiles"],
            "cuda_graphs": native["cuda_graphs"],
            "cache_hits": native["cache_hits"],
            "kernels_compiled": native["kernels_compiled"],
            "kernels_from_disk": native["kernels_from_disk"],
            "kernel_cache_dir": native["kernel_cache_dir"],
            "time_tracing_s": native["trace_seconds"],
            "time_running_graphs_s": native["run_seconds"],
            "time_running_s": time_running_s,
        }
    return {
        "dynvm_version": _version.__version__,
        "script": run.script,
        "backend": run.backend,
        "mode": run.mode,
        "status": status,
        "frames_compiled": stats.frames_compiled,
        "graphs": list(stats.graphs),
        "graph_breaks": list(stats.graph_breaks),
        "recompiles": list(stats.recompiles),
        "cache_hits": stats.cache_hits,
        "time_tracing_s": stats.time_tracing_s,
        "time_running_s": time_running_s,
    }


def _where(event):
    return f"{event.get('filename', '?')}:{event.get('lineno', '?')}"


def format_text(report):
    """The report as lines for stderr, each starting with "dynvm: "."""
    lines = [
        f"run report for {os.path.basename(report['script'])}",
        f"  {report['frames_compiled']} frames compiled, {len(report['graphs'])} graphs, "
        f"{len(report['graph_breaks'])} graph breaks, {len(report['recompiles'])} "
        f"recompiles, {report['cache_hits']} cache hits",
    ]
    if not report["status"].startswith("compiled"):
        lines.append(f"  nothing was compiled: {report['status']}")
    elif report["status"] != "compiled":
        lines.append(f"  {report['status']}")
    for graph in report["graphs"]:
        if "location" in graph:
            lines.append(f"  graph of {graph['ops']} ops: {graph['function']} from {graph['location']}")
            if graph.get("symbols"):
                assumed = "; assumes " + ", ".join(graph["relations"]) \
                    if graph.get("relations") else ""
                lines.append(f"    dynamic sizes: {', '.join(graph['symbols'])}{assumed}")
    for event in report["graph_breaks"]:
        count = f" ({event['count']}x)" if event.get("count", 1) > 1 else ""
        lines.append(f"  graph break at {_where(event)}{count}: {event.get('reason', '')}")
    for event in report["recompiles"]:
        if "guard" in event:
            lines.append(f"  recompiled {event['function']}: {event['guard']}")
        else:
            lines.append(f"  recompiled at {_where(event)}: {event.get('reason', '')}")
    for event in report.get("cuda_graphs", []):
        lines.append(f"  CUDA graph of {event['graph']}: {event['note']}")
    compiled, from_disk = report.get("kernels_compiled", 0), report.get("kernels_from_disk", 0)
    if compiled or from_disk:
        lines.append(f"  kernels: {compiled} compiled, {from_disk} reused from the disk cache "
                     f"({report.get('kernel_cache_dir', '?')})")
    lines.append(
        f"  time: {report['time_tracing_s']:.3f} s tracing, "
        f"{report['time_running_s']:.3f} s running"
    )
    return "".join(f"dynvm: {line}\n" for line in lines)


def write_json(report, path):
    """Writes the report to `path` as JSON."""
    import json  # here: json imports re, which `dynvm run` need not load before the script

    with open(path, "w", encoding="utf-8") as out:
        json.dump(report, out, indent=2)
        out.write("\n")
