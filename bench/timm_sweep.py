"""Coverage sweep of timm: one model per family (tests/python/vision_zoo.py's TIMM_NAMES,
the smallest variant at its default input size, random weights), dynvm's graphs and
breaks against Dynamo's and the results under both backends against eager's; the table
and the checks are bench/torchvision_sweep.py's. Not a test; docs/status.md records it.

    PYTHONPATH=build/python python bench/timm_sweep.py [name ...]
"""
import sys

import torchvision_sweep

if __name__ == "__main__":
    torchvision_sweep.main([f"timm/{n}" for n in sys.argv[1:]] or ["timm"])
