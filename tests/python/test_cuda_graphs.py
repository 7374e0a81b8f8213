"""mode="reduce-overhead" on CUDA tensors: after a warm-up call, a variant's graph is
recorded as a CUDA graph and replayed. Every result, mutated input and random stream
equals eager's; what cannot be recorded runs plainly and says why. These tests run where a
GPU and torch.cuda are usable (the GPU machine) and skip elsewhere; the CPU side of the
mode (explain's note, the run report) is tested in test_api.py and test_cli_run.py."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynvm

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")


def cuda_graph_events():
    """What the run report says of each graph's recording (graph, note)."""
    return dynvm._native.core().run_report()["cuda_graphs"]


def cuda_graph_notes(fn, *args):
    return dynvm.explain(fn)(*args).cuda_graphs


def compiled(fn):
    dynvm.reset()
    return dynvm.compile(fn, mode="reduce-overhead")


def mlp(width=512, depth=3):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).cuda().eval()


def test_mlp_replays_and_every_call_gets_its_own_result():
    model = mlp()
    fast = compiled(model)
    inputs = [torch.randn(1, 512, device="cuda") for _ in range(6)]
    with torch.no_grad():
        results = [fast(x) for x in inputs]  # call 1 warms up, call 2 records
        expected = [model(x) for x in inputs]
    for got, want in zip(results, expected):
        torch.testing.assert_close(got, want)  # a later replay did not overwrite it
    events = cuda_graph_events()
    assert [e["note"] for e in events] == ["replays as a CUDA graph"]
    assert " from " in events[0]["graph"]  # "function (file:line) from file:line"
    assert dynvm.counters["frames_traced"] == 1


def test_explain_says_when_a_graph_is_recorded():
    fast = compiled(lambda x: torch.relu(x) * 2)
    x = torch.randn(8, device="cuda")
    assert cuda_graph_notes(fast, x) == ["records a CUDA graph after 1 more call"]


def test_arguments_written_by_the_graph_are_written_as_in_eager():
    def f(x, y):
        x.add_(y)
        return x * 2

    fast = compiled(f)
    a, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    a2 = a.clone()
    for _ in range(4):
        got = fast(a, b)
        want = f(a2, b)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(a, a2)
    assert any(e["note"] == "replays as a CUDA graph" for e in cuda_graph_events())


def test_a_buffer_the_model_updates_in_place_is_updated():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(16))

        def forward(self, x):
            self.total.add_(x)
            return self.total * 1.5

    model, reference = Counter().cuda(), Counter().cuda()
    fast = compiled(model)
    for step in range(5):
        x = torch.full((16,), float(step + 1), device="cuda")
        torch.testing.assert_close(fast(x), reference(x))
        torch.testing.assert_close(model.total, reference.total)


def test_an_output_that_is_a_view_of_an_argument_is_not_recorded():
    def f(x):
        return x.view(-1), x + 1

    fast = compiled(f)
    for _ in range(3):
        x = torch.randn(4, 4, device="cuda")  # a new address each call: copied, not read in place
        view, plus = fast(x)
        assert view.data_ptr() == x.data_ptr()
        torch.testing.assert_close(plus, x + 1)
    notes = [e["note"] for e in cuda_graph_events()]
    assert any(n.startswith("not a CUDA graph: output") for n in notes), notes


def test_an_argument_at_one_address_is_read_where_it_lies():
    # The same tensor on the warm-up and the recording call: the graph reads it in place,
    # so writing into it between calls shows, and a view of it comes back as one.
    def f(x):
        return x.view(-1), x * 3

    fast = compiled(f)
    x = torch.randn(4, 4, device="cuda")
    for step in range(4):
        x.copy_(torch.full((4, 4), float(step), device="cuda"))
        view, tripled = fast(x)
        assert view.data_ptr() == x.data_ptr()
        torch.testing.assert_close(tripled, x * 3)
    assert [e["note"] for e in cuda_graph_events()] == ["replays as a CUDA graph"]
    # Another tensor: the argument moved, so it is copied from now on, and an output that
    # views it can no longer be replayed.
    y = torch.randn(4, 4, device="cuda")
    view, tripled = fast(y)
    assert view.data_ptr() == y.data_ptr()
    torch.testing.assert_close(tripled, y * 3)


def test_a_moved_argument_is_copied_from_then_on():
    fast = compiled(lambda x, w: torch.tanh(x @ w) + 1)
    w = torch.randn(32, 32, device="cuda")
    x = torch.randn(8, 32, device="cuda")
    for _ in range(3):
        torch.testing.assert_close(fast(x, w), torch.tanh(x @ w) + 1)
    for _ in range(4):
        x = torch.randn(8, 32, device="cuda")  # new each call
        torch.testing.assert_close(fast(x, w), torch.tanh(x @ w) + 1)
    notes = [e["note"] for e in cuda_graph_events()]
    assert notes == ["replays as a CUDA graph", "replays as a CUDA graph"], notes


def test_held_results_and_their_views_keep_their_values():
    fast = compiled(lambda x: torch.sin(x) * 2)
    xs = [torch.randn(256, device="cuda") for _ in range(5)]
    results = []
    views = []
    for x in xs:
        y = fast(x)
        results.append(y)
        views.append(y[10:20])
    for x, y, v in zip(xs, results, views):
        torch.testing.assert_close(y, torch.sin(x) * 2)
        torch.testing.assert_close(v, (torch.sin(x) * 2)[10:20])
    # A dropped result costs nothing and changes nothing.
    for x in xs:
        fast(x)
    torch.testing.assert_close(fast(xs[0]), torch.sin(xs[0]) * 2)


