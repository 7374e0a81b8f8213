// Guards: the assumptions a trace made, as data. Each kind is listed once with its payload;
// GuardSet holds a variant's guards in order, without duplicates, and prints them one a line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dynvm/support/expected.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guarded_object.h"
#include "dynvm/vm/source.h"
#include "dynvm/vm/source_resolver.h"
#include "dynvm/vm/tensor_spec.h"
#include "dynvm/vm/torch_state.h"

namespace dynvm::vm {

// Payloads. Every PyRef is owned by the guard; objects compare by identity unless noted.
// Objects and types compared by identity are held weakly where they can be (GuardedObject):
// a variant must not keep its own code object alive through the functions, modules and
// classes it guards on.

struct TypeMatchPayload {  // type(src) is type
  GuardedObject type;
};
struct IdMatchPayload {  // src is object (modules, functions, classes, None/True/False, ...)
  GuardedObject object;
};
// type(src) is type(value) and src == value, compared in C per exact type (floats also compare
// the sign of zero; a NaN matches nothing).
struct ConstantMatchPayload {
  PyRef value;  // None, bool, int, float, str, bytes, complex or tuples of those
};
struct TensorMatchPayload {
  TensorSpec spec;
};
struct LenMatchPayload {  // type(src) is type and len(src) == length
  GuardedObject type;
  Py_ssize_t length = 0;
};
struct DictKeysPayload {  // type(src) is type and list(src) == list(keys), in order
  GuardedObject type;
  PyRef keys;  // a tuple of constants
  // The dict last found to match (compared, never dereferenced) and its version tag then:
  // while a dict has that tag it is that dict, unmodified, and matches again.
  mutable PyObject* matched = nullptr;
  mutable uint64_t matched_version = 0;
};
// src is a dict whose version tag (PEP 509) is still `version`. Tags come from one counter
// for the whole interpreter, so an equal tag also means the same dict object: no reference to
// the dict (or an ID_MATCH on its owner) is needed.
struct DictVersionPayload {
  uint64_t version = 0;
};
// One hook dict an nn.Module instance may carry in its __dict__ ("_forward_hooks", ...).
struct HookDict {
  PyRef name;  // interned str
  PyRef dict;  // the dict bound to `name` when traced; empty when the module had none
};
// The module src has no hooks. `dict_version` and the hook dicts are those of the last
// check that read them (the trace's at first): while src.__dict__ keeps that version, the
// hook dicts bound there are these, and only their sizes need reading.
struct NoHooksPayload {
  mutable uint64_t dict_version = 0;  // version of src.__dict__ when `hooks` were read
  mutable std::vector<HookDict> hooks;
};
// The plain attributes of a module that are constants (stride, eps, training, ...): each,
// read as getattr reads it, is still the recorded value (None, True and False by identity,
// other constants as CONSTANT_MATCH compares them). While type(src) is `type` unmodified (its
// version tag is `type_version`) and src.__dict__ still has `dict_version`, every attribute is
// the object it was, so the check is two compares; otherwise each attribute is read again, and
// the versions of that successful read replace the recorded ones.
struct ModuleAttr {
  PyRef name;   // interned str
  PyRef value;  // a guardable constant
  bool by_identity = false;
};
struct ModuleAttrsPayload {
  GuardedObject type;
  mutable unsigned int type_version = 0;  // 0: the fast path is off
  mutable uint64_t dict_version = 0;
  std::vector<ModuleAttr> attrs;
};
// src is the very object the source in slot `first` of the set's SourceTable gives: one tensor
// reached through two sources, which the graph reads as one input.
struct DuplicateInputPayload {
  int first = -1;
};
struct NoGlobalHooksPayload {  // torch.nn.modules.module's global hook dicts are empty
  std::vector<PyRef> dicts;    // torch fills them in place and never rebinds them
  std::vector<std::string> names;
};
struct GradModePayload {
  bool enabled = true;
};
struct DefaultDtypePayload {
  int8_t dtype = 0;  // a c10::ScalarType
};
struct AutocastPayload {
  AutocastState state;
};
// warnings' filters, which decide what a deferred `warnings.warn` does (vm/warning_calls.cpp):
// `warnings.filters` holds entries equal to these, in this order (a copy bound by
// catch_warnings holds the same entries), and `warnings.defaultaction` is this action.
struct WarningFiltersPayload {
  PyRef module;          // the warnings module
  PyRef filters;         // a tuple of the entries
  PyRef default_action;  // a str
};
// Dynamic shapes: the relations between size symbols the trace's branches assumed, checked
// over the values the TENSOR_MATCH guards before it bound (bound_symbols()).
struct ShapeRelationsPayload {
  std::vector<graph::SymRelation> relations;
  std::vector<std::string> symbol_sources;  // per symbol, where it is read (for messages)
};

// X(Kind, NAME as printed, payload type). Kinds after ModuleAttrs read global state, no source.
#define DYNVM_GUARD_KINDS(X)                                  \
  X(TypeMatch, "TYPE_MATCH", TypeMatchPayload)                \
  X(IdMatch, "ID_MATCH", IdMatchPayload)                      \
  X(ConstantMatch, "CONSTANT_MATCH", ConstantMatchPayload)    \
  X(TensorMatch, "TENSOR_MATCH", TensorMatchPayload)          \
  X(LenMatch, "LEN_MATCH", LenMatchPayload)                   \
  X(DictKeys, "DICT_KEYS", DictKeysPayload)                   \
  X(DictVersion, "DICT_VERSION", DictVersionPayload)          \
  X(NoHooks, "NO_HOOKS", NoHooksPayload)                      \
  X(DuplicateInput, "DUPLICATE_INPUT", DuplicateInputPayload) \
  X(ModuleAttrs, "MODULE_ATTRS", ModuleAttrsPayload)          \
  X(NoGlobalHooks, "NO_GLOBAL_HOOKS", NoGlobalHooksPayload)   \
  X(GradMode, "GRAD_MODE", GradModePayload)                   \
  X(DefaultDtype, "DEFAULT_DTYPE", DefaultDtypePayload)       \
  X(Autocast, "AUTOCAST", AutocastPayload)                    \
  X(ShapeRelations, "SHAPE_RELATIONS", ShapeRelationsPayload) \
  X(WarningFilters, "WARNING_FILTERS", WarningFiltersPayload)

enum class GuardKind : uint8_t {
#define DYNVM_GUARD_KIND_ENUM(kind, name, payload) kind,
  DYNVM_GUARD_KINDS(DYNVM_GUARD_KIND_ENUM)
#undef DYNVM_GUARD_KIND_ENUM
};

// A guard's payload, one alternative per kind (std::monostate: a default-constructed Guard).
#define DYNVM_GUARD_PAYLOAD_TYPE(kind, name, payload) , payload
using GuardPayload = std::variant<std::monostate DYNVM_GUARD_KINDS(DYNVM_GUARD_PAYLOAD_TYPE)>;
#undef DYNVM_GUARD_PAYLOAD_TYPE

// "TENSOR_MATCH".
const char* guard_kind_name(GuardKind kind);

// The hook dicts an nn.Module instance may carry, and torch's global module hook dicts (in
// torch.nn.modules.module), across the torch versions dynvm supports: what NO_HOOKS and
// NO_GLOBAL_HOOKS read (a torch without some of them skips those).
const std::vector<std::string>& module_hook_names();
const std::vector<std::string>& global_module_hook_names();

struct Guard {
  GuardKind kind = GuardKind::TypeMatch;
  int source = -1;  // slot in the set's SourceTable; -1 for global-state kinds
  GuardPayload payload;
  std::string text;  // one line, fixed when the guard is added, e.g. "ID_MATCH G['torch']"

