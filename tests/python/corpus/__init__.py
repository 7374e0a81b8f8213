"""A corpus of small PyTorch functions that dynvm must capture as one graph each.

Every theme module registers its functions with @case (see _case.py). Each function
is tensor-capturing code with no inherent graph break: it runs the same compiled with
fullgraph=True as eagerly. all_cases() imports every theme and returns its cases.
"""

import importlib
import pkgutil

from corpus._case import Args, Case, case, registered  # noqa: F401


def theme_names():
    """The theme modules of the corpus, sorted: every module not starting with '_'."""
    return sorted(
        info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")
    )


def all_cases():
    """Every corpus case, theme by theme, in definition order."""
    cases = []
    for theme in theme_names():
        module = importlib.import_module(f"corpus.{theme}")
        cases.extend(registered(module.__name__))
    return cases
