"""Prints what a script sees of how it was started, as JSON, for comparing runners."""
import json
import sys

print(
    json.dumps(
        {
            "argv": sys.argv,
            "path0": sys.path[0],
            "path": sys.path,
            "name": __name__,
            "file": __file__,
            "executable": sys.executable,
            "prefix": sys.prefix,
            "spec": repr(__spec__),
        }
    )
)
