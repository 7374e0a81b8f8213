"""Calls sys.exit with argv[1]: an int when it looks like one, else the string."""
import sys

code = sys.argv[1]
print("exiting", flush=True)
sys.exit(int(code) if code.lstrip("-").isdigit() else code)
