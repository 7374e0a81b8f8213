#!/usr/bin/env python3
"""dynvm's coverage reports (docs/coverage.md).

    # what the VM did with each opcode of this Python, over test suites and fuzzing runs
    python3 scripts/coverage.py opcodes [--build build] [--out build/coverage] \
        [--fuzz-seconds 120] [--suite tests/python/test_vm_corpus.py ...]

    # line and branch coverage of frontend/, vm/ and runtime/ (a gcov build of its own)
    python3 scripts/coverage.py lines [--build build/cov] [--suite ...]

    # the opcode table again from dumps already made (several Python versions at once)
    python3 scripts/coverage.py merge DIR... --out build/coverage

`opcodes` runs the suites and the fuzzers with DYNVM_OPCODE_COVERAGE set, so that every
process that loads the native core writes its counts when it exits
(runtime/python/dynvm/_opcode_coverage.py), then merges them into opcodes.md and
opcodes.json under --out: for each opcode of the running Python, how many instructions
the VM executed while tracing, how many traces stopped on it (with the reasons), and how
many of those because the VM has no rule for it.

`lines` configures and builds --build with DYNVM_COVERAGE=ON (gcc's --coverage), runs the
C++ unit tests and the suites against it, reads the counters with `gcov --json-format`
and writes an HTML report (index.html, one page per source file with its unexecuted lines
and untaken branches) and summary.json under BUILD/coverage, with the opcode report of
the same runs beside them. Branches of exception edges
are left out, as gcovr's --exclude-throw-branches does.
"""

import argparse
import collections
import gzip
import html
import json
import opcode
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The suites whose tracing the reports measure by default: the VM's own corpora, the
# models, and the differential fuzzers' CI runs.
DEFAULT_SUITES = [
    "tests/python/test_vm_corpus.py",
    "tests/python/test_break_corpus.py",
    "tests/python/test_vm_regressions.py",
    "tests/python/test_container_views.py",
    "tests/python/test_dict_subclass_objects.py",
    "tests/python/test_slots_and_iterators.py",
    "tests/python/test_models.py",
    "tests/python/test_dynamic_shapes.py",
]

LINE_DIRECTORIES = ("frontend", "vm", "runtime")


def venv_python():
    return os.environ.get("DYNVM_PYTHON_FOR_TESTS") or sys.executable


