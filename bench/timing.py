"""Timing shared by the benchmarks: the best per-call time of a callable."""
import time


def seconds_per_call(fn, args, min_time=0.3, rounds=5, warmup=3):
    """The fastest of `rounds` timed loops, each of as many calls (a power of two) as take
    about min_time / rounds seconds, after `warmup` calls."""
    for _ in range(warmup):
        fn(*args)
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        if time.perf_counter() - start >= min_time / rounds:
            break
        calls *= 2
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def interleaved_best(fns, args, repeats=3, warmup=3, **kwargs):
    """The best seconds_per_call(fn, args, **kwargs) of each of `fns` over `repeats` passes
    that time every fn in turn, after `warmup` calls of each: on a shared machine a burst of
    load then slows each side alike instead of the one that happened to be running."""
    for fn in fns:
        for _ in range(warmup):
            fn(*args)
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], seconds_per_call(fn, args, warmup=0, **kwargs))
    return best


def take_rounds(argv, default):
    """The value of a `--rounds N` option (or `default`) and the arguments without it."""
    if "--rounds" not in argv:
        return default, argv
    at = argv.index("--rounds")
    return int(argv[at + 1]), argv[:at] + argv[at + 2:]


def cuda_median_ms(fn, args, loops=5, calls=100, warmup=10):
    """The median over `loops` CUDA-event timed loops of `calls` calls each, after
    `warmup` calls, in milliseconds per call (the GPU's time, launches included)."""
    import torch

    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(loops):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)[len(times) // 2]


def cuda_cold_call(fn, args):
    """(result, wall seconds) of one call, the GPU synchronized before and after: the
    first call of a compiled function is its compile time plus one run."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*args)
    torch.cuda.synchronize()
    return out, time.perf_counter() - start
