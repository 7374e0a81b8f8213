#!/usr/bin/env python3
"""Dumps a CPython's opcode module to JSON and generates dynvm's opcode tables from such dumps.

Two steps, so that a table for a Python that is not installed here can be generated from a
dump made elsewhere:

    # on a machine with the Python in question (any of 3.11, 3.12, 3.13):
    python3 scripts/gen_opcode_tables.py dump tests/data/py3XX/opcode_dump.json

    # with any Python, from every dump at once (the union of base opcodes needs all):
    python3 scripts/gen_opcode_tables.py generate tests/data/py31[123]/opcode_dump.json

`generate` writes frontend/opcodes_3_XX.def for each dump and the version-independent
frontend/include/dynvm/frontend/opcodes.def (base opcodes, binary operators, comparison
operators, intrinsics). The dump has the shape tests/data/dis_fixtures/generate.py writes:
the opcode module's tables plus `stack_effect[name][arg] = [jump None, True, False]`.
"""

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DUMP_FIELDS = [
    "opname", "opmap", "hasconst", "hasname", "hasjrel", "hasjabs", "haslocal", "hasfree",
    "hascompare", "cmp_op", "_nb_ops", "_inline_cache_entries", "_specializations",
    "_intrinsic_1_descs", "_intrinsic_2_descs", "hasarg", "HAVE_ARGUMENT", "EXTENDED_ARG",
    "_specialized_instructions", "_specialized_opmap",
]

