// A frame's global names: reads (LOAD_GLOBAL, guarded through G[...] or the dict of an
// inlined callee's module), and writes and deletes (STORE_GLOBAL, DELETE_GLOBAL), which are
// side effects replayed after the graph runs and which later reads in the trace see.
#include <set>
#include <string>

#include "inline_frame.h"
#include "trace_context.h"

namespace dynvm::vm {

namespace {

// Whether the recipes that rebuild values after the graph (TorchBridge's RecipeBuilder, at a
// return) can rebuild `value`: what a global may be set to. Values they cannot rebuild (a
// function the trace made, a bound method of one, an iterator, a context manager) make the
// write a graph break, where eager stores the real object.
bool rebuildable(const ValuePtr& value, std::set<const TracedValue*>* seen) {
  if (!seen->insert(value.get()).second) return true;  // a cycle: checked where it started
  auto all = [&](const std::vector<ValuePtr>& items) {
    for (const ValuePtr& item : items) {
      if (!item || !rebuildable(item, seen)) return false;
    }
    return true;
  };
  switch (value->kind) {
    case TracedValue::Kind::Tensor:
    case TracedValue::Kind::Constant:
    case TracedValue::Kind::Range:
      return true;
    case TracedValue::Kind::Object:
      return value->source || value->items.empty();
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List:
      return (value->source && value->obj) || value->is_size || all(value->items);
    case TracedValue::Kind::Dict:
      if (value->source && value->obj) return true;
      return !value->function && all(value->items);
    case TracedValue::Kind::NewObject:
      return value->class_value && value->instance_dict &&
             rebuildable(value->instance_dict, seen) &&
             (!value->mapping_items || rebuildable(value->mapping_items, seen));
    case TracedValue::Kind::DictView:
      return value->self_value && rebuildable(value->self_value, seen);
    case TracedValue::Kind::BoundMethod:
      return value->function && value->function->is(TracedValue::Kind::Object) &&
             value->function->source && PyFunction_Check(value->function->py()) &&
             value->self_value && rebuildable(value->self_value, seen);
    default:
      return false;
  }
}

}  // namespace

ValuePtr InlineFrame::load_global(const std::string& name) {
  context_.note_global_read(scope_.globals.get(), name);
  bool deleted = false;
  if (ValuePtr written = context_.global_written(scope_.globals.get(), name)) {
    // The traced code set it earlier: that value, not the one the guards read.
    if (!written->is_null()) return written;
    deleted = true;  // then, as in CPython, the builtins
  }
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  if (!deleted) {
    PyObject* found = PyDict_GetItemWithError(scope_.globals.get(), key.get());  // borrowed
    if (found != nullptr) {
      SourcePtr src =
          scope_.dict_source ? Source::key(scope_.dict_source, name) : Source::global(name);
      return context_.wrap(found, src);
    }
    if (PyErr_Occurred()) unsupported_from_python_error("global lookup");
  }
  PyObject* found = PyDict_GetItemWithError(scope_.builtins.get(), key.get());
  if (found != nullptr) {
    return context_.wrap(found, Source::builtin(name));
  }
  if (PyErr_Occurred()) unsupported_from_python_error("builtin lookup");
  // No guard can state that a name is absent: a graph break, where eager raises NameError
  // (after the side effects before it, a `del name` of the trace among them, are replayed).
  unsupported("name '" + name + "' is not defined");
}

void InlineFrame::store_global(const std::string& name, const ValuePtr& value) {
  std::set<const TracedValue*> seen;
  if (!rebuildable(value, &seen)) {
    unsupported("storing a " + value->describe() + " in the global '" + name + "'");
  }
  if (!scope_.dict_source && scope_.globals.get() != context_.root_globals.get()) {
    unsupported("storing the global '" + name + "' of a module the trace cannot name");
  }
  context_.record_global_write(scope_.globals.get(), scope_.dict_source, name, value);
}

void InlineFrame::delete_global(const std::string& name) {
  if (!scope_.dict_source && scope_.globals.get() != context_.root_globals.get()) {
    unsupported("deleting the global '" + name + "' of a module the trace cannot name");
  }
  if (ValuePtr written = context_.global_written(scope_.globals.get(), name)) {
    if (written->is_null()) unsupported("name '" + name + "' is not defined");  // deleted twice
  } else {
    // A name the trace did not set: `del` succeeds on the calls where it exists, which its
    // type's guard checks (it fails once the name is gone).
    PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
    PyObject* found = PyDict_GetItemWithError(scope_.globals.get(), key.get());  // borrowed
    if (found == nullptr) {
      if (PyErr_Occurred()) unsupported_from_python_error("global lookup");
      unsupported("name '" + name + "' is not defined");
    }
    context_.guard(
        TraceContext::GuardKind::TypeMatch,
        scope_.dict_source ? Source::key(scope_.dict_source, name) : Source::global(name), found);
  }
  context_.record_global_write(scope_.globals.get(), scope_.dict_source, name, nullptr);
}

void TraceContext::note_global_read(PyObject* globals, const std::string& name) {
  if (generator_depth > 0) {
    globals_read_by_generators_.try_emplace({globals, name},
                                            GeneratorRead{root_instruction, root_arrival});
  }
}

void TraceContext::record_global_write(PyObject* globals, const SourcePtr& dict_source,
                                       const std::string& name, const ValuePtr& value) {
  // A generator drained at once (TraceContext::generator_depth) may run steps eager runs
  // later or never, around code that reads or writes the global.
  if (generator_depth > 0) {
    unsupported("setting or deleting the global '" + name + "' inside a generator");
  }
  auto read = globals_read_by_generators_.find({globals, name});
  if (read != globals_read_by_generators_.end()) {
    // The generator's items are stale from its making on (also in a frame rebuilt at a break
    // here, which iterates what it yielded): the break comes before the traced frame made it,
    // and eager makes and runs it.
    Unsupported stop;
    stop.reason = "setting or deleting the global '" + name + "', which a generator made " +
                  "earlier reads (eager runs it step by step)";
    stop.root_instruction = read->second.instruction;
    stop.root_arrival = read->second.arrival;
    if (root_code != nullptr && stop.root_instruction >= 0) {
      const auto& at = root_code->instructions[static_cast<size_t>(stop.root_instruction)];
      stop.filename = root_code->filename;
      stop.lineno = at.positions.line > 0 ? at.positions.line : root_code->firstlineno;
    }
    throw stop;
  }
  auto held = containers_.find(globals);
  if (held != containers_.end()) {
    unsupported("writing the global '" + name + "' while the trace holds its module's dict as " +
                held->second.key);
  }
  // From now on, reading that dict as a Dict (a module's __dict__) would miss the write.
  written_instance_dicts_.emplace(globals, "the module whose global '" + name + "' it set");
  SideEffect::Kind kind = value ? SideEffect::Kind::SetGlobal : SideEffect::Kind::DeleteGlobal;
  ValuePtr replayed = value ? value : TracedValue::constant(PyRef::borrow(Py_None));
  auto [it, added] = global_writes_.try_emplace({globals, name});
  it->second.value = value ? value : TracedValue::null();
  // Only the last write of a name matters after the graph: nothing reads the dict between
  // the replayed side effects (a loop's `total += x` keeps one graph output, not one per
  // iteration), unless a deferred log call comes between them, whose handlers may.
  if (added || deferred_call_after(it->second.effect)) {
    it->second.effect = side_effects.size();
    side_effects.push_back(PendingSideEffect{kind, dict_source, name, replayed});
    return;
  }
  PendingSideEffect& effect = side_effects[it->second.effect];
  effect.kind = kind;
  effect.value = replayed;
}

ValuePtr TraceContext::global_written(PyObject* globals, const std::string& name) const {
  if (global_writes_.empty()) return nullptr;
  auto it = global_writes_.find({globals, name});
  return it == global_writes_.end() ? nullptr : it->second.value;
}

}  // namespace dynvm::vm
