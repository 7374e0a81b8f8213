"""Coverage sweep: every model of tests/models/transformers_zoo.py (small configs, random
weights, eval mode, no grad) traced by dynvm.explain and by Dynamo's explain in the same
process; prints a markdown table of graphs, breaks and capture time side by side, and the
most frequent break reasons. Not a test; docs/status.md records the result.

    PYTHONPATH=build/python python bench/transformers_sweep.py [name ...]
"""
import collections
import pathlib
import sys
import warnings

import dynvm

_TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS), str(_TESTS / "python")]
import model_compare as compare  # noqa: E402
from models import transformers_zoo as zoo  # noqa: E402


def main(names):
    warnings.filterwarnings("ignore")
    reasons = collections.Counter()
    print("| model | dynvm graphs | dynvm breaks | Dynamo graphs | Dynamo breaks |"
          " dynvm capture s | Dynamo capture s |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        model = zoo.build(name)
        kwargs = zoo.inputs(name, model)
        dynvm.reset()
        ours, ours_s = compare.timed_explain(dynvm.explain, model, kwargs=kwargs)
        theirs, theirs_s = compare.dynamo_explain(model, kwargs=kwargs)
        for b in ours.break_reasons:
            reasons[compare.reason_key(b)] += 1
        print(f"| {name} | {ours.graph_count} | {ours.graph_break_count} | "
              f"{theirs.graph_count} | {theirs.graph_break_count} | {ours_s:.2f} | "
              f"{theirs_s:.2f} |", flush=True)
    print("\nMost frequent break reasons under dynvm:")
    for reason, count in reasons.most_common(15):
        print(f"- {count} x {reason}")


if __name__ == "__main__":
    main(sys.argv[1:] or zoo.NAMES)
