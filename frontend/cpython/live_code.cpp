// The live-code adapter: reads a PyCodeObject's fields and constants into RawCode.
#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dynvm/frontend/live_code.h"
#include "dynvm/frontend/opcode.h"

namespace dynvm::frontend {
namespace {

// Nesting of constants (tuples, frozensets, code objects) accepted, as for marshal data.
constexpr int kMaxDepth = 2000;

// Owns one strong reference; for the new references the C API returns.
class PyRef {
 public:
  explicit PyRef(PyObject* owned) : object_(owned) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() { Py_XDECREF(object_); }
  PyObject* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject* object_;
};

// Turns the pending Python exception into an Error and clears it, so that nothing
// leaves this adapter as a Python exception.
Error take_python_error(const std::string& context) {
  std::string detail = "unknown error";
#if PY_VERSION_HEX >= 0x030C0000
  PyRef exception(PyErr_GetRaisedException());
  PyObject* value = exception.get();
#else
  PyObject* type = nullptr;
  PyObject* raw_value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &raw_value, &traceback);  // new references, or NULL
  PyRef type_ref(type);
  PyRef value_ref(raw_value);
  PyRef traceback_ref(traceback);
  PyObject* value = raw_value;
#endif
  if (value != nullptr) {
    PyRef text(PyObject_Str(value));
    const char* utf8 = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
    if (utf8 != nullptr) detail = utf8;
  }
  PyErr_Clear();  // from PyObject_Str/PyUnicode_AsUTF8 failing, if they did
  return make_error(context + ": " + detail);
}

// A str as UTF-8; lone surrogates are encoded as marshal encodes them ("surrogatepass").
Expected<std::string> utf8_of(PyObject* str /* borrowed */, const std::string& what) {
  PyRef bytes(PyUnicode_AsEncodedString(str, "utf-8", "surrogatepass"));
  if (!bytes) return take_python_error("cannot encode " + what);
  return std::string(PyBytes_AS_STRING(bytes.get()),
                     static_cast<size_t>(PyBytes_GET_SIZE(bytes.get())));
}

Expected<std::string> bytes_field(PyObject* bytes /* borrowed */, const char* field) {
  if (bytes == nullptr || !PyBytes_Check(bytes)) {
    return make_error(std::string("code object field ") + field + " is not bytes");
  }
  return std::string(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
}

Expected<std::string> str_field(PyObject* str /* borrowed */, const char* field) {
  if (str == nullptr || !PyUnicode_Check(str)) {
    return make_error(std::string("code object field ") + field + " is not str");
  }
  return utf8_of(str, field);
}

Expected<std::vector<std::string>> names_field(PyObject* tuple /* borrowed */, const char* field) {
  if (tuple == nullptr || !PyTuple_Check(tuple)) {
    return make_error(std::string("code object field ") + field + " is not a tuple");
  }
  std::vector<std::string> names;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    Expected<std::string> name = str_field(PyTuple_GET_ITEM(tuple, i), field);  // borrowed
    if (!name) return name.error();
    names.push_back(std::move(*name));
  }
  return names;
}

// An int's magnitude in base-2**15 digits through int.to_bytes(), which every
// supported version has, rather than the private digit layout.
Expected<BigInt> big_int_of(PyObject* value /* borrowed */) {
  PyRef magnitude(PyNumber_Absolute(value));
  if (!magnitude) return take_python_error("cannot convert an int constant");
  PyRef bit_length(PyObject_CallMethod(magnitude.get(), "bit_length", nullptr));
  const size_t bits = bit_length ? PyLong_AsSize_t(bit_length.get()) : static_cast<size_t>(-1);
  if (bits == static_cast<size_t>(-1)) return take_python_error("cannot convert an int constant");
  const size_t nbytes = bits / 8 + 1;
  PyRef bytes(PyObject_CallMethod(magnitude.get(), "to_bytes", "ns",
                                  static_cast<Py_ssize_t>(nbytes), "little"));
  if (!bytes || !PyBytes_Check(bytes.get())) {
    return take_python_error("cannot convert an int constant");
  }
  const auto* data = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(bytes.get()));
  std::vector<uint16_t> digits;
  uint32_t accumulator = 0;
  int filled = 0;
  for (size_t i = 0; i < nbytes; ++i) {
    accumulator |= static_cast<uint32_t>(data[i]) << filled;
    filled += 8;
    while (filled >= 15) {
      digits.push_back(static_cast<uint16_t>(accumulator & 0x7FFF));
      accumulator >>= 15;
      filled -= 15;
    }
  }
  if (filled > 0) digits.push_back(static_cast<uint16_t>(accumulator & 0x7FFF));
  const int sign = PyObject_RichCompareBool(value, magnitude.get(), Py_NE);
  if (sign < 0) return take_python_error("cannot convert an int constant");
  return BigInt::from_digits15(sign == 1, std::move(digits));
}

