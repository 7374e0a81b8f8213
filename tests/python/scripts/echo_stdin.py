"""Copies stdin to stdout in upper case."""
import sys

sys.stdout.write(sys.stdin.read().upper())