def run_suites(build, suites, env):
    """Runs pytest over `suites` against the Python package in `build`; returns the exit
    status (failures are reported, the counts are kept either way)."""
    env = dict(env)
    env["PYTHONPATH"] = os.path.join(build, "python")
    env["DYNVM_EXE"] = os.path.join(build, "bin", "dynvm")
    env["DYNVM_BUILD_DIR"] = build
    cmd = [venv_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider"] + [
        os.path.join(REPO, s) for s in suites]
    print("coverage:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=build, env=env)


def run_fuzzers(build, seconds, env):
    """Runs each differential fuzzer of fuzz/ for `seconds`."""
    env = dict(env)
    env["PYTHONPATH"] = os.path.join(build, "python")
    for script in ("program_fuzz.py", "fusion_fuzz.py"):
        path = os.path.join(REPO, "fuzz", script)
        if not os.path.exists(path):
            continue
        cmd = [venv_python(), path, "--seconds", str(seconds), "--seed", "1"]
        print("coverage:", " ".join(cmd), flush=True)
        subprocess.call(cmd, cwd=REPO, env=env)


# ---------------------------------------------------------------------------------------
# opcodes


def opcode_tables(version):
    """(opmap, specialised names) of Python `version` ("3.12"): the running Python's own
    opcode module, or the dump of its opcode module in tests/data (the tables the frontend
    is generated from), or None."""
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        specialised = set(getattr(opcode, "_specialized_instructions", ()))
        for family in getattr(opcode, "_specializations", {}).values():
            specialised.update(family)
        return dict(opcode.opmap), specialised
    dump = os.path.join(REPO, "tests", "data", "py" + version.replace(".", ""),
                        "opcode_dump.json")
    if not os.path.exists(dump):
        return None
    with open(dump, encoding="utf-8") as f:
        data = json.load(f)
    specialised = set(data.get("_specialized_instructions", ()))
    for family in (data.get("_specializations") or {}).values():
        specialised.update(family)
    return data["opmap"], specialised


def base_opcodes(version):
    """The opcodes of Python `version` that can appear in a code object as written:
    neither specialised, instrumented nor pseudo (the VM sees specialised ones under their
    base), nor CACHE and EXTENDED_ARG, which the decoder folds away."""
    tables = opcode_tables(version)
    if tables is None:
        return []
    opmap, specialised = tables
    names = []
    for name, number in sorted(opmap.items(), key=lambda item: item[1]):
        if number >= 256 or name in specialised or name.startswith("INSTRUMENTED_"):
            continue
        if name in ("CACHE", "EXTENDED_ARG", "RESERVED", "ENTER_EXECUTOR"):
            continue
        names.append(name)
    return names


def merge_dumps(directories):
    """{python version: {opcode: merged counts}} over every dump in `directories`."""
    merged = collections.defaultdict(dict)
    processes = collections.Counter()
    for directory in directories:
        for name in sorted(os.listdir(directory)):
            if not (name.startswith("opcodes-") and name.endswith(".json")):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                record = json.load(f)
            version = record["python"]
            processes[version] += 1
            table = merged[version]
            for entry in record["opcodes"]:
                counts = table.setdefault(entry["opcode"], {
                    "executed": 0, "breaks": 0, "refused": 0, "reasons": collections.Counter()})
                for key in ("executed", "breaks", "refused"):
                    counts[key] += entry[key]
                counts["reasons"].update(entry["reasons"])
    return merged, processes


# Opcodes that cannot meet the VM, with why: it traces function frames (not module or
# class bodies, not coroutines, whose frames the frame hook leaves to CPython), and some
# are never run by CPython itself. The report lists them apart from those never met.
_MODULE_OR_CLASS_BODY = "only in module or class bodies"
_COROUTINE = "only in coroutines and async generators, left to CPython"
NOT_IN_TRACED_CODE = {
    **dict.fromkeys(["STORE_NAME", "LOAD_NAME", "DELETE_NAME", "SETUP_ANNOTATIONS",
                     "IMPORT_STAR", "LOAD_CLASSDEREF", "LOAD_LOCALS",
                     "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_FROM_DICT_OR_DEREF"],
                    _MODULE_OR_CLASS_BODY),
    "PRINT_EXPR": "only in the interactive interpreter",
    **dict.fromkeys(["GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH", "END_ASYNC_FOR",
                     "ASYNC_GEN_WRAP", "GET_AWAITABLE"], _COROUTINE),
    "INTERPRETER_EXIT": "never run by CPython: the entry frame's",
    "END_FOR": "never run by CPython 3.12: FOR_ITER jumps past it",
}


def opcode_rows(table, names):
    """One row per opcode: `names` (this Python's) first, then any other met."""
    rows = []
    for name in list(names) + sorted(set(table) - set(names)):
        counts = table.get(name, {"executed": 0, "breaks": 0, "refused": 0, "reasons": {}})
        rows.append((name, counts))
    return rows


def format_markdown(merged, processes, command):
    lines = ["# Opcode coverage", "", f"Made by `{command}`.", ""]
    for version in sorted(merged):
        table = merged[version]
        names = base_opcodes(version)
        rows = opcode_rows(table, names)
        met = sum(1 for _, c in rows if c["executed"] or c["breaks"])
        lines += [
            f"## Python {version}", "",
            f"{processes[version]} processes; {met} of {len(rows)} opcodes met "
            f"({sum(c['executed'] for _, c in rows):,} instructions executed while tracing, "
            f"{sum(c['breaks'] for _, c in rows):,} traces stopped).", "",
            "| opcode | executed | breaks | refused | most frequent break reasons |",
            "|---|---:|---:|---:|---|",
        ]
        for name, c in rows:
            reasons = collections.Counter(c["reasons"]).most_common(3)
            text = "; ".join(f"{r.replace('|', '/')} ({n})" for r, n in reasons)
            lines.append(f"| {name} | {c['executed']:,} | {c['breaks']:,} | {c['refused']:,} "
                         f"| {text} |")
        unmet = [name for name, c in rows if not (c["executed"] or c["breaks"])]
        never = [name for name in unmet if name not in NOT_IN_TRACED_CODE]
        apart = [f"{name} ({NOT_IN_TRACED_CODE[name]})" for name in unmet
                 if name in NOT_IN_TRACED_CODE]
        lines += ["", "Never met: " + (", ".join(never) if never else "none") + ".", ""]
        if apart:
            lines += ["Not in code the VM traces: " + "; ".join(apart) + ".", ""]
    return "\n".join(lines)


def write_opcode_report(merged, processes, out, command):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "opcodes.md"), "w", encoding="utf-8") as f:
        f.write(format_markdown(merged, processes, command))
    with open(os.path.join(out, "opcodes.json"), "w", encoding="utf-8") as f:
        json.dump({v: {name: dict(c, reasons=dict(c["reasons"])) for name, c in t.items()}
                   for v, t in merged.items()}, f, indent=1, sort_keys=True)
    print(f"coverage: wrote {os.path.join(out, 'opcodes.md')}", flush=True)


