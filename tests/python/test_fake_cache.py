"""The metadata cache in front of torch's fake mode (dynvm/_fake_cache.py): which operators
it answers, that its answers equal the fake mode's (sizes, strides, offsets, dtypes,
devices, and storage shared with the input for views), that keys tell apart what the
result depends on, and that compiled code traced through it gives eager's results."""
import pytest
import torch

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

from dynvm import _fake_cache, _tracing, config  # noqa: E402

aten = torch.ops.aten
BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])


@pytest.fixture
def cache_state():
    saved = (_fake_cache.enabled, _fake_cache.verify)
    yield
    _fake_cache.enabled, _fake_cache.verify = saved


def _session_with(*tensors):
    session = _tracing.TraceSession()
    return session, [session.fake_from_real(t) for t in tensors]


def _layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device


def test_operator_kinds():
    assert _fake_cache.kind_of(aten.add.Tensor) == _fake_cache.FRESH
    assert _fake_cache.kind_of(aten.native_layer_norm.default) == _fake_cache.FRESH
    assert _fake_cache.kind_of(aten.view.default) == _fake_cache.VIEW
    assert _fake_cache.kind_of(aten.split.Tensor) == _fake_cache.VIEW
    assert _fake_cache.kind_of(aten.unbind.int) == _fake_cache.VIEW
    assert _fake_cache.kind_of(aten.transpose.int) == _fake_cache.VIEW
    # Written arguments, data-dependent or random results, and operators torch's fake
    # mode treats specially are never answered from the cache.
    for op in (aten.add_.Tensor, aten.copy_.default, aten.add.out, aten.nonzero.default,
               aten.bernoulli.p, aten._unsafe_view.default, aten.lift_fresh_copy.default,
               aten._local_scalar_dense.default, aten.as_strided.default,
               aten.transpose_.default, aten.unsqueeze_.default):
        assert _fake_cache.kind_of(op) is None, op


def _run_twice(session, fn, args):
    """fn on fakes twice in one session: the second call is answered from the cache."""
    first, _ = session.call(fn, args, {}, False)
    hits = _fake_cache.hits
    second, records = session.call(fn, args, {}, False)
    return first, second, records, _fake_cache.hits - hits


