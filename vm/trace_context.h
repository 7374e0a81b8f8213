// TraceContext: the state shared by every frame of one trace (the root frame and the
// frames it inlines), and Unsupported, the internal signal that the trace must stop.
// Private to vm/.
#pragma once

#include <Python.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dynvm/frontend/code_info.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/trace.h"
#include "dynvm/vm/traced_value.h"

namespace dynvm::vm {

class TorchBridge;
class InlineFrame;

// Thrown inside the VM when it meets something it cannot trace; caught by the tracer,
// which turns it into a graph break. Never leaves vm/.
struct Unsupported {
  std::string reason;
  std::string filename;  // filled by the frame that was executing
  int lineno = 0;
  // Filled by the traced frame itself (not an inlined one): the instruction it was
  // executing, and how many times execution had arrived there (loops come back).
  int root_instruction = -1;
  int root_arrival = 0;
  // The innermost instruction executing when the trace stopped (its base opcode, for the
  // opcode coverage counts), and whether the VM has no rule for that opcode at all.
  int opcode = -1;
  bool refused = false;
  // The Python exception the traced code raises here, when the trace proves it (a missing
  // attribute or key, a pure call that raised, a raise statement): a handler of an inlined
  // frame may catch it (InlineFrame::enter_handler); otherwise it is a graph break.
  PyRef exception;
};

[[noreturn]] void unsupported(std::string reason);

// Thrown where an attribute lookup proved, under the guards it added, that the object has no
// such attribute: getattr(obj, name, default) and hasattr() catch it; anywhere else it is a
// graph break like any Unsupported (eager then raises the AttributeError).
struct AttributeMissing : Unsupported {};

[[noreturn]] void attribute_missing(const std::string& type_name, const std::string& name);

// Likewise for a key a dict whose keys the trace knows (made by it, or DICT_KEYS-guarded)
// does not hold: Mapping's `in` and get() catch it.
struct KeyMissing : Unsupported {};

[[noreturn]] void key_missing(PyObject* key);  // borrowed

// Whether `stop` is the Python exception `type` (or a subclass), raised by the traced code.
bool raises(const Unsupported& stop, PyObject* type);  // type borrowed

// Throws Unsupported carrying the current Python error as the exception traced code raises
// (see Unsupported::exception), and clears it.
[[noreturn]] void raise_python_error(const std::string& what);

// Throws Unsupported carrying the current Python error's text and clears it.
[[noreturn]] void unsupported_from_python_error(const std::string& what);

class TraceContext {
 public:
  explicit TraceContext(const TraceOptions& options);
  ~TraceContext();

  const TraceOptions& options;
  std::unique_ptr<TorchBridge> bridge;
  GuardSet guards;
  bool grad_enabled = true;  // the grad mode the traced code runs under right now
  // The exception an except block of an inlined frame is handling (sys.exception()), or
  // null.
  ValuePtr handled_exception;
  PyRef root_globals;  // the traced function's globals
  PyRef builtins;      // and its builtins dict
  int inline_depth = 0;
  // Iterators being drained right now by a consumer that may stop early in eager (a
  // function written in C given an iterator; drain_iterator, not `whole`), counted from the
  // innermost whole drain: a generator stepped meanwhile may run steps eager would not,
  // under generator_depth's restrictions.
  int draining = 0;
  // Generators being run ahead: stepped to their end at once by a builtin that drains them
  // (list(), sum(), unpacking; elsewhere the VM steps a generator when its consumer asks, as
  // eager does, lazy_items.h). Such a builtin may stop early in eager (any(), `in`), so a
  // global they read or write could be seen in another order than eager's
  // (record_global_write).
  int generator_depth = 0;
  // The serial of the first value the innermost of them made (TracedValue::serial).
  uint64_t generator_start_serial = 0;
  // Inside a generator run ahead: mutating `value` when it existed before the generator
  // started (a pre-existing object, or one the trace made earlier) is unsupported, since
  // eager interleaves the generator's steps with its consumer, which may read it between
  // them. `what` says what the mutation is.
  void check_generator_mutation(const ValuePtr& value, const std::string& what) const;
  // The traced frame itself: its code, the instruction it is executing and how many times
  // execution has arrived there (kept by InlineFrame::run).
  const frontend::CodeInfo* root_code = nullptr;
  // The frame whose instruction is executing now, innermost (set by InlineFrame::run).
  const InlineFrame* executing_frame = nullptr;
  int root_instruction = -1;
  int root_arrival = 0;

