// Code objects the tracer fuzzer (fuzz/trace_fuzzer.cpp, docs/fuzzing.md) found the VM
// mishandling, traced as the fuzzer traces them: the code is replaced with CodeType.replace()
// and never executed. Each must give a graph break that says why, and nothing else (the
// sanitizer build runs these under ASan and UBSan).
#include <Python.h>

#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/vm/trace.h"
#include "python_fixture.h"

using dynvm::PyRef;

namespace {

// The VM's Python helpers (dynvm._tracing) from the source tree when no dynvm package was
// imported yet (the package's __init__ needs its extension module, which a build without
// the Python package does not make).
void ensure_tracing() {
  dynvm::test::ensure_python();
  static bool ready = [] {
    dynvm::test::run(
        "import sys, types\n"
        "if 'dynvm' not in sys.modules:\n"
        "    package = types.ModuleType('dynvm')\n"
        "    package.__path__ = ['" DYNVM_TEST_DATA_DIR
        "/../../runtime/python/dynvm']\n"
        "    sys.modules['dynvm'] = package\n"
        "import dynvm._tracing\n");
    return true;
  }();
  (void)ready;
}

// Traces ns[name] called with the values of `arguments` (expressions in ns).
dynvm::vm::Trace trace(const PyRef& ns, const std::string& name,
                       const std::vector<std::string>& arguments) {
  std::vector<PyRef> values;
  std::vector<PyObject*> raw;
  for (const std::string& a : arguments) {
    values.push_back(dynvm::test::eval(ns, a));
    raw.push_back(values.back().get());
  }
  PyRef function = dynvm::test::get(ns, name);
  dynvm::vm::Trace result = dynvm::vm::trace_function(function.get(), raw);
  CHECK_FALSE(dynvm::test::python_error_pending());
  return result;
}

}  // namespace

// The root frame's break annotation read the arrival count of the instruction past the last
// one (a heap-buffer-overflow), and trace_frame then looked that instruction up to trace
// again up to it.
TEST_CASE("trace: code that runs off its end breaks without a resume point") {
  ensure_tracing();
  PyRef ns = dynvm::test::run(
      "import opcode\n"
      "def f(a):\n"
      "    return a\n"
      "f.__code__ = f.__code__.replace(co_code=bytes(\n"
      "    [opcode.opmap['RESUME'], 0, opcode.opmap['NOP'], 0, opcode.opmap['LOAD_FAST'], 0]))\n");
  dynvm::vm::Trace t = trace(ns, "f", {"1"});
  REQUIRE(t.graph_break);
  CHECK(t.graph_break->reason == "internal: execution ran off the end of the code");
  CHECK_FALSE(t.resume);
}

// A localsplus slot marked both local and free (marshal data can say so): CPython counts it as
// a local, so a function of the code has an empty closure, while the decoder listed it among
// the free variables and the tracer read the closure's cell past the end of the tuple. The
// decoder refuses such code now.
TEST_CASE("trace: a slot both local and free is refused, not looked up in the closure") {
  ensure_tracing();
  PyRef ns = dynvm::test::run(
      "import marshal, types\n"
      "def f(a, b):\n"
      "    return a\n"
      "data = marshal.dumps(f.__code__)\n"
      "kinds = b'\\x02\\x00\\x00\\x00\\x20\\x20'  # co_localspluskinds: two plain locals\n"
      "assert data.count(kinds) == 1\n"
      "at = data.index(kinds) + 5\n"
      "code = marshal.loads(data[:at] + b'\\xa0' + data[at + 1:])  # b: local and free\n"
      "assert code.co_freevars == ()\n"
      "g = types.FunctionType(code, globals(), None, None, ())\n");
  dynvm::vm::Trace t = trace(ns, "g", {"1", "2"});
  REQUIRE(t.graph_break);
  INFO(t.graph_break->reason);
  CHECK(t.graph_break->reason.find("localsplus slot 1 ('b') is a free variable and also a local") !=
        std::string::npos);
}

// A value nested thousands of levels deep, made by valid Python and kept past the graph: the
// recipe that rebuilds it was built recursively, one level at a time, until the stack
// overflowed. A trace gives up (a graph break) on values nested deeper than the recipes go.
TEST_CASE("trace: a deeply nested result breaks instead of overflowing the stack") {
  ensure_tracing();
  PyRef ns = dynvm::test::run(
      "class Node:\n"
      "    def __init__(self, nxt):\n"
      "        self.nxt = nxt\n"
      "def nodes(n):\n"
      "    node = None\n"
      "    for i in range(n):\n"
      "        node = Node(node)\n"
      "    return node\n"
      "def lists(n):\n"
      "    x = []\n"
      "    for i in range(n):\n"
      "        x = [x]\n"
      "    return x\n");
  for (const char* name : {"nodes", "lists"}) {
    dynvm::vm::Trace t = trace(ns, name, {"20000"});
    INFO(name);
    REQUIRE(t.graph_break);
    INFO(t.graph_break->reason);
    CHECK(t.graph_break->reason.find("nested deeper than") != std::string::npos);
  }
  // Shallow nesting is rebuilt as before.
  dynvm::vm::Trace shallow = trace(ns, "nodes", {"20"});
  CHECK_FALSE(shallow.graph_break);
}

