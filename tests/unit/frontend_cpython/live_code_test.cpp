// The live-code adapter in an embedded interpreter: live code objects give the same
// RawCode as their marshal bytes, and Constant::repr() agrees with CPython's repr() on
// every code point, on random floats, ints and bytes, and on real modules' constants.
#include <Python.h>
#include <marshal.h>

#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/live_code.h"
#include "dynvm/frontend/marshal_reader.h"
#include "frontend/raw_code_text.h"

using dynvm::frontend::BigInt;
using dynvm::frontend::Constant;
using dynvm::frontend::ConstantPtr;
using dynvm::frontend::MarshalReadOptions;
using dynvm::frontend::PythonVersion;
using dynvm::frontend::raw_code_from_live;
using dynvm::frontend::RawCode;
using dynvm::frontend::RawCodePtr;
using dynvm::frontend::read_marshal_code;
using namespace dynvm::frontend::testing;

namespace {

// One interpreter for the whole binary, finalized at exit.
struct EmbeddedPython {
  EmbeddedPython() { Py_InitializeEx(0); }
  ~EmbeddedPython() { Py_FinalizeEx(); }
};

void ensure_python() { static EmbeddedPython python; }

// Owns one strong reference.
class Ref {
 public:
  explicit Ref(PyObject* owned) : object_(owned) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(object_); }
  PyObject* get() const { return object_; }

 private:
  PyObject* object_;
};

std::string python_error() {
  if (!PyErr_Occurred()) return "no Python error";
  PyErr_Print();
  return "Python error (printed above)";
}

std::string utf8(PyObject* str /* borrowed */) {
  Ref bytes(PyUnicode_AsEncodedString(str, "utf-8", "surrogatepass"));
  REQUIRE(bytes.get() != nullptr);
  return std::string(PyBytes_AS_STRING(bytes.get()),
                     static_cast<size_t>(PyBytes_GET_SIZE(bytes.get())));
}

std::string python_repr(PyObject* object /* borrowed */) {
  Ref text(PyObject_Repr(object));
  INFO(python_error());
  REQUIRE(text.get() != nullptr);
  return utf8(text.get());
}

// Evaluates a Python expression in a fresh namespace; new reference.
PyObject* eval(const std::string& expression) {
  Ref globals(PyDict_New());
  PyDict_SetItemString(globals.get(), "__builtins__", PyEval_GetBuiltins());
  PyObject* result = PyRun_String(expression.c_str(), Py_eval_input, globals.get(), globals.get());
  INFO(expression << ": " << (result ? "ok" : python_error()));
  REQUIRE(result != nullptr);
  return result;
}

PyObject* compile_module(const std::string& source, const std::string& filename) {
  PyObject* code = Py_CompileString(source.c_str(), filename.c_str(), Py_file_input);
  INFO(filename << ": " << (code ? "ok" : python_error()));
  REQUIRE(code != nullptr);
  return code;
}

RawCodePtr from_live(PyObject* code /* borrowed */) {
  auto raw = raw_code_from_live(reinterpret_cast<PyCodeObject*>(code));
  INFO((raw ? std::string("ok") : raw.error().message));
  REQUIRE(raw.ok());
  REQUIRE_FALSE(PyErr_Occurred());
  return *raw;
}

RawCodePtr from_marshal(PyObject* code /* borrowed */) {
  Ref bytes(PyMarshal_WriteObjectToString(code, Py_MARSHAL_VERSION));
  REQUIRE(bytes.get() != nullptr);
  MarshalReadOptions options;
  options.version = PythonVersion{PY_MAJOR_VERSION, PY_MINOR_VERSION};
  auto raw = read_marshal_code(std::string_view(PyBytes_AS_STRING(bytes.get()),
                                                static_cast<size_t>(PyBytes_GET_SIZE(bytes.get()))),
                               options);
  INFO((raw ? std::string("ok") : raw.error().message));
  REQUIRE(raw.ok());
  return *raw;
}

