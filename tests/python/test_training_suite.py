"""Training the VM-suite models (tests/models/registry.py) with dynvm against eager: 20
steps of SGD with momentum and of AdamW from one seed, under backends "eager" and
"dynvm" (a compiled backward, graph/autodiff.h). Every step starts from eager's
parameters and buffers; its loss, parameter gradients and buffers (BatchNorm statistics)
then match eager's within 1e-4 relative to each tensor's largest magnitude (for
gradients, at least 1e-3 of the model's largest gradient), or, where eager's float32
strays further from a float64 run of the same step, are no further from it than twice
eager's distance, or, where a ReLU input within rounding of zero makes the step itself
ill-conditioned, within twice what eager's own result moves when its parameters change
by about 1e-6 relative (`_close`). Dropout draws the same masks
(the user's generator). The torchvision models train at 64x64 (batch 4; vit_b_16 at
224), resnet50, vit_b_16 and densenet121 only with DYNVM_TRAINING_ALL=1."""

import copy
import os
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import dynvm
from conftest import needs_codegen

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from models import registry  # noqa: E402

pytestmark = pytest.mark.skipif(
    not getattr(dynvm, "vm_available", lambda: False)(), reason="the VM is not built yet"
)

STEPS = 20
REL = 1e-4


def _close(actual, expected, what, floor=1e-12, exact=None, spread=None):
    """Within REL of expected, relative to its largest magnitude (at least `floor`). Where
    not, and `exact()` gives the float64 value of the same step, no further from it than
    twice eager's float32 is: a step can be ill-conditioned enough (batch norm over few
    values) that eager's float32 itself strays from float64 by more than REL. Where not
    even that, within twice `spread()`: how far eager's own float32 result moves when its
    parameters change by about 1e-6 relative, the size of the rounding differences
    between two float32 computations of the same activations a few layers deep (eager's
    against float64, or against fused kernels that round elsewhere). A ReLU whose input
    lies that close to zero passes or blocks its gradient depending on those roundings,
    and a sum with much cancellation (a batch-norm bias's gradient) or batch norm over a
    few values makes one such element a large relative change: resnet18 at 64x64, AdamW
    step 5, has one of 65,536 elements of layer1's output on the other side of zero under
    backend "dynvm", which moves layer1's bias gradients by 4e-2 relative. Such a step's
    gradient is only defined to that precision in float32, for eager as for any compiler,
    and which side of zero eager's rounding happens to fall on says nothing."""
    scale = max(expected.abs().max().item(), floor)
    err = (actual - expected).abs().max().item()
    if err <= REL * scale:
        return
    assert exact is not None, f"{what}: max error {err:.3g} against scale {scale:.3g}"
    wide = exact()
    mine = (actual.double() - wide).abs().max().item()
    theirs = (expected.double() - wide).abs().max().item()
    if mine <= 2 * theirs + 0.1 * REL * scale:
        return
    moved = spread() if spread is not None else 0.0
    assert err <= 2 * moved + 0.1 * REL * scale, (
        f"{what}: {err:.3g} from eager (scale {scale:.3g}); from float64 {mine:.3g}, "
        f"eager's {theirs:.3g}; eager moves {moved:.3g} when its parameters change by "
        f"{SPREAD_CHANGE:.2g}")


# How many times eager's step is rerun with its parameters changed, and by how much.
SPREAD_RUNS = 8
SPREAD_CHANGE = 2.0**-20


def _setup(name):
    if name in registry.TORCHVISION_NAMES:
        if not registry.torchvision_available():
            pytest.skip("torchvision is not installed")
        if name in HEAVY and not os.environ.get("DYNVM_TRAINING_ALL"):
            pytest.skip("a heavy model: DYNVM_TRAINING_ALL=1 trains it too")
        from models import torchvision_models

        size = 224 if name == "vit_b_16" else int(os.environ.get("DYNVM_TRAINING_SIZE", "64"))
        model = torchvision_models.build(name)
        batches = [torchvision_models.make_inputs(4, seed, size=size) for seed in range(STEPS)]

        def loss_of(out, step):
            target = torch.arange(out.shape[0]) * (step + 1) % out.shape[-1]
            return F.cross_entropy(out, target)
    else:
        spec = registry.spec(name)
        model = spec.build()
        batches = [spec.make_inputs(2, seed) for seed in range(STEPS)]

        def loss_of(out, step):
            return out.logsumexp(-1).mean()
    return model.train(), batches, loss_of


# Trained only with DYNVM_TRAINING_ALL=1 (minutes each on two cores).
HEAVY = ("resnet50", "vit_b_16", "densenet121")


def _cases():
    for name in registry.ALL_NAMES:
        for optimizer in ("sgd", "adamw"):
            for backend in ("dynvm", "eager"):
                yield pytest.param(name, optimizer, backend)


