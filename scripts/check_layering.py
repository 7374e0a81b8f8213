"""Fails when a layer includes something DESIGN.md says it may not know.

CMake already keeps a layer from seeing the headers of layers it does not link; this
check also covers third-party headers on the default include path (ATen, LLVM, CUDA)
and the rule that the frontend's core needs no libpython.
"""
import fnmatch
import pathlib
import re
import sys

# The tree to check: the repository, or the folder given as the only argument (tests).
ROOT = pathlib.Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else \
    pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

PYTHON = ("Python.h", "internal/pycore_", "frameobject.h", "torch/csrc/")
TORCH = ("torch/", "ATen/", "c10/")
LLVM = ("llvm/", "llvm-c/")
CUDA = ("cuda.h", "cuda_runtime", "nvrtc.h")


def layer_headers(*names):
    return tuple("dynvm/%s/" % n for n in names)


# (directory, excluded subdirectory, forbidden include prefixes, why)
RULES = [
    ("frontend", "frontend/cpython",
     PYTHON + TORCH + LLVM + CUDA + ("boost/",) + layer_headers("graph", "vm", "codegen", "runtime"),
     "the frontend knows bytecode and nothing else"),
    ("frontend/cpython", None,
     TORCH + LLVM + CUDA + layer_headers("graph", "vm", "codegen", "runtime"),
     "the live-code adapter only reads code objects"),
    ("graph", None, PYTHON + LLVM + CUDA + layer_headers("frontend", "vm", "codegen", "runtime"),
     "the graph knows tensors and operators, not Python"),
    ("vm", None, LLVM + CUDA + layer_headers("codegen", "runtime"),
     "the VM produces graphs and guards; it does not generate code"),
    ("codegen", None, PYTHON + layer_headers("frontend", "vm", "runtime"),
     "codegen knows the graph and the targets"),
]


# Files inside codegen/ with narrower rules: fnmatch patterns on paths relative to
# codegen/ (public headers are include/dynvm/codegen/NAME.h). The loop IR and the glue IR
# are the targets' common ground; LLVM belongs to the CPU target and the glue's JIT; CUDA
# headers to the one file that loads NVRTC and the driver.
H = "include/dynvm/codegen/"
CODEGEN_FILE_RULES = [
    (("loop_ir/*", H + "loop_ir*", H + "coalesce_loops*", H + "loop_pass_runner*",
      H + "lower_group*"), TORCH + LLVM + CUDA,
     "the loop IR is target-neutral: no ATen, LLVM or CUDA"),
    (("glue/glue_ir*", "glue/glue_op_table*", H + "glue_ir*"), TORCH + LLVM + CUDA,
     "the glue IR is target-neutral: no ATen, LLVM or CUDA"),
    (("cuda/lower_loops_to_cuda*", H + "lower_loops_to_cuda*"), TORCH + LLVM + CUDA,
     "the CUDA lowering writes text: no ATen, LLVM or CUDA header"),
    (("cuda/*", H + "cuda_*", "executor/*", "targets/*", "loop_ir/*"), LLVM,
     "LLVM belongs to the CPU target (cpu/) and the glue's JIT (glue/)"),
    (("*",), CUDA,
     "CUDA headers are included by cuda/cuda_libraries.cpp only (NVRTC and the driver are "
     "loaded at run time)"),
    (("targets/*", "cuda/cuda_libraries*", H + "targets*", H + "cuda_libraries*"),
     LLVM + TORCH, "the targets' report loads neither torch nor LLVM"),
]
CODEGEN_EXEMPT = {"cuda/cuda_libraries.cpp": CUDA}


def codegen_file_violations():
    base = ROOT / "codegen"
    if not base.is_dir():
        return
    for path in sorted(base.rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        rel = path.relative_to(base).as_posix()
        text = path.read_text(errors="replace")
        for patterns, forbidden, why in CODEGEN_FILE_RULES:
            if not any(fnmatch.fnmatch(rel, p) for p in patterns):
                continue
            forbidden = tuple(f for f in forbidden if f not in CODEGEN_EXEMPT.get(rel, ()))
            for match in INCLUDE.finditer(text):
                header = match.group(1)
                if any(header.startswith(f) or header == f.rstrip("/") for f in forbidden):
                    line = text[: match.start()].count("\n") + 1
                    yield "codegen/%s:%d: includes <%s>: %s" % (rel, line, header, why)


def violations():
    yield from codegen_file_violations()
    for directory, excluded, forbidden, why in RULES:
        for path in sorted((ROOT / directory).rglob("*")):
            if path.suffix not in (".h", ".cpp", ".inc", ".def"):
                continue
            rel = path.relative_to(ROOT).as_posix()
            if excluded and rel.startswith(excluded + "/"):
                continue
            for match in INCLUDE.finditer(path.read_text(errors="replace")):
                header = match.group(1)
                if any(header.startswith(f) or header == f.rstrip("/") for f in forbidden):
                    line = path.read_text(errors="replace")[: match.start()].count("\n") + 1
                    yield "%s:%d: includes <%s>: %s" % (rel, line, header, why)


def main():
    found = list(violations())
    for v in found:
        print(v)
    print("check_layering: %d violation(s)" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