// Every field of two code object trees, constants compared by canonical repr.
void check_same_code(const RawCode& a, const RawCode& b) {
  INFO("code object " << a.qualname);
  CHECK(a.version == b.version);
  CHECK(a.argcount == b.argcount);
  CHECK(a.posonlyargcount == b.posonlyargcount);
  CHECK(a.kwonlyargcount == b.kwonlyargcount);
  CHECK(a.stacksize == b.stacksize);
  CHECK(a.flags == b.flags);
  CHECK(a.code == b.code);
  CHECK(a.names == b.names);
  CHECK(a.localsplusnames == b.localsplusnames);
  CHECK(a.localspluskinds == b.localspluskinds);
  CHECK(a.filename == b.filename);
  CHECK(a.name == b.name);
  CHECK(a.qualname == b.qualname);
  CHECK(a.firstlineno == b.firstlineno);
  CHECK(a.linetable == b.linetable);
  CHECK(a.exceptiontable == b.exceptiontable);
  REQUIRE(a.consts.size() == b.consts.size());
  for (size_t i = 0; i < a.consts.size(); ++i) {
    REQUIRE(a.consts[i]->kind == b.consts[i]->kind);
    CHECK(canonical_repr(*a.consts[i]) == canonical_repr(*b.consts[i]));
    if (a.consts[i]->kind == Constant::Kind::Code) {
      check_same_code(*a.consts[i]->code, *b.consts[i]->code);
    }
  }
}

std::string normalize_address(const std::string& repr) {
  static const std::regex address(" at 0x[0-9a-f]+,");
  return std::regex_replace(repr, address, " at 0x0,");
}

// Each live constant's repr against ours, recursively through nested code objects.
size_t check_constant_reprs(PyObject* live_code /* borrowed */, const RawCode& raw) {
  PyObject* consts = reinterpret_cast<PyCodeObject*>(live_code)->co_consts;  // borrowed
  REQUIRE(static_cast<size_t>(PyTuple_GET_SIZE(consts)) == raw.consts.size());
  size_t checked = 0;
  for (size_t i = 0; i < raw.consts.size(); ++i) {
    PyObject* live = PyTuple_GET_ITEM(consts, static_cast<Py_ssize_t>(i));  // borrowed
    CHECK(raw.consts[i]->repr() == normalize_address(python_repr(live)));
    ++checked;
    if (PyCode_Check(live)) checked += check_constant_reprs(live, *raw.consts[i]->code);
  }
  return checked;
}

const char* const kModules[] = {
    "argparse",
    "ast",
    "bisect",
    "calendar",
    "collections",
    "dataclasses",
    "datetime",
    "decimal",
    "email.message",
    "enum",
    "fractions",
    "functools",
    "inspect",
    "json.decoder",
    "pathlib",
    "string",
    "textwrap",
    "typing",
    "unittest.case",
    "zipfile",
    "_pydecimal",
    "tokenize",
    "asyncio.base_events",
};

std::string module_source(const std::string& module) {
  Ref path(eval("__import__('importlib.util').util.find_spec('" + module + "').origin"));
  Ref source(eval("open(" + python_repr(path.get()) + ", encoding='utf-8').read()"));
  return utf8(source.get());
}

ConstantPtr constant_of(PyObject* value /* borrowed */) {
  // A code object whose only constant is `value`, converted by the adapter.
  Ref code(compile_module("None", "<value>"));
  Ref replace(PyObject_GetAttrString(code.get(), "replace"));
  Ref consts(PyTuple_Pack(1, value));
  Ref kwargs(Py_BuildValue("{s:O}", "co_consts", consts.get()));
  Ref empty(PyTuple_New(0));
  Ref replaced(PyObject_Call(replace.get(), empty.get(), kwargs.get()));
  INFO(python_error());
  REQUIRE(replaced.get() != nullptr);
  return from_live(replaced.get())->consts.at(0);
}

}  // namespace

TEST_CASE("live code: standard library modules match their marshal bytes") {
  ensure_python();
  for (const char* module : kModules) {
    INFO(module);
    Ref code(compile_module(module_source(module), std::string(module) + ".py"));
    const RawCodePtr live = from_live(code.get());
    CHECK(live->version == PythonVersion{PY_MAJOR_VERSION, PY_MINOR_VERSION});
    check_same_code(*live, *from_marshal(code.get()));
  }
}

TEST_CASE("live code: functions that ran keep their unspecialized bytecode") {
  ensure_python();
  // Run a function enough for the specializing interpreter to quicken it.
  Ref function(
      eval("(lambda: (exec('def hot(xs):\\n  t = 0\\n  for x in xs: t += x.real\\n  "
           "return t', g := {}), [g['hot'](range(50)) for _ in range(200)], g['hot'])[2])()"));
  Ref code(PyObject_GetAttrString(function.get(), "__code__"));
  REQUIRE(code.get() != nullptr);
  check_same_code(*from_live(code.get()), *from_marshal(code.get()));
}

