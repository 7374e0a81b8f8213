"""A stand-in for the `expecttest` package, which torch 1.13's test helpers
(torch.testing._internal.common_utils) import but Debian does not ship.

test_opinfo.py puts this folder on sys.path only when the real package is missing. It
holds what the import needs: the ACCEPT flag and a TestCase whose inline expectations
compare strings (never rewriting the caller's source, as the real one can)."""

import textwrap
import unittest

# The real package rewrites expectations in place when this is set (EXPECTTEST_ACCEPT).
ACCEPT = False


class TestCase(unittest.TestCase):
    """unittest.TestCase with expecttest's assertions, comparing only."""

    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(_normalise(expect), actual)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(msg="Did not raise when expected to")


def _normalise(expect):
    """An inline expectation as the real package reads it: dedented, one leading newline
    dropped."""
    text = textwrap.dedent(expect)
    return text[1:] if text.startswith("\n") else text
