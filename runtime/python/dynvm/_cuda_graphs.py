"""Recording a variant's run as a CUDA graph, for mode="reduce-overhead".

The native runtime (runtime/cuda_graph_replay.cpp) calls begin() just before the run it
records and end() right after it, then keeps the graph and calls its replay(). The graph
gets a private memory pool: what the recorded run allocates stays reserved for replays.
"""

import torch

_capture_stream = None  # one side stream for every recording, made on first use


def begin():
    """Starts recording on the capture stream; returns the (graph, stream context) pair
    that end() takes."""
    global _capture_stream
    if _capture_stream is None:
        _capture_stream = torch.cuda.Stream()
    torch.cuda.synchronize()  # work queued before the recording is not part of it
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.stream(_capture_stream)
    stream.__enter__()
    try:
        graph.capture_begin()
    except BaseException:
        stream.__exit__(None, None, None)
        raise
    return graph, stream


def end(recording, failed):
    """Ends the recording begin() started. With `failed` (the recorded run raised), an
    error from ending it is dropped: the run's own error is the one reported."""
    graph, stream = recording
    try:
        graph.capture_end()
    except Exception:
        if not failed:
            raise
    finally:
        stream.__exit__(None, None, None)