def test_a_result_passed_back_in_is_read_correctly():
    # An RNN-style loop: each call's result is the next call's argument.
    fast = compiled(lambda h, w: torch.tanh(h @ w))
    torch.manual_seed(0)
    w = torch.randn(64, 64, device="cuda") / 8
    h = torch.randn(4, 64, device="cuda")
    want = h.clone()
    for _ in range(8):
        h = fast(h, w)
        want = torch.tanh(want @ w)
        torch.testing.assert_close(h, want)
    assert any(e["note"] == "replays as a CUDA graph" for e in cuda_graph_events())


def test_each_shape_gets_its_own_recording():
    fast = compiled(lambda x: F.gelu(x) + x.sum(-1, keepdim=True))
    for n in (8, 16, 8, 16, 8, 16):
        x = torch.randn(4, n, device="cuda")
        torch.testing.assert_close(fast(x), F.gelu(x) + x.sum(-1, keepdim=True))
    notes = [e["note"] for e in cuda_graph_events()]
    # One recording per shape, and at most one more each: a new tensor the allocator put
    # at the previous one's address looks like the same argument, is read in place, and
    # is copied once it moves.
    assert set(notes) == {"replays as a CUDA graph"}
    assert 2 <= len(notes) <= 4, notes


def test_dynamic_shapes_record_a_graph_for_each_size():
    # A graph with symbols is traced once; each size it meets gets its own CUDA graph after
    # its own warm-up call (at most Variant::kMaxCudaGraphs live; the least recently used
    # one goes and is recorded again when its size comes back).
    def fn(x, w):
        return F.layer_norm(x @ w, (64,)) * torch.sigmoid(x[..., :64])

    dynvm.reset()
    fast = dynvm.compile(fn, mode="reduce-overhead", dynamic=True)
    w = torch.randn(128, 64, device="cuda")
    sizes = [5, 9, 5, 9, 5, 13, 13, 9]
    inputs = [torch.randn(n, 7, 128, device="cuda") for n in sizes]
    with torch.no_grad():
        results = [fast(x, w) for x in inputs]
        for got, x in zip(results, inputs):  # held results keep their values
            torch.testing.assert_close(got, fn(x, w), atol=1e-4, rtol=1e-4)
        assert dynvm.counters["frames_traced"] == 1
        events = cuda_graph_events()
        assert [e["note"] for e in events] == ["replays as a CUDA graph"] * 3, events
        assert len({e["graph"] for e in events}) == 3, events
        assert all(" at sizes (" in e["graph"] for e in events), events
        # More sizes than graphs kept (20), then the two least recently used again: their
        # graphs went, so each is warmed up and recorded again.
        for n in list(range(20, 40)) + [20, 21]:
            x = torch.randn(n, 7, 128, device="cuda")
            for _ in range(2):
                torch.testing.assert_close(fast(x, w), fn(x, w), atol=1e-4, rtol=1e-4)
    notes = [e["note"] for e in cuda_graph_events()]
    assert set(notes) == {"replays as a CUDA graph"} and len(notes) == 3 + 20 + 2, notes
    assert dynvm.counters["frames_traced"] == 1


def test_moved_parameters_are_recorded_again():
    model = mlp(width=64, depth=2)
    fast = compiled(model)
    x = torch.randn(2, 64, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(fast(x), model(x))
        model[0].weight.data = model[0].weight.data * 2  # a new tensor at a new address
        for _ in range(3):
            torch.testing.assert_close(fast(x), model(x))
    notes = [e["note"] for e in cuda_graph_events()]
    assert notes.count("replays as a CUDA graph") == 2


def test_a_graph_that_records_autograd_is_not_recorded():
    model = mlp(width=32, depth=2)
    fast = compiled(model)
    x = torch.randn(2, 32, device="cuda")
    for _ in range(3):
        out = fast(x)
        torch.testing.assert_close(out, model(x))
    assert out.requires_grad
    notes = " ".join(e["note"] for e in cuda_graph_events())
    assert "not a CUDA graph" in notes


def test_random_ops_follow_the_users_seed():
    def f(x):
        return F.dropout(x, 0.5, training=True) * 2

    fast = compiled(f)
    x = torch.ones(1000, device="cuda")
    for seed in range(4):
        torch.manual_seed(seed)
        got = fast(x)
        torch.manual_seed(seed)
        want = f(x)
        assert torch.equal(got, want), f"call {seed}"
    # Two calls in a row draw different masks, as in eager.
    assert not torch.equal(fast(x), fast(x))


def test_gpt2_block_batch_1_matches_eager():
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from models import gpt2_block

    config = gpt2_block.GPT2Config(block_size=64, n_head=12, n_embd=768, dropout=0.0)
    model = gpt2_block.build_block(0, config).cuda()
    fast = compiled(model)
    with torch.no_grad():
        for step in range(4):
            x = torch.randn(1, 32, 768, device="cuda")
            torch.testing.assert_close(fast(x), model(x), atol=1e-4, rtol=1e-4)
    notes = [e["note"] for e in cuda_graph_events()]
    assert notes == ["replays as a CUDA graph"], notes