  // Converts a live object into a traced value, recording the guards that make the
  // conversion valid. Memoised by source text so a source gives one value.
  ValuePtr wrap(PyObject* object, const SourcePtr& source);  // borrowed object
  // The items a dict holds (for a dict subclass: its builtin storage), read from `source`
  // as a Dict whose keys are guarded (DICT_KEYS) and whose values are wrapped from it.
  ValuePtr wrap_dict_items(PyObject* object, const SourcePtr& source);  // borrowed object
  // The storage of an instance of a dict subclass that existed before the call (kind
  // Object, with a source), for dict's own read methods called on it (`super().get(key)`):
  // a Dict as wrap_dict_items makes it, one per source. Unsupported when the class reads
  // its items in its own way (its own __iter__ or __getitem__ at C level) or the trace
  // wrote to them.
  ValuePtr dict_storage(const ValuePtr& object);

  // Guard kinds the VM installs; each maps to a GuardSet::add_* (guard.h).
  enum class GuardKind {
    TypeMatch,
    IdMatch,
    ConstantMatch,
    TensorMatch,
    LenMatch,
    DictKeys,
    DictVersion,
    NoHooks,
    GradMode
  };
  // Records that `object` (borrowed) read from `source` must stay as it is now in the
  // way `kind` says. A guard that cannot be expressed ends the trace.
  void guard(GuardKind kind, const SourcePtr& source, PyObject* object);

  // Mutations of pre-existing objects, replayed after the graph runs.
  struct PendingSideEffect {
    SideEffect::Kind kind;
    SourcePtr target;
    std::string name;
    ValuePtr value;  // SetAttr: the value; Replace*: the container itself (final contents)
  };
  std::vector<PendingSideEffect> side_effects;
  // Mutations of pre-existing containers the trace made, counted each time (side_effects
  // holds one entry per container): with side_effects, tells whether a call mutated
  // anything that existed before the trace.
  size_t container_mutations = 0;
  // Attributes the traced code set on pre-existing objects, by object and name: later reads
  // in the trace see them, also through another name of the same object (`obj` and the
  // stack slot it was stored from, after a graph break).
  std::map<std::pair<const PyObject*, std::string>, ValuePtr> attribute_writes;

  // Lets the trace mutate a list or dict that existed before the call: its final
  // contents are written back after the graph runs. False when it cannot be (no source).
  // Unsupported when a deferred log call came after its first mutation: the handlers,
  // which run after the graph, would see the final contents.
  bool track_mutation(const ValuePtr& container);
  // Whether a deferred call (a log call or a warning: vm/logging_calls.cpp,
  // vm/warning_calls.cpp) is among the side effects after side_effects[effect].
  bool deferred_call_after(size_t effect) const;
  // Records obj.name = value on a pre-existing object (SetAttr), or object.__setattr__(obj,
  // name, value) (GenericSetAttr); false when it cannot be.
  bool record_attribute_write(const ValuePtr& object, const std::string& name,
                              const ValuePtr& value,
                              SideEffect::Kind kind = SideEffect::Kind::SetAttr);
  // Records dict.__setitem__(obj, key, value) (or OrderedDict's) on a pre-existing instance of
  // a dict subclass, for a string key; false when it cannot be. The trace never reads such an
  // object's items itself, so only the replay needs to see the write.
  bool record_base_item_write(const ValuePtr& object, const std::string& key,
                              const ValuePtr& value);
  // A value the traced code stored in obj.name earlier, or null. For a Python module, what it
  // stored in that global of the module (record_global_write); Unsupported when it deleted it.
  ValuePtr attribute_written(const ValuePtr& object, const std::string& name) const;
  // An object's attributes and its __dict__ held as a Dict (read as obj.__dict__ or vars(obj),
  // or reached under another name) are separate traced values that do not see each other's
  // writes, so a trace that writes through one name must not read through the other:
  // record_attribute_write also writes a plain setattr into the held dict (and refuses any
  // other), wrap refuses the dict of an object written to, and this refuses reading attribute
  // `name` of `object` (borrowed) once the trace mutated its __dict__ (Unsupported: a break).
  void check_attribute_read(PyObject* object, const std::string& name) const;

