"""PyTorch's own op database (OpInfo) under dynvm: every op with float32 CPU samples gives
eager's result under backends "eager" and "dynvm", or breaks the graph and runs eagerly.

One test per op, variant and backend. The variants: the function (op.op), the Tensor
method (t0.name(...)), the in-place method and, for ops that have them, the function on
the op's error inputs. Up to SAMPLES_PER_OP samples of the function
(SAMPLES_PER_OTHER_VARIANT of the others), spread evenly over all of the op's samples,
each become one small function written from fresh source (a code object of its own, so
no cache limit is reached) with every tensor of the sample an argument (graph inputs,
inside TensorLists too) and every other value a literal or a global. Eager and each of
CALLS compiled calls get their own copies of the sample; their results and the inputs
afterwards (mutations) must agree: same types, shapes, dtypes and strides, the same
results sharing memory with an input, floating values within TOLERANCE (NaN where eager
has NaN), integers and booleans exactly. Where eager raises, the compiled function must
raise the same type.

    PYTHONPATH=build/python python3 -m pytest -q tests/python/test_opinfo.py
    PYTHONPATH=build/python python3 tests/python/test_opinfo.py [--backend B] [--variant V] [op ...]

The second form prints one line per test (samples, graphs traced, breaks, graph failures,
time) and the totals.
"""

import copy
import importlib.util
import math
import os
import sys
import time
import warnings

import pytest
import torch

import dynvm

# torch 1.13's test helpers import expecttest, which Debian does not package: a stand-in
# serves the import where the real package is missing.
if importlib.util.find_spec("expecttest") is None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs"))

from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

try:
    from conftest import codegen_built
except ImportError:  # run as a script from elsewhere
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from conftest import codegen_built

# Samples per op and variant, spread evenly over all the op's samples (PyTorch's lists
# vary one thing at a time, so the first few alone would test one shape many ways).
SAMPLES_PER_OP = int(os.environ.get("DYNVM_OPINFO_SAMPLES", "16"))
SAMPLES_PER_OTHER_VARIANT = int(os.environ.get("DYNVM_OPINFO_VARIANT_SAMPLES", "6"))
# Calls of each compiled sample: the fourth runs the variant's native function (guards,
# argument binding and the graph's steps compiled to one function).
CALLS = int(os.environ.get("DYNVM_OPINFO_CALLS", "4"))

# float32 results against eager's: fused kernels reassociate sums and use fast exp, log,
# tanh, erf and sigmoid with bounded error. A value outside this is still right when it
# is no further from a float64 run of eager than eager's own value is (see close_enough).
TOLERANCE = dict(rtol=1e-4, atol=1e-5)

# Ops whose values cannot be compared: their types, shapes and dtypes are. A sample whose
# eager values change with the random seed fails unless its op is listed here.
RANDOM = "draws random numbers"
UNINITIALISED = "returns uninitialised memory"
METADATA_ONLY = {
    **dict.fromkeys(
        ["bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
         "normal", "rand_like", "randint_like", "randn", "randn_like", "uniform",
         "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
         "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout",
         "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
         "nn.functional.rrelu", "pca_lowrank", "svd_lowrank"], RANDOM),
    **dict.fromkeys(["empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
                      "new_empty_strided"], UNINITIALISED),
}

# Tests left out, (op id, variant, backend) with why. Kept empty: a skip hides bugs.
SKIPPED = {}

# Known wrong results not fixed yet, (op id, variant, backend): strict expected failures.
KNOWN_WRONG = {}

BACKENDS = ("eager", "dynvm")
# "errors" calls the function on the op's error inputs, where eager raises.
VARIANTS = ("function", "method", "inplace", "errors")