// CPython's co_code getter (PyCode_GetCode) turns each instruction's inline caches into
// CACHE entries without checking that they fit: when the code ends before the last
// instruction's caches do (CPython's compiler never writes that, but CodeType() and
// CodeType.replace() accept any bytes), it writes past the end of the bytes object it
// makes. So the adaptive instructions are walked here first, as that getter walks them
// (specialised and instrumented opcodes count the caches of their base instruction).
std::optional<Error> check_inline_caches(PyCodeObject* co /* borrowed */) {
  const OpcodeTable& table = opcode_table(PythonVersion{PY_MAJOR_VERSION, PY_MINOR_VERSION});
  const auto* units = reinterpret_cast<const uint8_t*>(co->co_code_adaptive);
  const Py_ssize_t count = Py_SIZE(co);  // code units of two bytes, the opcode first
  for (Py_ssize_t i = 0; i < count;) {
    uint8_t opcode = units[2 * i];
#if PY_VERSION_HEX >= 0x030C0000
    // Instrumented lines and instructions keep the opcode they replace in the code's
    // monitoring data.
    const _PyCoMonitoringData* monitoring = co->_co_monitoring;
    if (table[opcode].base == Opcode::INSTRUMENTED_LINE) {
      if (monitoring == nullptr || monitoring->lines == nullptr) {
        return make_error("INSTRUMENTED_LINE without monitoring data at offset " +
                          std::to_string(2 * i));
      }
      opcode = monitoring->lines[i].original_opcode;
    }
    if (table[opcode].base == Opcode::INSTRUMENTED_INSTRUCTION) {
      if (monitoring == nullptr || monitoring->per_instruction_opcodes == nullptr) {
        return make_error("INSTRUMENTED_INSTRUCTION without monitoring data at offset " +
                          std::to_string(2 * i));
      }
      opcode = monitoring->per_instruction_opcodes[i];
    }
#endif
    const OpcodeInfo& info = table[opcode];
    const Py_ssize_t size = 1 + (info.valid ? info.cache_entries : 0);
    if (i + size > count) {
      return make_error("code ends inside the inline caches of " + std::string(info.name) +
                        " at offset " + std::to_string(2 * i));
    }
    i += size;
  }
  return std::nullopt;
}

