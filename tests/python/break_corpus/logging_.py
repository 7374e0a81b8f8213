"""Break corpus: logging calls in the middle of tensor code. The harness compares each
record's message, level, line number and function name, so a resumed frame must
report the right line to logging's caller lookup."""

import logging
import sys
import warnings

import torch

from break_corpus._scenario import randn, scenario

log = logging.getLogger("break_corpus.logging")


@scenario(lambda: (randn(3, 4),), other=lambda: (randn(2, 4),))
def logging_info_with_percent_args(x):
    y = x.softmax(dim=-1)
    log.info("softmax of %s rows, max %.4f", y.shape[0], y.max().item())
    return y.log() + 1


@scenario(lambda: (randn(4),))
def logging_debug_and_warning(x):
    y = x.abs()
    log.debug("before: %s", y.sum().item() > 0)
    z = y.sqrt()
    log.warning("after sqrt: %d elements", z.numel())
    return z * x


def _log_stats(t, what):
    log.info("%s: min %.3f max %.3f", what, t.min().item(), t.max().item())


@scenario(lambda: (randn(5),))
def logging_in_helper_function(x):
    _log_stats(x, "input")
    y = torch.tanh(x) * 2
    _log_stats(y, "tanh")
    return y - x


@scenario(lambda: (randn(3),))
def logging_exception_in_handler(x):
    y = x * 2
    try:
        {}["missing"]
    except KeyError:
        log.exception("lookup failed for %s values", y.numel())
    return y + 1


@scenario(lambda: (randn(3), logging.ERROR), other=lambda: (randn(3), logging.INFO))
def logging_with_level_argument(x, level):
    y = x.cos()
    log.log(level, "level %s: %.2f", logging.getLevelName(level), y.sum().item())
    return y.sin()


# A log call with constant arguments is made after the graph (vm/logging_calls.cpp): no
# break, the record as eager's (place included).
@scenario(lambda: (randn(2, 3),), breaks=False)
def logging_root_logger_and_fstring(x):
    y = x.t().contiguous()
    logging.info(f"transposed to {tuple(y.shape)}")
    return y.flatten() * 0.5


class _Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        log.info("scaling a %s tensor", "x".join(map(str, x.shape)))
        return x * self.scale


@scenario(lambda: (_Scaler(), randn(2, 2, requires_grad=True)), breaks=False)
def logging_inside_module_forward(module, x):
    h = x + 1
    y = module(h)
    return (y ** 2).mean()


@scenario(lambda: (randn(3),))
def print_logging_and_stderr_interleaved(x):
    y = x * 2
    print("one")
    log.info("two %d", y.numel())
    print("three", file=sys.stderr)
    log.warning("four")
    print("five", round(y.sum().item(), 3))
    return y.exp()


def _deprecated_scale(t):
    warnings.warn("_deprecated_scale is deprecated", DeprecationWarning, stacklevel=2)
    return t * 3


# Warnings with constant arguments at a traced frame are made after the graph
# (vm/warning_calls.cpp): no break, each shown as eager's (place included).
@scenario(lambda: (randn(2),), breaks=False)
def warnings_warn_with_stacklevel_in_helper(x):
    y = x.abs()
    z = _deprecated_scale(y)
    warnings.warn(f"scaled {z.numel()} values", UserWarning)
    return z + y


@scenario(lambda: (randn(3),))
def torch_warning_mid_function(x):
    y = x.sigmoid()
    copied = torch.tensor(y)
    print("copied", copied.shape)
    return copied * y