// BUILD_CONST_KEY_MAP took its keys from whatever it popped: with fewer values than keys (or a
// key "tuple" that is not one) the dict's keys and values disagreed, and the recipe of the
// returned dict read values past the end of the list.
TEST_CASE("trace: BUILD_CONST_KEY_MAP with as many keys as values only") {
  ensure_tracing();
  PyRef ns = dynvm::test::run(
      "import opcode\n"
      "def f(a):\n"
      "    return {'a': a, 'b': 2}\n"
      "code = bytearray(f.__code__.co_code)\n"
      "at = code.index(opcode.opmap['BUILD_CONST_KEY_MAP'])\n"
      "assert code[at + 1] == 2\n"
      "code[at + 1] = 0  # two keys, no values\n"
      "f.__code__ = f.__code__.replace(co_code=bytes(code))\n"
      "def g(a):\n"
      "    return {'a': a, 'b': a}\n"
      "code = bytearray(g.__code__.co_code)\n"
      "at = code.index(opcode.opmap['BUILD_CONST_KEY_MAP'])\n"
      "code[at - 2] = opcode.opmap['LOAD_FAST']  # keys from a local instead of a constant\n"
      "code[at - 1] = 0\n"
      "g.__code__ = g.__code__.replace(co_code=bytes(code))\n");
  for (const char* name : {"f", "g"}) {
    dynvm::vm::Trace t = trace(ns, name, {"1"});
    INFO(name);
    REQUIRE(t.graph_break);
    CHECK(t.graph_break->reason.rfind("BUILD_CONST_KEY_MAP without a tuple of ", 0) == 0);
  }
}

// The keyword names of a call (KW_NAMES' constant) were trusted to be a tuple of str no
// longer than the call's arguments: with more names than arguments the first keyword's
// index wrapped around and the call read far outside the argument list.
TEST_CASE("trace: keyword names that do not fit the call are refused") {
  ensure_tracing();
  PyRef ns = dynvm::test::run(
      "import opcode\n"
      "def callee(**kw):\n"
      "    return kw\n"
      "def f(a):\n"
      "    return callee(z=a)\n"
      "def with_call_arg(fn, n, consts=None):\n"
      "    code = bytearray(fn.__code__.co_code)\n"
      "    at = code.index(opcode.opmap['CALL'])\n"
      "    code[at + 1] = n\n"
      "    changes = {'co_code': bytes(code)}\n"
      "    if consts is not None:\n"
      "        changes['co_consts'] = consts\n"
      "    fn.__code__ = fn.__code__.replace(**changes)\n"
      "    return fn\n"
      "import copy, types\n"
      "def clone(fn):\n"
      "    return types.FunctionType(fn.__code__, fn.__globals__)\n"
      "too_many = with_call_arg(clone(f), 0)  # one keyword name, no arguments\n"
      "kw_index = f.__code__.co_consts.index(('z',))\n"
      "consts = list(f.__code__.co_consts)\n"
      "consts[kw_index] = 'z'\n"
      "not_tuple = with_call_arg(clone(f), 1, tuple(consts))\n"
      "consts[kw_index] = (1,)\n"
      "not_str = with_call_arg(clone(f), 1, tuple(consts))\n");
  for (const char* name : {"too_many", "not_tuple", "not_str"}) {
    dynvm::vm::Trace t = trace(ns, name, {"1"});
    INFO(name);
    REQUIRE(t.graph_break);
    INFO(t.graph_break->reason);
    CHECK(t.graph_break->reason.rfind("KW_NAMES: ", 0) == 0);
  }
}

// WITH_EXCEPT_START and MATCH_KEYS read below the top of the stack with vector::at: on a
// short stack (code the compiler would not make) the out_of_range escaped the tracer and
// ended the process. They read through peek() now, which breaks the graph instead.
TEST_CASE("trace: instructions reading deep in a short stack break instead of throwing") {
  ensure_tracing();
  for (const char* op : {"WITH_EXCEPT_START", "MATCH_KEYS"}) {
    PyRef ns = dynvm::test::run(
        std::string("import opcode\n"
                    "def f(a):\n"
                    "    return a\n"
                    "f.__code__ = f.__code__.replace(co_code=bytes(\n"
                    "    [opcode.opmap['RESUME'], 0, opcode.opmap['LOAD_FAST'], 0,\n"
                    "     opcode.opmap['") +
        op + "'], 0, opcode.opmap['RETURN_VALUE'], 0]))\n");
    dynvm::vm::Trace t = trace(ns, "f", {"ValueError('x')"});
    INFO(op);
    REQUIRE(t.graph_break);
    CHECK(t.graph_break->reason == "internal: value stack underflow");
  }
}
