"""Prints the options `dynvm run` handed to the dynvm package, as JSON."""
import dataclasses
import json

from dynvm import _cli

settings = dataclasses.asdict(_cli.current_run())
del settings["pid"], settings["started"]
print(json.dumps(settings))
