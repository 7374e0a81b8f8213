"""What the model sweeps and the model tests share: a model's outputs as a flat list of
tensors, the comparison with eager's, Dynamo's explain of the same call, and the short
form of a break reason that the sweeps count."""

import time


def outputs_as_tensors(output):
    """The tensors of a model output in order: a tensor, a transformers ModelOutput, a
    tuple or list, a dict's values (detection and segmentation outputs); anything else
    (cache objects, None) is skipped."""
    import torch

    if isinstance(output, torch.Tensor):
        return [output]
    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    elif isinstance(output, dict):
        output = list(output.values())
    tensors = []
    if isinstance(output, (tuple, list)):
        for item in output:
            tensors.extend(outputs_as_tensors(item))
    return tensors


def assert_outputs_close(got, expected, rtol=1e-3, atol=1e-3):
    """torch.testing.assert_close over the tensors of two outputs; atol is relative to the
    largest magnitude of each expected tensor, since random-weight models reach values far
    from 1 either way (a ResNet's logits in the hundreds, torchvision's EfficientNet's at
    64x64 near 1e-15) and float32 kernels that reorder sums differ by a few ulps of it.
    Integer tensors (detection labels) and shapes must match exactly."""
    import torch

    got_tensors = outputs_as_tensors(got)
    expected_tensors = outputs_as_tensors(expected)
    assert len(got_tensors) == len(expected_tensors), (
        f"{len(got_tensors)} output tensors, eager gives {len(expected_tensors)}")
    for index, (g, e) in enumerate(zip(got_tensors, expected_tensors)):
        scale = _scale(e)
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol * scale,
                                   msg=lambda m: f"output tensor {index}: {m}")


def _scale(tensor):
    """The largest magnitude of a float tensor (1 for integers, empty or all-zero ones)."""
    if not tensor.is_floating_point() or not tensor.numel():
        return 1.0
    return tensor.abs().max().item() or 1.0


def max_relative_error(got, expected):
    """The largest |got - expected| over the output tensors, relative to each expected
    tensor's largest magnitude; inf when the shapes differ."""
    worst = 0.0
    got_tensors = outputs_as_tensors(got)
    expected_tensors = outputs_as_tensors(expected)
    if len(got_tensors) != len(expected_tensors):
        return float("inf")
    for g, e in zip(got_tensors, expected_tensors):
        if g.shape != e.shape:
            return float("inf")
        if e.numel():
            worst = max(worst, (g.double() - e.double()).abs().max().item() / _scale(e))
    return worst


def timed_explain(explain, model, args=(), kwargs=None):
    """explain(model)(*args, **kwargs) under no_grad, and the seconds it took."""
    import torch

    start = time.perf_counter()
    with torch.no_grad():
        result = explain(model)(*args, **(kwargs or {}))
    return result, time.perf_counter() - start


def dynamo_explain(model, args=(), kwargs=None):
    """torch._dynamo.explain of one call from a fresh Dynamo (reset before and after, so
    that neither its caches nor its frame hook outlive the call), and its seconds."""
    import torch._dynamo as dynamo

    dynamo.reset()
    try:
        return timed_explain(dynamo.explain, model, args, kwargs)
    finally:
        dynamo.reset()


def reason_key(break_reason):
    """A break reason without the details that differ between sites, for counting."""
    return break_reason.reason.split(":")[0][:80]
