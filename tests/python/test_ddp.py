"""DistributedDataParallel under dynvm (issue 15): two processes on the gloo backend train
10 steps with the model compiled as dynvm.compile(DDP(model)) (DDP's forward eager, the
wrapped module compiled, runtime/python/dynvm/wrappers.py DistributedCall) and as
DDP(dynvm.compile(model)), and end with eager DDP's parameters and buffers. Both ranks end
equal, which they only do when DDP's hooks all-reduced the gradients of the compiled
backward."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import needs_codegen

pytestmark = [
    needs_codegen,
    pytest.mark.skipif(not torch.distributed.is_available() or
                       not torch.distributed.is_gloo_available(),
                       reason="this torch has no gloo backend"),
]

WORKER = pathlib.Path(__file__).resolve().parent / "distributed" / "ddp_train.py"


def _train(mode, out):
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(WORKER), mode, str(out)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1"))
    # The launcher's own report of a failed rank is about 3,000 characters long: the
    # rank's traceback (or, from faulthandler, its Python stack at a crash) is before it.
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-20000:]
    return [torch.load(out / f"{mode}-{rank}.pt") for rank in range(2)]


@pytest.fixture(scope="module")
def eager_ranks(tmp_path_factory):
    return _train("eager", tmp_path_factory.mktemp("ddp"))


@pytest.mark.parametrize("mode", ["outer", "inner"])
def test_ddp_trains_like_eager_ddp(mode, eager_ranks, tmp_path):
    ranks = _train(mode, tmp_path)
    for state, want in zip(ranks, eager_ranks):
        assert state.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(state[name], want[name], rtol=1e-5, atol=1e-6, msg=name)
    # Parameters only: each rank's batch-norm statistics are its own data's after the
    # last forward (DDP broadcasts rank 0's buffers before each forward, not after).
    for name in [n for n in ranks[0] if n.endswith(("weight", "bias"))]:
        torch.testing.assert_close(ranks[1][name], ranks[0][name], rtol=0, atol=0, msg=name)
    counters = json.loads((tmp_path / f"{mode}-counters.json").read_text())
    # The step ran the compiled forward and the compiled backward, not eager.
    assert counters["compiled_backwards"] >= 1 and counters["kernels"] >= 1, counters
    assert counters["cache_hits"] >= 8, counters
