"""A module that import_sibling.py finds next to itself through sys.path[0]."""

GREETING = "hello from the sibling module"