@needs_codegen
@pytest.mark.parametrize("name,optimizer,backend", list(_cases()))
def test_training_matches_eager(name, optimizer, backend):
    model, batches, loss_of = _setup(name)
    reference = copy.deepcopy(model)
    compiled = dynvm.compile(model, backend=backend)

    def make(params):
        if optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.01, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-3)

    opt, ref_opt = make(model.parameters()), make(reference.parameters())
    for step, args in enumerate(batches):
        # Each step starts from eager's parameters and buffers (copied in place: the same
        # tensors, so no guard fails), so that what is compared is the step's computation,
        # not 20 steps of float32 rounding amplified (training a small batch is chaotic
        # enough that eager's own float32 strays from float64 by more than 1e-4).
        with torch.no_grad():
            for mine, theirs in zip(list(model.parameters()) + list(model.buffers()),
                                    list(reference.parameters()) + list(reference.buffers())):
                mine.copy_(theirs)
        start = copy.deepcopy(reference.state_dict())
        wide = {}

        def exact(kind, key, step=step, args=args, start=start):
            """The float64 loss, gradient or buffer of this step (computed once)."""
            if not wide:
                m = copy.deepcopy(reference).double()
                m.load_state_dict(start)
                torch.manual_seed(1000 + step)
                loss = loss_of(m(*(a.double() if a.is_floating_point() else a for a in args)),
                               step)
                loss.backward()
                wide["loss"] = {None: loss.detach()}
                wide["grad"] = {n: q.grad for n, q in m.named_parameters()}
                wide["buffer"] = dict(m.named_buffers())
            return wide[kind][key]

        moved = {}

        def spread(kind, key, step=step, args=args, start=start):
            """The most eager's float32 loss, gradient or buffer of this step moves from its
            own value over SPREAD_RUNS runs, each with every parameter multiplied by
            1 +- SPREAD_CHANGE (signs drawn from a seeded generator; computed once)."""
            if not moved:
                runs = []
                for run in range(SPREAD_RUNS):
                    m = copy.deepcopy(reference)
                    m.load_state_dict(start)
                    signs = torch.Generator().manual_seed(run)
                    with torch.no_grad():
                        for q in m.parameters():
                            flip = torch.randint(0, 2, q.shape, generator=signs) * 2 - 1
                            q.mul_(1 + flip.to(q.dtype) * SPREAD_CHANGE)
                    torch.manual_seed(1000 + step)
                    loss = loss_of(m(*args), step)
                    loss.backward()
                    runs.append({"loss": {None: loss.detach()},
                                 "grad": {n: q.grad for n, q in m.named_parameters()},
                                 "buffer": dict(m.named_buffers())})
                moved["runs"] = runs
            own = {"loss": {None: losses[1]},
                   "grad": {n: q.grad for n, q in reference.named_parameters()},
                   "buffer": dict(reference.named_buffers())}[kind][key]
            return max((r[kind][key] - own).abs().max().item() for r in moved["runs"])

        losses = []
        for fn, o in ((compiled, opt), (reference, ref_opt)):
            torch.manual_seed(1000 + step)
            loss = loss_of(fn(*args), step)
            o.zero_grad(set_to_none=True)
            loss.backward()
            losses.append(loss.detach())
        _close(losses[0], losses[1], f"loss at step {step}",
               exact=lambda: exact("loss", None), spread=lambda: spread("loss", None))
        # A gradient that is zero in exact arithmetic (an attention key's bias: softmax
        # ignores a constant per row) is rounding noise on both sides: it is compared
        # against 1e-3 of the largest gradient of the model.
        floor = 1e-3 * max(q.grad.abs().max().item() for q in reference.parameters()
                           if q.grad is not None)
        for (pname, p), q in zip(model.named_parameters(), reference.parameters()):
            assert (p.grad is None) == (q.grad is None), pname
            if q.grad is not None:
                _close(p.grad, q.grad, f"gradient of {pname} at step {step}", floor,
                       exact=lambda pname=pname: exact("grad", pname),
                       spread=lambda pname=pname: spread("grad", pname))
        for (bname, b), c in zip(model.named_buffers(), reference.buffers()):
            if b.is_floating_point():
                # Running means of channels whose batch mean is about zero: 1e-6 floor.
                _close(b, c, f"buffer {bname} at step {step}", 1e-6,
                       exact=lambda bname=bname: exact("buffer", bname),
                       spread=lambda bname=bname: spread("buffer", bname))
            else:
                assert torch.equal(b, c), bname
        opt.step()
        ref_opt.step()
    counts = dynvm.counters
    assert counts["graph_failures"] == 0, counts
    assert counts["recompiles"] == 0, counts
    if backend == "dynvm":
        assert counts["compiled_backwards"] >= 1, counts
