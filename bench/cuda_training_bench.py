"""Training steps on a CUDA device: the workloads of bench/cpu_training_bench.py (GPT-2-style
4 layers, resnet18 at 64x64, the 3-layer MLP) moved to the GPU, each step forward, loss,
backward and AdamW, with the model compiled by dynvm (compiled backward, CUDA kernels
both ways) and by Inductor. With --whole-step each compiler compiles the step function
instead (forward, loss, backward as a graph break, AdamW's foreach update and zero_grad).
Best per-step time of interleaved rounds after a synchronize, in milliseconds.

    PYTHONPATH=build/python:tests python bench/cuda_training_bench.py [--no-inductor]
        [--whole-step] [--rounds N] [--profile] [names...]

--profile: afterwards, the 12 costliest CUDA kernels of 5 steps of each side
(torch.profiler), to see where a side's step goes.
"""

import copy
import sys

import torch

import dynvm
from cpu_training_bench import WORKLOADS
from timing import interleaved_best, take_rounds


def print_profile(title, step, args):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step(*args)
    print(f"-- {title}: 5 steps")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))


def main(argv):
    rounds, argv = take_rounds(argv, 3)
    inductor = "--no-inductor" not in argv
    profile = "--profile" in argv
    whole_step = "--whole-step" in argv
    names = [a for a in argv if not a.startswith("--")] or list(WORKLOADS)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| workload | eager ms | Inductor ms | dynvm ms | eager/dv | ind/dv |")
    print("|---|---|---|---|---|---|")
    for name in names:
        model, args, loss_of = WORKLOADS[name]("cuda")
        sides = [("eager", model), ("dynvm", copy.deepcopy(model))]
        if inductor:
            sides.append(("inductor", copy.deepcopy(model)))
        steps = []
        for side, m in sides:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
            compiler = {"dynvm": dynvm.compile, "inductor": torch.compile}.get(side)
            fn = compiler(m) if compiler is not None and not whole_step else m

            def update(*a, fn=fn, opt=opt):
                loss = loss_of(fn(*a))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            if compiler is not None and whole_step:
                update = compiler(update)

            def step(*a, update=update):
                update(*a)
                torch.cuda.synchronize()

            steps.append(step)
        times = interleaved_best(steps, args, repeats=rounds)
        e, d = times[0] * 1e3, times[1] * 1e3
        i = times[2] * 1e3 if inductor else float("nan")
        print(f"| {name} | {e:.2f} | {i:.2f} | {d:.2f} | {e / d:.2f} | {i / d:.2f} |", flush=True)
        if profile:
            for (side, _), step in zip(sides, steps):
                print_profile(f"{name} {side}", step, args)
    print(f"dynvm counters: {dict(dynvm.counters)}")


if __name__ == "__main__":
    main(sys.argv[1:])