  // The payload as the kind's type; the kind must match.
  template <typename Payload>
  const Payload& as() const {
    return *std::get_if<Payload>(&payload);
  }
};

// A compiled variant's guards, in insertion order. Adding a guard equal to one already there
// (same kind, source and payload) returns the existing guard's index. Built by the VM at trace
// time; the add_* helpers need the GIL and borrow the objects they are given; their Errors
// describe the value (the caller names the source). The set holds Python references: destroy
// it with the GIL held.
class GuardSet {
 public:
  GuardSet() = default;
  GuardSet(GuardSet&&) noexcept = default;
  GuardSet& operator=(GuardSet&&) noexcept = default;
  GuardSet(const GuardSet&) = delete;
  GuardSet& operator=(const GuardSet&) = delete;
  ~GuardSet() = default;

  // type(src) is type(value).
  Expected<size_t> add_type_match(const SourcePtr& source, PyObject* value);
  // src is value.
  Expected<size_t> add_id_match(const SourcePtr& source, PyObject* value);
  // type(src) is type(value) and src == value; an Error unless value is a guardable constant.
  Expected<size_t> add_constant_match(const SourcePtr& source, PyObject* value);
  // src is a tensor like `tensor` (tensor_spec_of; its Error when unsupported).
  Expected<size_t> add_tensor_match(const SourcePtr& source, PyObject* tensor);
  // type(src) is type(value) and len(src) == len(value).
  Expected<size_t> add_len_match(const SourcePtr& source, PyObject* value);
  // type(src) is type(dict) and src's keys are dict's, in order; dict's keys must be constants.
  Expected<size_t> add_dict_keys(const SourcePtr& source, PyObject* dict);
  // src (an exact dict) is unchanged since now.
  Expected<size_t> add_dict_version(const SourcePtr& source, PyObject* dict);
  // module_source.__dict__ is unchanged since now (attributes set, deleted or rebound).
  Expected<size_t> add_module_dict_version(const SourcePtr& module_source, PyObject* module);
  // The module has no forward/backward hooks, nor has torch any global module hook; an Error
  // when it has some now. Adds NO_GLOBAL_HOOKS once per set.
  Expected<size_t> add_no_hooks(const SourcePtr& module_source, PyObject* module);
  // Every attribute in the module's __dict__ whose value is None, a bool or a guardable
  // constant keeps that value (ModuleAttrsPayload): what a module whose code is not traced
  // (a built-in leaf module) may read. An Error when the module has no __dict__ or a custom
  // __getattribute__.
  Expected<size_t> add_module_attrs(const SourcePtr& module_source, PyObject* module);
  // src is the object `first` gives (both read as one graph input); an Error when `first`
  // cannot be read as a source.
  Expected<size_t> add_duplicate_input(const SourcePtr& source, const SourcePtr& first);
  // torch's global hook dicts for every module are empty (an Error when they are not now).
  Expected<size_t> add_no_global_hooks();
  // torch.is_grad_enabled() == enabled.
  size_t add_grad_mode(bool enabled);
  // torch.get_default_dtype() is what it is now.
  size_t add_default_dtype();
  // Autocast is on or off, per device type, as it is now.
  size_t add_autocast();
  // Dynamic shapes: the TENSOR_MATCH guard on `source` checks these sizes and strides
  // symbolically (TensorSpec::symbolic) instead of exactly; an Error when the source has no
  // TENSOR_MATCH guard.
  Expected<size_t> make_tensor_symbolic(const SourcePtr& source, std::vector<SymDim> dims);
  // warnings' filters and default action are what they are now (an Error when the warnings
  // module has not been imported or holds something else there).
  Expected<size_t> add_warning_filters();
  // The relations between symbols a trace's branches assumed.
  size_t add_shape_relations(ShapeRelationsPayload payload);

  // Adds every guard of `other` (sources interned here; DUPLICATE_INPUT, which names a graph
  // input of `other`'s trace, is left out). An Error when a source cannot be read.
  Expected<size_t> merge(const GuardSet& other);

  const std::vector<Guard>& guards() const { return guards_; }
  const Guard& operator[](size_t index) const { return guards_[index]; }
  size_t size() const { return guards_.size(); }
  bool empty() const { return guards_.empty(); }
  const SourceTable& sources() const { return sources_; }

  // One line per guard, in order.
  std::vector<std::string> lines() const;
  // lines() joined with '\n' (and ending with one when not empty).
  std::string to_string() const;

 private:
  Expected<size_t> add(GuardKind kind, const SourcePtr& source, GuardPayload payload,
                       const std::string& detail);

  std::vector<Guard> guards_;
  SourceTable sources_;
  // (kind, source slot) -> indices of the guards with them, for deduplication.
  std::map<std::pair<int, int>, std::vector<size_t>> index_;
};

}  // namespace dynvm::vm