  // Records `name = value` (STORE_GLOBAL) in the globals dict `globals` (borrowed) of a frame,
  // or `del name` (DELETE_GLOBAL) when `value` is null: one SetGlobal or DeleteGlobal side
  // effect per dict and name, holding the last write (`dict_source` names the dict, null for
  // the traced function's own globals). Unsupported when the trace holds that dict as a Dict
  // (read as a module's __dict__), which would not see the write.
  void record_global_write(PyObject* globals, const SourcePtr& dict_source, const std::string& name,
                           const ValuePtr& value);
  // What the traced code last stored in `name` of the globals dict `globals` (borrowed): the
  // value, a Null value when it deleted the name, or null when it did neither.
  ValuePtr global_written(PyObject* globals, const std::string& name) const;
  // Notes a read of global `name` of `globals` (borrowed; as a name, or as a module attribute).
  // Inside a generator run ahead, which eager runs step by step, a later write of that global
  // by the trace could come before the read in eager: record_global_write then refuses it.
  void note_global_read(PyObject* globals, const std::string& name);

  // Set when the trace read a live list or tuple iterator (wrap) as an Iterator, guarded
  // on what it has left.
  bool read_live_iterator = false;

  // The decoded code of a live code object, cached on the code object (its co_extra) and
  // freed with it; the shared_ptr keeps it for as long as the caller needs it.
  static std::shared_ptr<const frontend::CodeInfo> code_info(PyObject* code);  // borrowed

 private:
  std::map<std::string, ValuePtr> wrapped_;
  std::map<std::string, ValuePtr> dict_storage_;  // dict_storage, by source text
  // Lists and dicts wrapped, by identity: the first key and value, and whether another key
  // reached the same object (then neither may be mutated: each key has its own value).
  struct Container {
    std::string key;
    ValuePtr value;
    bool aliased = false;
  };
  std::map<PyObject*, Container> containers_;
  // Live list and tuple iterators wrapped (by the source they were read from), and the
  // sequences they walk, which the trace then may not mutate.
  std::map<PyObject*, std::string> iterators_;
  std::map<PyObject*, std::string> iterated_;
  // The __dict__ of each object the trace set an attribute of, with the object's source (and
  // each globals dict the trace wrote a name of).
  std::map<PyObject*, std::string> written_instance_dicts_;
  // Globals written or deleted, by globals dict and name: the value last stored (Null when
  // deleted) and the index of its side effect.
  struct GlobalWrite {
    ValuePtr value;
    size_t effect = 0;
  };
  std::map<std::pair<const PyObject*, std::string>, GlobalWrite> global_writes_;
  // Globals read inside a generator run ahead, with the traced frame's instruction that ran it
  // (where a graph break must then come, before the generator is drained).
  struct GeneratorRead {
    int instruction = -1;
    int arrival = 0;
  };
  std::map<std::pair<const PyObject*, std::string>, GeneratorRead> globals_read_by_generators_;
};

// Python truthiness of a traced value when it is known without running code
// (constants, containers, plain objects); throws Unsupported otherwise.
bool truthiness(const ValuePtr& value);

// A Python object built from a traced value whose every part is concrete (constants,
// objects, containers of them); nullptr when some part is abstract (a tensor).
PyRef concrete_object(const ValuePtr& value);
// A constant for the result of a concrete call: a set nothing else holds (a new one: `s |
// t`, `set(...)`, `s.union(t)`) is the trace's own, which its methods may then mutate
// (call_container_method), as BUILD_SET's is. Any other object, a set the call found
// elsewhere included, stays a constant whose methods are not traced on it. `transient` is
// how many references besides `result` the caller holds and drops (the call's result, or
// the tuple it came in).
ValuePtr fresh_constant(PyRef result, Py_ssize_t transient = 0);
// `number` (borrowed) itself, or for a symbolic size (torch.SymInt, SymFloat, SymBool) the
// value it has in this trace, which torch's ShapeEnv then guards (dynamic shapes: a size
// used where only a fixed number will do: formatted, passed to a Python function, kept
// past the graph).
PyRef concrete_number(PyObject* number);

}  // namespace dynvm::vm