def command_opcodes(args):
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    raw = os.path.join(out, "opcodes-raw")
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    env = dict(os.environ, DYNVM_OPCODE_COVERAGE=raw)
    status = run_suites(build, args.suite or DEFAULT_SUITES, env)
    if args.fuzz_seconds > 0:
        run_fuzzers(build, args.fuzz_seconds, env)
    merged, processes = merge_dumps([raw])
    if not merged:
        sys.exit("coverage: no process wrote opcode counts (is the build's dynvm loaded?)")
    write_opcode_report(merged, processes, out, "python3 scripts/coverage.py " +
                        " ".join(sys.argv[1:]))
    return status


def command_merge(args):
    merged, processes = merge_dumps(args.directories)
    write_opcode_report(merged, processes, os.path.abspath(args.out),
                        "python3 scripts/coverage.py " + " ".join(sys.argv[1:]))
    return 0


# ---------------------------------------------------------------------------------------
# lines


def configure_and_build(build):
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.check_call([
            "cmake", "-S", REPO, "-B", build, "-G", "Ninja", "-DDYNVM_COVERAGE=ON",
            f"-DPython3_EXECUTABLE={venv_python()}"])
    subprocess.check_call(["ninja", "-C", build])


def gcov_records(build):
    """Yields gcov's JSON record of every .gcda file under `build`."""
    for root, _, files in os.walk(build):
        for name in files:
            if not name.endswith(".gcda"):
                continue
            result = subprocess.run(
                ["gcov", "--branch-probabilities", "--json-format", "--stdout",
                 os.path.join(root, name)],
                cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
            data = result.stdout
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            for chunk in data.decode("utf-8", "replace").splitlines():
                chunk = chunk.strip()
                if chunk.startswith("{"):
                    yield json.loads(chunk)


def collect_lines(build):
    """{repo-relative file: {"lines": {n: count}, "branches": {(n, i): taken}}} for the
    sources of LINE_DIRECTORIES, merged over translation units (a header's line counts
    in every unit that includes it)."""
    files = {}
    for record in gcov_records(build):
        for entry in record.get("files", []):
            path = os.path.realpath(os.path.join(record.get("current_working_directory", ""),
                                                 entry["file"]))
            rel = os.path.relpath(path, REPO)
            if rel.startswith("..") or rel.split(os.sep)[0] not in LINE_DIRECTORIES:
                continue
            slot = files.setdefault(rel, {"lines": {}, "branches": {}})
            for line in entry.get("lines", []):
                n = line["line_number"]
                slot["lines"][n] = slot["lines"].get(n, 0) + line["count"]
                kept = [b for b in line.get("branches", []) if not b.get("throw")]
                for i, branch in enumerate(kept):
                    key = (n, i)
                    slot["branches"][key] = slot["branches"].get(key, False) or branch["count"] > 0
    return files


def percent(part, whole):
    return 100.0 * part / whole if whole else 100.0


def summarise(files):
    rows = []
    for rel in sorted(files):
        lines = files[rel]["lines"]
        branches = files[rel]["branches"]
        rows.append({
            "file": rel,
            "lines": len(lines), "lines_hit": sum(1 for c in lines.values() if c > 0),
            "branches": len(branches), "branches_taken": sum(1 for t in branches.values() if t),
        })
    return rows


def write_html(files, rows, out):
    os.makedirs(out, exist_ok=True)
    by_directory = collections.defaultdict(lambda: collections.Counter())
    for r in rows:
        d = by_directory[r["file"].split(os.sep)[0]]
        for key in ("lines", "lines_hit", "branches", "branches_taken"):
            d[key] += r[key]
    parts = ["<!doctype html><meta charset=utf-8><title>dynvm coverage</title>",
             "<style>td,th{padding:2px 8px;text-align:right}td:first-child{text-align:left}"
             "</style><h1>dynvm line and branch coverage</h1><table>",
             "<tr><th>file</th><th>lines</th><th>line %</th><th>branches</th><th>branch %</th>"]

    def row(name, link, r):
        label = f"<a href='{link}'>{html.escape(name)}</a>" if link else f"<b>{name}</b>"
        return (f"<tr><td>{label}</td><td>{r['lines_hit']}/{r['lines']}</td>"
                f"<td>{percent(r['lines_hit'], r['lines']):.1f}</td>"
                f"<td>{r['branches_taken']}/{r['branches']}</td>"
                f"<td>{percent(r['branches_taken'], r['branches']):.1f}</td></tr>")

    for directory in sorted(by_directory):
        parts.append(row(directory + "/", None, by_directory[directory]))
    for r in rows:
        page = r["file"].replace(os.sep, "_") + ".html"
        parts.append(row(r["file"], page, r))
        write_file_page(r["file"], files[r["file"]], os.path.join(out, page))
    parts.append("</table>")
    with open(os.path.join(out, "index.html"), "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return by_directory


def write_file_page(rel, data, path):
    """The source with each line's count; unexecuted lines and lines with an untaken
    branch marked."""
    try:
        with open(os.path.join(REPO, rel), encoding="utf-8") as f:
            source = f.read().splitlines()
    except OSError:
        source = []
    untaken = collections.Counter(n for (n, _), t in data["branches"].items() if not t)
    parts = [f"<!doctype html><meta charset=utf-8><title>{html.escape(rel)}</title>",
             "<style>.no{background:#fcc}.part{background:#ffc}pre{margin:0}</style>",
             f"<h1>{html.escape(rel)}</h1><pre>"]
    for n, text in enumerate(source, start=1):
        count = data["lines"].get(n)
        cls = "no" if count == 0 else ("part" if untaken.get(n) else "")
        shown = "" if count is None else str(count)
        note = f" [{untaken[n]} branch(es) not taken]" if untaken.get(n) else ""
        parts.append(f"<span class='{cls}'>{n:5} {shown:>9} | {html.escape(text)}{note}</span>")
    parts.append("</pre>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


def command_lines(args):
    build = os.path.abspath(args.build)
    configure_and_build(build)
    for root, _, names in os.walk(build):  # counts of an earlier run
        for name in names:
            if name.endswith(".gcda"):
                os.remove(os.path.join(root, name))
    out = os.path.join(build, "coverage")
    raw = os.path.join(out, "opcodes-raw")
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    subprocess.call(["ctest", "--test-dir", build, "-L", "unit", "--output-on-failure"])
    # The same runs count opcodes too (the opcode report of this Python, beside the lines).
    env = dict(os.environ, DYNVM_OPCODE_COVERAGE=raw)
    status = run_suites(build, args.suite or DEFAULT_SUITES, env)
    merged, processes = merge_dumps([raw])
    if merged:
        write_opcode_report(merged, processes, out,
                            "python3 scripts/coverage.py " + " ".join(sys.argv[1:]))
    files = collect_lines(build)
    if not files:
        sys.exit("coverage: gcov found no counts (was the build made with DYNVM_COVERAGE=ON?)")
    rows = summarise(files)
    totals = write_html(files, rows, out)
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"directories": {d: dict(c) for d, c in totals.items()}, "files": rows}, f,
                  indent=1)
    for directory in sorted(totals):
        c = totals[directory]
        print(f"coverage: {directory}/: lines {c['lines_hit']}/{c['lines']} "
              f"({percent(c['lines_hit'], c['lines']):.1f}%), branches "
              f"{c['branches_taken']}/{c['branches']} "
              f"({percent(c['branches_taken'], c['branches']):.1f}%)")
    print(f"coverage: wrote {os.path.join(out, 'index.html')}", flush=True)
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("opcodes", help="per-opcode counts over suites and fuzzing runs")
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--out", default=os.path.join(REPO, "build", "coverage"))
    p.add_argument("--fuzz-seconds", type=int, default=120)
    p.add_argument("--suite", action="append", help="a pytest path (repeatable)")
    p.set_defaults(run=command_opcodes)
    p = sub.add_parser("lines", help="line and branch coverage of frontend/, vm/, runtime/")
    p.add_argument("--build", default=os.path.join(REPO, "build", "cov"))
    p.add_argument("--suite", action="append", help="a pytest path (repeatable)")
    p.set_defaults(run=command_lines)
    p = sub.add_parser("merge", help="the opcode report from existing dumps")
    p.add_argument("directories", nargs="+")
    p.add_argument("--out", default=os.path.join(REPO, "build", "coverage"))
    p.set_defaults(run=command_merge)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