def op_id(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


OPS = [op for op in op_db if op.supports_dtype(torch.float32, "cpu")]


def variant_callable(op, variant):
    """What the variant calls: op.op, a Tensor method's name (called as t0.name(...), as
    users write it) or another callable; None where the op has no such variant."""
    if variant == "errors":
        return op.op if error_samples_of(op) else None
    fn = {"function": op.op, "method": op.method_variant,
          "inplace": op.inplace_variant}[variant]
    if fn is None or variant == "function":
        return fn
    name = getattr(fn, "__name__", None)
    return name if name and getattr(torch.Tensor, name, None) is fn else fn


# --- the function of one sample --------------------------------------------------------


def _has_tensor(obj):
    if isinstance(obj, torch.Tensor):
        return True
    if type(obj) in (list, tuple):
        return any(_has_tensor(o) for o in obj)
    if type(obj) is dict:
        return any(_has_tensor(o) for o in obj.values())
    return False


class _Source:
    """Writes a sample's call as Python source: tensors become arguments t0, t1, ...
    (inside lists, tuples and dicts too); numbers, strings and None literals; anything
    else a global c0, c1, ..."""

    def __init__(self):
        self.n_tensors = 0
        self.globals = {}

    def expr(self, obj):
        if isinstance(obj, torch.Tensor):
            self.n_tensors += 1
            return f"t{self.n_tensors - 1}"
        if type(obj) in (list, tuple) and _has_tensor(obj):
            items = "".join(self.expr(o) + ", " for o in obj)
            return f"[{items}]" if type(obj) is list else f"({items})"
        if type(obj) is dict and _has_tensor(obj):
            return "{" + "".join(f"{k!r}: {self.expr(v)}, " for k, v in obj.items()) + "}"
        if obj is None or type(obj) in (bool, int, str):
            return repr(obj)
        if type(obj) is float and math.isfinite(obj):
            return repr(obj)
        name = f"c{len(self.globals)}"
        self.globals[name] = obj
        return name


def _flat_tensors(obj, out):
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif type(obj) in (list, tuple) and _has_tensor(obj):
        for o in obj:
            _flat_tensors(o, out)
    elif type(obj) is dict and _has_tensor(obj):
        for o in obj.values():
            _flat_tensors(o, out)
    return out


def sample_function(target, sample, name):
    """A fresh function (source text and code object of its own) calling `target`, a
    callable or a Tensor method's name, on the sample's values; and its source."""
    source = _Source()
    receiver = source.expr(sample.input)
    call = [source.expr(a) for a in sample.args]
    call += [f"{k}={source.expr(v)}" for k, v in sample.kwargs.items()]
    if isinstance(target, str):
        body = f"{receiver}.{target}({', '.join(call)})"
        namespace = dict(source.globals)
    else:
        body = f"OP({', '.join([receiver] + call)})"
        namespace = dict(source.globals, OP=target)
    params = ", ".join(f"t{i}" for i in range(source.n_tensors))
    text = f"def sample({params}):\n    return {body}\n"
    exec(compile(text, f"<opinfo {name}>", "exec"), namespace)
    return namespace["sample"], text


def _copy(obj, memo):
    if isinstance(obj, torch.Tensor):
        # deepcopy keeps views of one storage views of one copy; sparse tensors have no
        # storage to copy.
        return copy.deepcopy(obj, memo) if obj.layout == torch.strided else obj.clone()
    if type(obj) in (list, tuple):
        return type(obj)(_copy(o, memo) for o in obj)
    if type(obj) is dict:
        return {k: _copy(v, memo) for k, v in obj.items()}
    return obj


def sample_tensors(sample):
    """The sample's tensors in argument order, copied: views keep their storage, offset
    and strides."""
    memo = {}
    tensors = []
    for obj in [sample.input, *sample.args, *sample.kwargs.values()]:
        _flat_tensors(_copy(obj, memo), tensors)
    return tensors


def samples_of(op, limit):
    """Up to `limit` of the op's float32 CPU samples, evenly spread over all of them."""
    torch.manual_seed(0)  # the samples are random tensors: the same ones on every run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))
    if len(samples) <= limit:
        return samples
    return [samples[i * len(samples) // limit] for i in range(limit)]


def error_samples_of(op):
    """The samples of the op's error inputs (eager raises on them), if it has any."""
    if getattr(op, "error_inputs_func", None) is None:
        return []
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [error.sample_input for error in op.error_inputs("cpu")]


# --- comparing results -----------------------------------------------------------------


class Mismatch(AssertionError):
    pass


def close_enough(actual, expected, reference):
    """Whether float values agree: within TOLERANCE, NaN where eager has NaN; or, outside
    it, no further from `reference` (eager in float64) than twice eager's own error, as
    where eager itself rounds more (ATen's layer norm computes x * rstd - mean * rstd)."""
    if torch.allclose(actual, expected, equal_nan=True, **TOLERANCE):
        return True
    if reference is None or reference.shape != expected.shape:
        return False
    if not torch.equal(actual.isnan(), expected.isnan()):
        return False
    reference = reference.to(torch.complex128 if expected.is_complex() else torch.float64)
    eager_error = (expected - reference).abs()
    error = (actual - reference).abs()
    bound = 2 * eager_error + TOLERANCE["atol"] + TOLERANCE["rtol"] * reference.abs()
    finite = expected.isfinite()
    return bool((error[finite] <= bound[finite]).all()) and torch.equal(
        actual[~finite & ~expected.isnan()], expected[~finite & ~expected.isnan()])


def _strides(t):
    """The strides that tell layouts apart: those of dimensions longer than 1."""
    if t.numel() <= 1:
        return ()
    return tuple(st for st, size in zip(t.stride(), t.shape) if size > 1)


def _storage(t):
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr()


def shared_with_inputs(result, inputs):
    """For each tensor of the result, whether it shares memory with an input."""
    memory = {_storage(t) for t in inputs if t.layout == torch.strided and t.numel() > 0}
    tensors = []

    def flatten(obj):
        if isinstance(obj, torch.Tensor):
            tensors.append(obj)
        elif isinstance(obj, (list, tuple)):  # torch.return_types too
            for o in obj:
                flatten(o)

    flatten(result)
    return [t.layout == torch.strided and t.numel() > 0 and _storage(t) in memory
            for t in tensors]


def compare(expected, actual, reference=None, where="result", values=True):
    """Raises Mismatch where `actual` is not eager's `expected` (`reference`: eager's
    result in float64, or None)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{where}: {type(actual).__name__} where eager has a tensor")
        for attr in ("shape", "dtype", "layout", "device"):
            if getattr(expected, attr) != getattr(actual, attr):
                raise Mismatch(f"{where}: {attr} {getattr(actual, attr)} where eager has "
                               f"{getattr(expected, attr)}")
        if expected.layout == torch.strided and _strides(actual) != _strides(expected):
            raise Mismatch(f"{where}: strides {actual.stride()} where eager has "
                           f"{expected.stride()}")
        if not values:
            return
        if expected.layout != torch.strided:
            expected, actual = expected.to_dense(), actual.to_dense()
        if not isinstance(reference, torch.Tensor) or reference.layout != torch.strided:
            reference = None
        if expected.is_floating_point() or expected.is_complex():
            if not close_enough(actual, expected, reference):
                try:
                    torch.testing.assert_close(actual, expected, equal_nan=True,
                                               check_stride=False, **TOLERANCE)
                except AssertionError as e:
                    raise Mismatch(f"{where}: {e}") from None
                raise Mismatch(f"{where}: {actual} where eager has {expected}")
        elif not torch.equal(actual, expected):
            raise Mismatch(f"{where}: {actual} where eager has {expected}")
        return
    if isinstance(expected, (list, tuple)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            size = len(actual) if hasattr(actual, "__len__") else "?"
            raise Mismatch(f"{where}: {type(actual).__name__} of {size} where eager has "
                           f"{type(expected).__name__} of {len(expected)}")
        if not isinstance(reference, (list, tuple)) or len(reference) != len(expected):
            reference = [None] * len(expected)
        for i, (e, a, r) in enumerate(zip(expected, actual, reference)):
            compare(e, a, r, f"{where}[{i}]", values)
        return
    if type(actual) is not type(expected):
        raise Mismatch(f"{where}: {type(actual).__name__} where eager has "
                       f"{type(expected).__name__}")
    if isinstance(expected, float) and values:
        if not (math.isclose(actual, expected, rel_tol=TOLERANCE["rtol"],
                             abs_tol=TOLERANCE["atol"])
                or (math.isnan(expected) and math.isnan(actual))):
            raise Mismatch(f"{where}: {actual} where eager has {expected}")
    elif values and actual != expected:
        raise Mismatch(f"{where}: {actual!r} where eager has {expected!r}")


def run(fn, tensors, seed):
    """fn's result on the tensors and the tensors afterwards, or the exception raised."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*tensors), tensors, None
        except Exception as e:  # noqa: BLE001 - whatever eager raises is the answer
            return None, tensors, e


def in_float64(tensors):
    return [t.to(torch.float64) if t.dtype == torch.float32 else t for t in tensors]


def check_sample(op, target, sample, name, backend):
    """Raises Mismatch where the compiled sample disagrees with eager on any of CALLS
    calls (the first traces, later ones run the cached variant, the fourth through its
    native function)."""
    fn, text = sample_function(target, sample, name)
    expected, expected_inputs, expected_error = run(fn, sample_tensors(sample), 0)
    compiled = dynvm.compile(fn, backend=backend)
    values = op.name not in METADATA_ONLY
    try:
        if values and expected_error is None:
            again, again_inputs, _ = run(fn, sample_tensors(sample), 1)
            try:
                compare((expected, expected_inputs), (again, again_inputs))
            except Mismatch as e:
                raise Mismatch(f"eager gives other values with another random seed; list "
                               f"the op in METADATA_ONLY if it is random\n{e}") from None
        for call in range(CALLS):
            actual, actual_inputs, actual_error = run(compiled, sample_tensors(sample), 0)
            try:
                check_call(fn, sample, values, (expected, expected_inputs, expected_error),
                           (actual, actual_inputs, actual_error))
            except Mismatch as e:
                raise Mismatch(f"call {call + 1}: {e}") from None
    except Mismatch as e:
        raise Mismatch(f"{name} under backend {backend!r}:\n{text}{e}") from None


def check_call(fn, sample, values, eager, compiled):
    """Raises Mismatch where a compiled call's (result, inputs afterwards, exception)
    disagrees with eager's."""
    expected, expected_inputs, expected_error = eager
    actual, actual_inputs, actual_error = compiled
    if expected_error is not None or actual_error is not None:
        if type(actual_error) is not type(expected_error):
            raise Mismatch(f"raised {type(actual_error).__name__}: {actual_error} where eager "
                           f"raised {type(expected_error).__name__}: {expected_error}")
        return
    eager_shares = shared_with_inputs(expected, expected_inputs)
    shares = shared_with_inputs(actual, actual_inputs)
    if shares != eager_shares:
        raise Mismatch(f"results sharing memory with an input: {shares} where eager has "
                       f"{eager_shares}")
    try:
        compare(expected, actual, values=values)
        compare(expected_inputs, actual_inputs, where="inputs after the call", values=values)
    except Mismatch:
        # Outside the tolerance: measure both against eager in float64.
        reference, reference_inputs, _ = run(fn, in_float64(sample_tensors(sample)), 0)
        compare(expected, actual, reference, values=values)
        compare(expected_inputs, actual_inputs, reference_inputs,
                where="inputs after the call", values=values)


def check_op(op, variant, backend):
    """Checks the op's variant on its samples; returns how many samples there were."""
    target = variant_callable(op, variant)
    if variant == "errors":
        samples = error_samples_of(op)
    else:
        limit = SAMPLES_PER_OP if variant == "function" else SAMPLES_PER_OTHER_VARIANT
        samples = samples_of(op, limit)
    for index, sample in enumerate(samples):
        check_sample(op, target, sample, f"{op_id(op)} {variant} sample {index}", backend)
    return len(samples)


# --- pytest ----------------------------------------------------------------------------


def _params():
    params = []
    for op in OPS:
        for variant in VARIANTS:
            if variant_callable(op, variant) is None:
                continue
            for backend in BACKENDS:
                key = (op_id(op), variant, backend)
                marks = [pytest.mark.skipif(backend == "dynvm" and not codegen_built(),
                                            reason="this build has no CPU code generator")]
                if key in SKIPPED:
                    marks.append(pytest.mark.skip(reason=SKIPPED[key]))
                if key in KNOWN_WRONG:
                    marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[key]))
                params.append(pytest.param(op, variant, backend, id="-".join(key), marks=marks))
    return params


@pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")
@pytest.mark.parametrize("op,variant,backend", _params())
def test_opinfo(op, variant, backend):
    check_op(op, variant, backend)


# --- the sweep as a script ---------------------------------------------------------------


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", choices=BACKENDS)
    parser.add_argument("--variant", action="append", choices=VARIANTS)
    parser.add_argument("ops", nargs="*", help="op ids (name or name.variant_test_name)")
    args = parser.parse_args(argv)
    ops = [op for op in OPS if not args.ops or op_id(op) in args.ops or op.name in args.ops]
    totals = dict(tests=0, samples=0, graphs=0, breaks=0, graph_failures=0, native_runs=0,
                  wrong=0)
    start = time.perf_counter()
    for backend in args.backend or BACKENDS:
        for variant in args.variant or VARIANTS:
            for op in ops:
                if variant_callable(op, variant) is None:
                    continue
                key = (op_id(op), variant, backend)
                if key in SKIPPED:
                    continue
                dynvm.reset()
                t = time.perf_counter()
                try:
                    n = check_op(op, variant, backend)
                    status = "ok"
                except Mismatch as e:
                    n, status = 0, "WRONG " + str(e).replace("\n", "\n    ")
                    totals["wrong"] += 1
                counters = dict(dynvm.counters)
                totals["tests"] += 1
                totals["samples"] += n
                totals["graphs"] += counters["frames_traced"]
                totals["breaks"] += counters["graph_breaks"]
                totals["graph_failures"] += counters["graph_failures"]
                totals["native_runs"] += counters.get("glue_runs", 0)
                print(f"{backend:6} {variant:8} {op_id(op):45} {n:3} samples "
                      f"{counters['frames_traced']:3} traced {counters['graph_breaks']:3} "
                      f"breaks {counters['graph_failures']} failures "
                      f"{time.perf_counter() - t:6.2f}s {status}", flush=True)
    print(f"{totals} in {time.perf_counter() - start:.1f}s")
    return 1 if totals["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