# Instructions whose argument packs two fast-local indices (3.13: first << 4 | second).
LOCAL_PAIR_OPCODES = {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"}

# Names the comparison symbols get in dynvm's CompareOp enum.
COMPARE_NAMES = {"<": "LT", "<=": "LE", "==": "EQ", "!=": "NE", ">": "GT", ">=": "GE"}


# ---------------------------------------------------------------------------------------
# dump


def dump_module(opcode_module, dis_module=None, version=None):
    """The opcode module's tables as plain JSON data; stack effects when dis is given."""
    out = {"version": list(version or sys.version_info[:3])}
    for field in DUMP_FIELDS:
        if hasattr(opcode_module, field):
            value = getattr(opcode_module, field)
            if isinstance(value, (set, frozenset)):
                value = sorted(value)
            out[field] = value
    if "_nb_ops" not in out and dis_module is not None and hasattr(dis_module, "_nb_ops"):
        out["_nb_ops"] = dis_module._nb_ops
    if dis_module is None:
        return out
    have_argument = opcode_module.HAVE_ARGUMENT
    # 3.13 renumbered the opcodes: an argument is what `hasarg` says (WITH_EXCEPT_START is
    # at HAVE_ARGUMENT and takes none). Opcodes at or above HAVE_ARGUMENT still get rows
    # for every argument, as 3.11 and 3.12 dumps have them.
    hasarg = set(getattr(opcode_module, "hasarg", ()))
    effects = {}
    for name, op in opcode_module.opmap.items():
        takes_arg = op >= have_argument or op in hasarg
        rows = []
        for arg in range(0, 301):
            if not takes_arg and arg:
                break
            row = []
            for jump in (None, True, False):
                try:
                    if not takes_arg:
                        row.append(dis_module.stack_effect(op, jump=jump))
                    else:
                        row.append(dis_module.stack_effect(op, arg, jump=jump))
                except ValueError:
                    row.append(None)
            rows.append(row)
        effects[name] = rows
    out["stack_effect"] = effects
    return out


def cmd_dump(args):
    import dis
    import opcode
    data = dump_module(opcode, dis)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(data, f, indent=0, sort_keys=True)
        f.write("\n")
    print("wrote", args.output)


# ---------------------------------------------------------------------------------------
# generate


class Table:
    """One version's opcodes, derived from its dump the way dis.py reads the module."""

    def __init__(self, dump, source):
        self.source = source
        self.version = tuple(dump["version"][:2])
        self.dump = dump
        opmap = {name: op for name, op in dump["opmap"].items() if op < 256}
        have_argument = dump["HAVE_ARGUMENT"]
        hasarg = set(dump["hasarg"]) if "hasarg" in dump else None
        caches = dump["_inline_cache_entries"]
        if isinstance(caches, dict):  # some Pythons keep a name -> count mapping
            caches = [caches.get(dump["opname"][op], 0) for op in range(256)]

        numbers = dict(opmap)
        if "_specialized_opmap" in dump:
            # 3.13 numbers its specialised instructions itself.
            numbers.update(dump["_specialized_opmap"])
        else:
            # 3.11, 3.12: they fill the unused numbers in order, as dis does.
            specialized = dump.get("_specialized_instructions")
            if specialized is None:
                specialized = [s for fam in dump["_specializations"].values() for s in fam]
            used = set(opmap.values())
            free_slots = [op for op in range(256) if op not in used]
            for slot, name in zip(free_slots, specialized):
                numbers[name] = slot
        base_of = {name: name for name in opmap}
        for base, family in dump["_specializations"].items():
            for name in family:
                base_of[name] = base
        # Instrumented opcodes (3.12+) run their base instruction.
        for name in opmap:
            if name.startswith("INSTRUMENTED_") and name[len("INSTRUMENTED_"):] in opmap:
                base_of[name] = name[len("INSTRUMENTED_"):]

        def kinds(base):
            op = opmap[base]
            has_arg = (op in hasarg) if hasarg is not None else op >= have_argument
            jump = "None"
            if op in dump["hasjrel"]:
                jump = "Backward" if "JUMP_BACKWARD" in base else "Forward"
            elif op in dump["hasjabs"]:
                jump = "Absolute"
            if not has_arg:
                arg = "None"
            elif jump != "None":
                arg = "Jump"
            elif op in dump["hasconst"]:
                arg = "Const"
            elif base == "LOAD_GLOBAL":
                arg = "GlobalName"
            elif base == "LOAD_ATTR" and self.version >= (3, 12):
                arg = "AttrName"
            elif base == "LOAD_SUPER_ATTR":
                arg = "SuperAttrName"
            elif base in LOCAL_PAIR_OPCODES:
                arg = "LocalPair"
            elif op in dump["hasname"]:
                arg = "Name"
            elif op in dump["haslocal"]:
                arg = "Local"
            elif op in dump["hasfree"]:
                arg = "Cell"
            elif op in dump["hascompare"]:
                arg = "Compare"
            elif base == "BINARY_OP":
                arg = "BinaryOp"
            elif base == "CALL_INTRINSIC_1":
                arg = "Intrinsic1"
            elif base == "CALL_INTRINSIC_2":
                arg = "Intrinsic2"
            elif base == "FORMAT_VALUE":
                arg = "FormatValue"
            elif base in ("MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE"):
                arg = "MakeFunctionFlags"
            elif base == "CONVERT_VALUE":
                arg = "ConvertValue"
            else:
                arg = "Int"
            return caches[op], jump, arg

        self.rows = []
        for name, number in sorted(numbers.items(), key=lambda item: item[1]):
            base = base_of[name]
            ncache, jump, arg = kinds(base)
            self.rows.append((number, name, base, ncache, jump, arg))
        self.bases = sorted({row[2] for row in self.rows}, key=lambda b: opmap[b])
        # Pseudo opcodes (3.12+) exist only inside the compiler; dis.stack_effect knows them.
        self.pseudo = sorted((op, name) for name, op in dump["opmap"].items() if op >= 256)
        self.base_numbers = {b: opmap[b] for b in self.bases}

    def def_text(self):
        major, minor = self.version
        lines = [
            f"// CPython {major}.{minor}'s opcodes as an X-macro list, generated by",
            f"// scripts/gen_opcode_tables.py from {self.source}; do not edit.",
            "//",
            "// DYNVM_OPCODE(number, name, base, cache_entries, jump_kind, arg_kind): `base` is the",
            "// instruction a specialised or instrumented opcode stands for (itself otherwise);",
            "// cache entries, jump and argument kinds are the base's.",
            "// DYNVM_PSEUDO_OPCODE(number, name): the compiler's pseudo instructions, never in",
            "// bytecode (optional; defaults to nothing).",
            "// clang-format off",
            "#ifndef DYNVM_PSEUDO_OPCODE",
            "#define DYNVM_PSEUDO_OPCODE(number, name)",
            "#endif",
        ]
        for number, name, base, ncache, jump, arg in self.rows:
            lines.append(f"DYNVM_OPCODE({number}, {name}, {base}, {ncache}, {jump}, {arg})")
        for number, name in self.pseudo:
            lines.append(f"DYNVM_PSEUDO_OPCODE({number}, {name})")
        lines.append("#undef DYNVM_PSEUDO_OPCODE")
        lines.append("// clang-format on")
        return "\n".join(lines) + "\n"


def union_text(tables):
    """Base opcodes of all versions, ordered by first appearance; operator tables."""
    order = []
    seen = set()
    for table in tables:
        for base in table.bases:
            if base not in seen:
                seen.add(base)
                order.append(base)

    def longest(field, check=lambda value: value):
        """The field's list in the newest version; older versions must list a prefix of
        it, so that one enum numbers the operators of every version."""
        values = [check(t.dump[field]) for t in tables if field in t.dump]
        if not values:
            return []
        newest = max(values, key=len)
        for value in values:
            if value != newest[:len(value)]:
                sys.exit(f"{field} differs between versions; the union needs one list")
        return newest

    nb_ops = longest("_nb_ops", lambda v: [list(x) for x in v])
    cmp_op = longest("cmp_op", list)
    intrinsic_1 = longest("_intrinsic_1_descs", list)
    intrinsic_2 = longest("_intrinsic_2_descs", list)
    lines = [
        "// Every base opcode of the CPython versions dynvm reads, and their operator tables,",
        "// as X-macro lists; generated by scripts/gen_opcode_tables.py from",
    ]
    lines += [f"// {t.source}," for t in tables[:-1]]
    lines += [
        f"// {tables[-1].source}; do not edit.",
        "//",
        "// Define the macros you need before including this file; the others default to nothing",
        "// and all are undefined at its end.",
        "//   DYNVM_BASE_OPCODE(name)            base opcodes (the Opcode enum)",
        "//   DYNVM_BINARY_OP(name, symbol)      BINARY_OP's argument, in order (NB_ADD = 0)",
        "//   DYNVM_COMPARE_OP(name, symbol)     COMPARE_OP's comparison, in order (LT = 0)",
        "//   DYNVM_INTRINSIC_1(name)            CALL_INTRINSIC_1's argument (3.12+), in order",
        "//   DYNVM_INTRINSIC_2(name)            CALL_INTRINSIC_2's argument (3.12+), in order",
        "// An operator list is the newest version's; older versions use a prefix of it.",
        "// clang-format off",
    ]
    for macro in ["DYNVM_BASE_OPCODE(name)", "DYNVM_BINARY_OP(name, symbol)",
                  "DYNVM_COMPARE_OP(name, symbol)", "DYNVM_INTRINSIC_1(name)",
                  "DYNVM_INTRINSIC_2(name)"]:
        short = macro.split("(")[0]
        lines += [f"#ifndef {short}", f"#define {macro}", "#endif"]
    lines += [f"DYNVM_BASE_OPCODE({base})" for base in order]
    lines += [f'DYNVM_BINARY_OP({name}, "{symbol}")' for name, symbol in nb_ops]
    lines += [f'DYNVM_COMPARE_OP({COMPARE_NAMES[s]}, "{s}")' for s in cmp_op]
    lines += [f"DYNVM_INTRINSIC_1({name})" for name in intrinsic_1]
    lines += [f"DYNVM_INTRINSIC_2({name})" for name in intrinsic_2]
    for macro in ["DYNVM_BASE_OPCODE", "DYNVM_BINARY_OP", "DYNVM_COMPARE_OP",
                  "DYNVM_INTRINSIC_1", "DYNVM_INTRINSIC_2"]:
        lines.append(f"#undef {macro}")
    lines.append("// clang-format on")
    return "\n".join(lines) + "\n"


def write_if_changed(path, text):
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path, "w") as f:
            f.write(text)
        print("wrote", os.path.relpath(path, REPO))
    else:
        print("unchanged", os.path.relpath(path, REPO))


def cmd_generate(args):
    tables = []
    for path in args.dumps:
        with open(path) as f:
            dump = json.load(f)
        source = os.path.relpath(os.path.abspath(path), REPO)
        if source.startswith(".."):
            source = os.path.basename(path)
        tables.append(Table(dump, source))
    tables.sort(key=lambda t: t.version)
    for table in tables:
        major, minor = table.version
        write_if_changed(os.path.join(args.outdir, "frontend", f"opcodes_{major}_{minor}.def"),
                         table.def_text())
    write_if_changed(
        os.path.join(args.outdir, "frontend", "include", "dynvm", "frontend", "opcodes.def"),
        union_text(tables))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser("dump", help="dump the running Python's opcode module")
    dump.add_argument("output")
    dump.set_defaults(func=cmd_dump)
    gen = sub.add_parser("generate", help="write the .def tables from dumps")
    gen.add_argument("dumps", nargs="+")
    gen.add_argument("--outdir", default=REPO, help="repository root to write into")
    gen.set_defaults(func=cmd_generate)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
