"""Prints the options `dynvm run` handed to the dynvm package, as JSON."""
import json

from dynvm import _cli

run = _cli.current_run()
settings = {name: getattr(run, name) for name in run.FIELDS if name not in ("pid", "started")}
print(json.dumps(settings))
