"""Forks a child that exits normally, so both processes run their atexit handlers."""
import os
import sys

pid = os.fork()
if pid == 0:
    print("child", flush=True)
    sys.exit(0)
os.waitpid(pid, 0)
print("parent", flush=True)