CALLS = {
    "add": (lambda a, b: a + b, lambda: (torch.randn(4, 6), torch.randn(6))),
    "add_transposed": (lambda a, b: a + b, lambda: (torch.randn(6, 4).t(), torch.randn(4, 6))),
    "channels_last_relu": (torch.relu, lambda: (
        torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),)),
    "int_mul": (lambda a, b: a * b, lambda: (torch.arange(6).view(2, 3), torch.tensor(2.5))),
    "view": (lambda a: a.view(3, 8), lambda: (torch.randn(4, 6),)),
    "transpose": (lambda a: a.transpose(0, 1), lambda: (torch.randn(4, 6),)),
    "slice_of_slice": (lambda a: a[1:, 2:][:, 1:], lambda: (torch.randn(5, 7),)),
    "split": (lambda a: a.split(2, dim=1), lambda: (torch.randn(4, 7),)),
    "layer_norm": (lambda a, w: torch.nn.functional.layer_norm(a, (6,), w),
                   lambda: (torch.randn(3, 6), torch.randn(6))),
    "matmul": (lambda a, b: a @ b, lambda: (torch.randn(2, 3, 4), torch.randn(4, 5))),
    "arange": (lambda: torch.arange(7.0), lambda: ()),
    "max_with_indices": (lambda a: a.max(1), lambda: (torch.randn(4, 6),)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_answers_equal_the_fake_mode(name, cache_state):
    fn, make = CALLS[name]
    _fake_cache.enabled, _fake_cache.verify = True, True  # each hit is checked, too
    session, args = _session_with(*make())
    first, second, records, hits = _run_twice(session, fn, tuple(args))
    assert hits >= 1
    firsts = first if isinstance(first, tuple) else (first,)
    seconds = second if isinstance(second, tuple) else (second,)
    assert [_layout(t) for t in seconds] == [_layout(t) for t in firsts]
    assert all(s is not f for s, f in zip(seconds, firsts))
    assert records  # a hit is still recorded as an operator of the graph


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_answers_on_cuda_equal_the_fake_mode(cache_state):
    # A CPU scalar tensor with a CUDA one gives a CUDA result: devices are in the key.
    _fake_cache.enabled, _fake_cache.verify = True, True
    session, (a, s) = _session_with(torch.randn(4, 6, device="cuda"), torch.tensor(2.0))
    first, second, _, hits = _run_twice(session, lambda x, y: (x * y).t(), (a, s))
    assert hits >= 2
    assert second.device.type == "cuda" and _layout(second) == _layout(first)


def test_a_cached_view_shares_its_input_storage(cache_state):
    _fake_cache.enabled, _fake_cache.verify = True, False
    session, (x,) = _session_with(torch.randn(4, 6))
    _, view, _, hits = _run_twice(session, lambda a: a[1:].transpose(0, 1), (x,))
    assert hits >= 1
    assert view.untyped_storage()._cdata == x.untyped_storage()._cdata
    assert view.storage_offset() == 6 and view.stride() == (1, 6)


def test_keys_tell_apart_what_results_depend_on(cache_state):
    _fake_cache.enabled, _fake_cache.verify = True, False
    session, (a, t, i) = _session_with(torch.randn(4, 6), torch.randn(6, 4).t(),
                                       torch.arange(24).view(4, 6))
    add_one = lambda x: x + 1  # noqa: E731
    contiguous, _ = session.call(add_one, (a,), {}, False)
    transposed, _ = session.call(add_one, (t,), {}, False)
    integers, _ = session.call(add_one, (i,), {}, False)
    assert contiguous.stride() == (6, 1) and transposed.stride() == (1, 4)
    assert integers.dtype == torch.int64 and contiguous.dtype == torch.float32
    # The default dtype decides a factory's result.
    saved = torch.get_default_dtype()
    try:
        single, _ = session.call(torch.arange, (3.0,), {}, False)
        torch.set_default_dtype(torch.float64)
        double, _ = session.call(torch.arange, (3.0,), {}, False)
    finally:
        torch.set_default_dtype(saved)
    assert single.dtype == torch.float32 and double.dtype == torch.float64
    # Argument values are part of the key: True and 1 are different keys.
    s0, _ = session.call(lambda x: x.sum(0, True), (a,), {}, False)
    s1, _ = session.call(lambda x: x.sum(1, True), (a,), {}, False)
    assert tuple(s0.shape) == (1, 6) and tuple(s1.shape) == (4, 1)


def test_device_queries_answer_the_fake_device():
    # C++ code asks a fake tensor for its device through the dispatcher (prim::device);
    # the answer is the device the fake stands for, and no operator of the graph.
    session, (a,) = _session_with(torch.randn(4, 6))
    device, records = session.call(torch.ops.prim.device.default, (a,), {}, False)
    assert device == torch.device("cpu") and records == []
    sliced, records = session.call(lambda x: x[1:, :2], (a,), {}, False)
    assert sliced.device == torch.device("cpu") and tuple(sliced.shape) == (3, 2)
    assert [name for name, _, _ in records] == ["aten::slice.Tensor", "aten::slice.Tensor"]


def test_real_tensors_and_unknown_objects_are_not_keys():
    session, (a,) = _session_with(torch.randn(3))
    assert _fake_cache.key_of(aten.add.Tensor, (a, a), {}, session.fake_mode) is not None
    assert _fake_cache.key_of(aten.add.Tensor, (a, torch.randn(3)), {},
                              session.fake_mode) is None
    assert _fake_cache.key_of(aten.add.Tensor, (a, object()), {}, session.fake_mode) is None
    other, (b,) = _session_with(torch.randn(3))
    assert _fake_cache.key_of(aten.add.Tensor, (a, b), {}, session.fake_mode) is None


def test_the_mode_comes_from_the_environment():
    assert config.fake_cache_mode({}) == "on"
    assert config.fake_cache_mode({"DYNVM_FAKE_CACHE": "off"}) == "off"
    assert config.fake_cache_mode({"DYNVM_FAKE_CACHE": "Verify"}) == "verify"
    with pytest.raises(ValueError, match="DYNVM_FAKE_CACHE"):
        config.fake_cache_mode({"DYNVM_FAKE_CACHE": "sometimes"})


class _Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).split(x.shape[-1], dim=-1)
        heads = [t.view(t.shape[0], t.shape[1], 2, -1).transpose(1, 2) for t in (q, k, v)]
        attention = torch.nn.functional.scaled_dot_product_attention(*heads)
        return x + self.out(attention.transpose(1, 2).reshape(x.shape))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[_Block(8) for _ in range(4)]).eval()


def test_traces_through_the_cache_equal_traces_without_it(cache_state):
    model, x = _model(), torch.randn(2, 5, 8)
    reports = {}
    for enabled in (False, True):
        _fake_cache.enabled, _fake_cache.verify = enabled, False
        dynvm.reset()
        hits = _fake_cache.hits
        reports[enabled] = dynvm.explain(model)(x)
        if enabled:
            assert _fake_cache.hits - hits > 20  # the blocks after the first repeat it
    assert reports[True].ops_per_graph == reports[False].ops_per_graph
    assert reports[True].guards == reports[False].guards


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_through_the_cache_gives_eager_results(backend, cache_state):
    _fake_cache.enabled, _fake_cache.verify = True, True
    model, x = _model(), torch.randn(2, 5, 8)
    dynvm.reset()
    compiled = dynvm.compile(model, backend=backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))

    def writes_through_views(t):
        u = t.clone()
        for _ in range(3):
            u[1:].transpose(0, 1).mul_(2)  # a cached view, written: the clone changes
        return u, u.view(-1)[:4]

    compiled_fn = dynvm.compile(writes_through_views, backend=backend)
    expected, actual = writes_through_views(x), compiled_fn(x)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e)
