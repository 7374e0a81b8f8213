"""Log calls inside traced code (vm/logging_calls.cpp): `logger.warning(...)` and the other
emitting methods of a logging.Logger, with constant arguments, on a level the logger emits,
run after the graph in the order of the other side effects, instead of breaking the graph
where logging reads its caller's frame. Hugging Face's `logger.warning_once` (an lru_cache
over `warning`, attached to logging.Logger) broke a GPT-2 training step's forward four
times on every call before. Each case compares the records and results with eager's."""
import functools
import logging

import pytest
import torch

import dynvm

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

logger = logging.getLogger("dynvm_test_logging_calls")


class Recorder(logging.Handler):
    """Keeps each record's message and place (the caller logging names), and what `probe()`
    read when the record was emitted."""

    def __init__(self):
        super().__init__()
        self.probe = lambda: None
        self.seen = []

    def emit(self, record):
        self.seen.append((record.levelname, record.getMessage(), self.probe(),
                          record.pathname, record.lineno, record.funcName))


@pytest.fixture
def recorder():
    handler = Recorder()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


@functools.lru_cache(None)
def dynvm_test_warning_once(self, *args, **kwargs):
    self.warning(*args, **kwargs)


logging.Logger.dynvm_test_warning_once = dynvm_test_warning_once


class Holder:
    step = 0


HOLDER = Holder()


def warns(x):
    y = x.sin() * 2
    logger.warning("scaled by %d", 2)
    logger.info("info with %s and %r", "text", (1, 2.5))
    logger.debug("not emitted at INFO")
    return y + 1


def warns_once(x):
    logger.dynvm_test_warning_once("said once")
    return x.cos() + 1


def logs_between_writes(x):
    HOLDER.step = 1
    logger.error("after the first write")
    HOLDER.step = 2
    logger.log(logging.WARNING, "after the second write", stacklevel=1)
    return x * 3


G_STEP = 0
HISTORY = []


def logs_between_global_writes(x):
    global G_STEP
    G_STEP = 1
    logger.error("after the first write")
    G_STEP = 2
    logger.warning("after the second write")
    G_STEP = 3
    return x * 3


def logs_between_list_appends(x):
    HISTORY.append(1)
    logger.error("after the first append")
    HISTORY.append(2)
    return x * 3


def logs_a_tensor(x):
    logger.warning("value %s", x.sum())
    return x + 1


def _log_for_caller(what):
    # stacklevel=2: the record names the line that called this helper, as a library's
    # deprecation helper does.
    logger.warning("%s is deprecated", what, stacklevel=2)


def logs_for_its_caller(x):
    y = x.exp()
    _log_for_caller("exp")
    logging.warning("root logger, stacklevel %d", 1, stacklevel=1)
    return y * 2


CASES = {"warns": warns, "warns_once": warns_once, "logs_between_writes": logs_between_writes,
         "logs_for_its_caller": logs_for_its_caller}


def _run(fn, recorder, calls, compiled):
    records, results = [], []
    target = dynvm.compile(fn) if compiled else fn
    for i in range(calls):
        HOLDER.step = 0
        recorder.seen = []
        results.append(target(torch.full((3,), float(i))))
        records.append(list(recorder.seen))
    return records, results


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_calls_run_after_the_graph_as_eager_makes_them(name, recorder):
    fn = CASES[name]
    dynvm_test_warning_once.cache_clear()
    want_records, want = _run(fn, recorder, 3, compiled=False)
    dynvm_test_warning_once.cache_clear()
    dynvm.reset()
    got_records, got = _run(fn, recorder, 3, compiled=True)
    assert got_records == want_records
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    report = dynvm.explain(fn)(torch.ones(3))
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons


PROBES = {
    logs_between_writes: lambda: HOLDER.step,
    logs_between_global_writes: lambda: G_STEP,
    logs_between_list_appends: lambda: list(HISTORY),
}


@pytest.mark.parametrize("fn", list(PROBES), ids=lambda fn: fn.__name__)
def test_records_see_the_state_the_traced_code_left_before_them(fn, recorder):
    # The handler reads what the function writes: each record is emitted after the writes
    # that came before it in the function, and before the ones after it. A global written
    # again after a log call is replayed twice, not once with its last value; a list
    # mutated again after one breaks the graph there.
    recorder.probe = PROBES[fn]
    HISTORY.clear()
    want_records, _ = _run(fn, recorder, 2, compiled=False)
    HISTORY.clear()
    dynvm.reset()
    got_records, _ = _run(fn, recorder, 2, compiled=True)
    assert got_records == want_records
    HISTORY.clear()


def test_a_level_the_logger_does_not_emit_leaves_nothing_to_run(recorder):
    logger.setLevel(logging.ERROR)
    dynvm.reset()
    compiled = dynvm.compile(warns)
    compiled(torch.ones(3))
    assert recorder.seen == []
    # Enabling the level later is seen: the trace guarded on the logger's state.
    logger.setLevel(logging.INFO)
    recorder.seen = []
    compiled(torch.ones(3))
    assert [r[1] for r in recorder.seen] == ["scaled by 2", "info with text and (1, 2.5)"]


def test_a_tensor_argument_is_not_deferred(recorder):
    # Formatted after the graph, a tensor could show a later in-place change: the call is
    # traced as usual (a graph break), and the record still says what eager's does.
    want_records, want = _run(logs_a_tensor, recorder, 2, compiled=False)
    dynvm.reset()
    got_records, got = _run(logs_a_tensor, recorder, 2, compiled=True)
    assert got_records == want_records
    report = dynvm.explain(logs_a_tensor)(torch.ones(3))
    assert report.graph_break_count >= 1


def logs_about_its_caller(x):
    logger.warning("called with %d values", 3, stacklevel=2)
    return x + 1


def test_a_stacklevel_past_the_traced_frames_names_the_real_caller(recorder):
    # The frame at stacklevel 2 is the compiled function's caller, which the trace does not
    # run: the call breaks the graph there and logging finds that frame itself, also on the
    # first call (no frame of dynvm's own in between).
    want_records, _ = _run(logs_about_its_caller, recorder, 2, compiled=False)
    dynvm.reset()
    got_records, _ = _run(logs_about_its_caller, recorder, 2, compiled=True)
    assert got_records == want_records
    assert want_records[0][0][4] != 0 and want_records[0][0][5] == "_run"