TEST_CASE("live code: constant reprs match CPython's on real modules") {
  ensure_python();
  size_t checked = 0;
  for (const char* module : kModules) {
    INFO(module);
    Ref code(compile_module(module_source(module), std::string(module) + ".py"));
    checked += check_constant_reprs(code.get(), *from_live(code.get()));
  }
  CHECK(checked > 5000);
}

TEST_CASE("live code: str repr matches CPython for every code point") {
  ensure_python();
  // dynvm escapes what Python 3.11 (Unicode 14) finds non-printable. A newer Python
  // knows characters assigned since and prints them raw; those differences are counted,
  // and any other difference fails.
  const bool same_unicode = PY_MAJOR_VERSION == 3 && PY_MINOR_VERSION == 11;
  size_t newly_assigned = 0;
  constexpr uint32_t kChunk = 512;
  for (uint32_t first = 0; first < 0x110000; first += kChunk) {
    std::vector<Py_UCS4> text;
    for (uint32_t cp = first; cp < first + kChunk; ++cp) text.push_back(cp);
    Ref str(PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, text.data(),
                                      static_cast<Py_ssize_t>(text.size())));
    REQUIRE(str.get() != nullptr);
    INFO("code points from " << first);
    const std::string expected = python_repr(str.get());
    if (same_unicode || str_constant(utf8(str.get()))->repr() == expected) {
      REQUIRE(str_constant(utf8(str.get()))->repr() == expected);
      continue;
    }
    for (const Py_UCS4 cp : text) {
      Ref one(PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, &cp, 1));
      const std::string ours = str_constant(utf8(one.get()))->repr();
      const std::string theirs = python_repr(one.get());
      if (ours == theirs) continue;
      INFO("code point " << cp << ": " << ours << " vs " << theirs);
      REQUIRE(ours.rfind("'\\", 0) == 0);  // we escape it ...
      REQUIRE(theirs.size() <= 6);         // ... Python prints the character
      ++newly_assigned;
    }
  }
  // Unicode 15 (Python 3.12) assigned 4489 characters.
  CHECK(newly_assigned <= 4489);
}

TEST_CASE("live code: float, complex, int and bytes reprs match CPython on random values") {
  ensure_python();
  std::mt19937_64 random(20240611);
  for (int i = 0; i < 100000; ++i) {
    // Random bit patterns cover every exponent; decimal-looking values the usual ones.
    double value = 0.0;
    const uint64_t bits = random();
    if (i % 2 == 0) {
      std::memcpy(&value, &bits, sizeof(value));
    } else {
      value = static_cast<double>(static_cast<int64_t>(bits % 2000001) - 1000000) /
              std::pow(10.0, static_cast<double>(bits % 23));
    }
    Ref number(PyFloat_FromDouble(value));
    Constant constant;
    constant.kind = Constant::Kind::Float;
    constant.float_value = value;
    INFO("bits " << bits);
    REQUIRE(constant.repr() == python_repr(number.get()));

    if (i % 10 == 0) {
      double imag = 0.0;
      const uint64_t imag_bits = random();
      std::memcpy(&imag, &imag_bits, sizeof(imag));
      if (i % 20 == 0) value = (i % 40 == 0) ? 0.0 : -0.0;
      Ref complex(PyComplex_FromDoubles(value, imag));
      Constant c;
      c.kind = Constant::Kind::Complex;
      c.complex_value = {value, imag};
      REQUIRE(c.repr() == python_repr(complex.get()));
    }
  }

  for (int i = 0; i < 2000; ++i) {
    std::vector<unsigned char> bytes(static_cast<size_t>(random() % 200) + 1);
    for (auto& b : bytes) b = static_cast<unsigned char>(random());
    Ref value(_PyLong_FromByteArray(bytes.data(), bytes.size(), 1, 1));
    REQUIRE(value.get() != nullptr);
    const ConstantPtr constant = constant_of(value.get());
    REQUIRE(constant->repr() == python_repr(value.get()));

    Ref as_bytes(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(bytes.data()),
                                           static_cast<Py_ssize_t>(bytes.size())));
    Constant b;
    b.kind = Constant::Kind::Bytes;
    b.bytes.assign(bytes.begin(), bytes.end());
    REQUIRE(b.repr() == python_repr(as_bytes.get()));
  }
}

