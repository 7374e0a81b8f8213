"""A corpus of graph-break scenarios: small PyTorch functions that dynvm cannot capture
in one graph, each with tensor work before and after the point where tracing has to
stop (print, logging, .item(), data-dependent control flow, calls into C extensions,
exceptions, generators, training steps ...).

Every theme module registers its functions with @scenario (see _scenario.py).
tests/python/test_break_corpus.py runs each one eagerly and compiled with
backend="eager", several times, and compares everything a user could observe:
results, stdout/stderr, logging records, mutations of inputs and globals, gradients
and exceptions. all_scenarios() imports every theme and returns its scenarios.
"""

import importlib
import pkgutil

from break_corpus._scenario import Scenario, registered, scenario  # noqa: F401


def theme_names():
    """The theme modules of the corpus, sorted: every module not starting with '_'."""
    return sorted(
        info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")
    )


def all_scenarios():
    """Every scenario, theme by theme, in definition order."""
    found = []
    for theme in theme_names():
        module = importlib.import_module(f"break_corpus.{theme}")
        found.extend(registered(module.__name__))
    return found