class LiveCodeConverter {
 public:
  Expected<RawCodePtr> convert_code(PyCodeObject* co /* borrowed */, int depth) {
    auto code = std::make_shared<RawCode>();
    code->version = PythonVersion{PY_MAJOR_VERSION, PY_MINOR_VERSION};
    code->argcount = co->co_argcount;
    code->posonlyargcount = co->co_posonlyargcount;
    code->kwonlyargcount = co->co_kwonlyargcount;
    code->stacksize = co->co_stacksize;
    code->flags = static_cast<uint32_t>(co->co_flags);
    code->firstlineno = co->co_firstlineno;

    Expected<std::string> qualname = str_field(co->co_qualname, "co_qualname");
    if (!qualname) return qualname.error();
    code->qualname = std::move(*qualname);
    const std::string where = " (in code object " + code->qualname + ")";

    // The deoptimized copy: specialized instructions back to their base forms.
    if (std::optional<Error> truncated = check_inline_caches(co)) {
      return make_error("cannot read co_code: " + truncated->message + where);
    }
    PyRef co_code(PyCode_GetCode(co));
    if (!co_code) return take_python_error("cannot read co_code" + where);
    Expected<std::string> bytecode = bytes_field(co_code.get(), "co_code");
    Expected<std::vector<std::string>> names = names_field(co->co_names, "co_names");
    Expected<std::vector<std::string>> localsplus =
        names_field(co->co_localsplusnames, "co_localsplusnames");
    Expected<std::string> kinds = bytes_field(co->co_localspluskinds, "co_localspluskinds");
    Expected<std::string> filename = str_field(co->co_filename, "co_filename");
    Expected<std::string> name = str_field(co->co_name, "co_name");
    Expected<std::string> linetable = bytes_field(co->co_linetable, "co_linetable");
    Expected<std::string> exceptiontable = bytes_field(co->co_exceptiontable, "co_exceptiontable");
    for (const Error* error :
         {bytecode ? nullptr : &bytecode.error(), names ? nullptr : &names.error(),
          localsplus ? nullptr : &localsplus.error(), kinds ? nullptr : &kinds.error(),
          filename ? nullptr : &filename.error(), name ? nullptr : &name.error(),
          linetable ? nullptr : &linetable.error(),
          exceptiontable ? nullptr : &exceptiontable.error()}) {
      if (error != nullptr) return make_error(error->message + where);
    }
    code->code = std::move(*bytecode);
    code->names = std::move(*names);
    code->localsplusnames = std::move(*localsplus);
    code->localspluskinds.assign(kinds->begin(), kinds->end());
    code->filename = std::move(*filename);
    code->name = std::move(*name);
    code->linetable = std::move(*linetable);
    code->exceptiontable = std::move(*exceptiontable);

    PyObject* consts = co->co_consts;  // borrowed
    if (consts == nullptr || !PyTuple_Check(consts)) {
      return make_error("code object field co_consts is not a tuple" + where);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); ++i) {
      Expected<ConstantPtr> constant = convert_constant(PyTuple_GET_ITEM(consts, i), depth + 1);
      if (!constant) return make_error(constant.error().message + where);
      code->consts.push_back(std::move(*constant));
    }
    return RawCodePtr(std::move(code));
  }

 private:
  Expected<ConstantPtr> convert_constant(PyObject* object /* borrowed */, int depth) {
    if (depth > kMaxDepth) {
      return make_error("constants nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    // Objects the constants share stay shared, as marshal back-references keep them.
    const auto memo = converted_.find(object);
    if (memo != converted_.end()) return memo->second;
    Expected<ConstantPtr> constant = convert_new_constant(object, depth);
    if (constant) converted_.emplace(object, *constant);
    return constant;
  }

  Expected<ConstantPtr> convert_new_constant(PyObject* object /* borrowed */, int depth) {
    auto constant = std::make_shared<Constant>();
    using Kind = Constant::Kind;
    if (object == Py_None) {
      constant->kind = Kind::None;
    } else if (object == Py_Ellipsis) {
      constant->kind = Kind::Ellipsis;
    } else if (object == PyExc_StopIteration) {
      constant->kind = Kind::StopIteration;
    } else if (object == Py_True || object == Py_False) {
      constant->kind = Kind::Bool;
      constant->bool_value = object == Py_True;
    } else if (PyLong_CheckExact(object)) {
      constant->kind = Kind::Int;
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
      if (value == -1 && PyErr_Occurred()) return take_python_error("cannot read an int constant");
      if (overflow == 0) {
        constant->int_value = BigInt::from_int64(value);
      } else {
        Expected<BigInt> big = big_int_of(object);
        if (!big) return big.error();
        constant->int_value = std::move(*big);
      }
    } else if (PyFloat_CheckExact(object)) {
      constant->kind = Kind::Float;
      constant->float_value = PyFloat_AS_DOUBLE(object);
    } else if (PyComplex_CheckExact(object)) {
      constant->kind = Kind::Complex;
      constant->complex_value = {PyComplex_RealAsDouble(object), PyComplex_ImagAsDouble(object)};
    } else if (PyUnicode_CheckExact(object)) {
      constant->kind = Kind::Str;
      Expected<std::string> text = utf8_of(object, "a str constant");
      if (!text) return text.error();
      constant->bytes = std::move(*text);
    } else if (PyBytes_CheckExact(object)) {
      constant->kind = Kind::Bytes;
      constant->bytes.assign(PyBytes_AS_STRING(object),
                             static_cast<size_t>(PyBytes_GET_SIZE(object)));
    } else if (PyTuple_CheckExact(object)) {
      constant->kind = Kind::Tuple;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(object); ++i) {
        Expected<ConstantPtr> item = convert_constant(PyTuple_GET_ITEM(object, i), depth + 1);
        if (!item) return item.error();
        constant->items.push_back(std::move(*item));
      }
    } else if (PyFrozenSet_CheckExact(object)) {
      constant->kind = Kind::FrozenSet;
      PyRef iterator(PyObject_GetIter(object));
      if (!iterator) return take_python_error("cannot iterate a frozenset constant");
      while (true) {
        PyRef item(PyIter_Next(iterator.get()));
        if (!item) break;
        // The set keeps `item` alive after this reference goes, so memoizing its address
        // stays valid.
        Expected<ConstantPtr> converted = convert_constant(item.get(), depth + 1);
        if (!converted) return converted.error();
        constant->items.push_back(std::move(*converted));
      }
      if (PyErr_Occurred()) return take_python_error("cannot iterate a frozenset constant");
    } else if (PyCode_Check(object)) {
      constant->kind = Kind::Code;
      Expected<RawCodePtr> code = convert_code(reinterpret_cast<PyCodeObject*>(object), depth + 1);
      if (!code) return code.error();
      constant->code = std::move(*code);
    } else {
      return make_error(std::string("constant of unsupported type '") + Py_TYPE(object)->tp_name +
                        "'");
    }
    return ConstantPtr(std::move(constant));
  }

  // Keyed by address only to find repeats; never iterated, so output stays deterministic.
  std::unordered_map<PyObject*, ConstantPtr> converted_;
};

}  // namespace

Expected<RawCodePtr> raw_code_from_live(PyCodeObject* code) {
  if (code == nullptr) return make_error("no code object (NULL)");
  LiveCodeConverter converter;
  return converter.convert_code(code, 0);
}

}  // namespace dynvm::frontend