TEST_CASE("live code: special and shared constants") {
  ensure_python();
  CHECK(constant_of(PyExc_StopIteration)->kind == Constant::Kind::StopIteration);
  Ref big(eval("-(2**200 + 12345)"));
  const ConstantPtr big_constant = constant_of(big.get());
  CHECK_FALSE(big_constant->int_value.fits_int64);
  CHECK(big_constant->repr() == python_repr(big.get()));
  Ref surrogate(eval("'\\ud83d\\ude00'"));
  CHECK(constant_of(surrogate.get())->bytes == "\xed\xa0\xbd\xed\xb8\x80");
  Ref nested(eval("frozenset({(1, 2.5, 'x'), b'y', None})"));
  CHECK(constant_of(nested.get())->repr() == python_repr(nested.get()));

  // The same object in two places becomes one shared Constant.
  Ref shared(eval("(lambda t: (t, t))((1, 2))"));
  const ConstantPtr pair = constant_of(shared.get());
  REQUIRE(pair->items.size() == 2);
  CHECK(pair->items[0] == pair->items[1]);
}

TEST_CASE("live code: constants of unexpected types are errors, not exceptions") {
  ensure_python();
  Ref code(eval("compile('None', '<bad>', 'exec').replace(co_consts=(1, [1, 2]))"));
  auto raw = raw_code_from_live(reinterpret_cast<PyCodeObject*>(code.get()));
  REQUIRE_FALSE(raw.ok());
  CHECK(raw.error().message == "constant of unsupported type 'list' (in code object <module>)");
  CHECK_FALSE(PyErr_Occurred());

  CHECK(raw_code_from_live(nullptr).error().message == "no code object (NULL)");
}

// Found by fuzz/trace_fuzzer.cpp: CPython's co_code getter writes CACHE entries past the end
// of its bytes object when the code ends inside an instruction's inline caches, which
// corrupted the heap (a crash in pymalloc a few inputs later). The adapter refuses such code
// before it reads co_code.
TEST_CASE("live code: code that ends inside inline caches is refused before co_code is read") {
  ensure_python();
  // RESUME 0, then LOAD_GLOBAL (3.11: 5 caches) or LOAD_ATTR (3.12: 9) without its caches.
  Ref truncated(
      eval("(lambda: None).__code__.replace(co_code=bytes([__import__('opcode').opmap['RESUME'], 0,"
           " __import__('opcode').opmap['LOAD_GLOBAL' if __import__('sys').version_info < (3, 12)"
           " else 'LOAD_ATTR'], 0]))"));
  auto raw = raw_code_from_live(reinterpret_cast<PyCodeObject*>(truncated.get()));
  REQUIRE_FALSE(raw.ok());
  const std::string& message = raw.error().message;
  INFO(message);
  CHECK(message.rfind("cannot read co_code: code ends inside the inline caches of LOAD_", 0) == 0);
  CHECK(message.find(" at offset 2 (in code object <lambda>)") != std::string::npos);
  CHECK_FALSE(PyErr_Occurred());

  // Nested in the constants of another code object, likewise.
  Ref outer(eval("compile('None', '<outer>', 'exec').replace(co_consts=(None,))"));
  Ref consts(PyTuple_Pack(2, Py_None, truncated.get()));
  Ref replace(PyObject_GetAttrString(outer.get(), "replace"));
  Ref no_args(PyTuple_New(0));
  Ref keywords(Py_BuildValue("{s:O}", "co_consts", consts.get()));
  Ref with_nested(PyObject_Call(replace.get(), no_args.get(), keywords.get()));
  REQUIRE(with_nested.get() != nullptr);
  auto nested = raw_code_from_live(reinterpret_cast<PyCodeObject*>(with_nested.get()));
  REQUIRE_FALSE(nested.ok());
  CHECK(nested.error().message.find("inline caches") != std::string::npos);

  // Whole instructions, caches and all, read as before (the code is never run).
  Ref whole(eval(
      "(lambda: None).__code__.replace(co_code=bytes([__import__('opcode').opmap['RESUME'], 0])"
      " + (lambda: len).__code__.co_code[2:])"));
  CHECK(raw_code_from_live(reinterpret_cast<PyCodeObject*>(whole.get())).ok());
  CHECK_FALSE(PyErr_Occurred());
}
