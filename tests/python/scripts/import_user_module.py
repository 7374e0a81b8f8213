"""Imports user_module from PYTHONPATH and prints where it came from and sys.path."""
import json
import sys

import user_module

print(json.dumps({"module": user_module.__file__, "path": sys.path}))
