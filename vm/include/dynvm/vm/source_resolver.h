// Reading sources from a live call: FrameInputs (what a call provides), SourceTable (a guard
// set's sources, each once, numbered) and SourceResolver (one check's memo of resolved values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/source.h"

namespace dynvm::vm {

// What one call of the traced function provides to resolve root sources. Every pointer is
// borrowed from the caller and must stay valid while a resolver uses it.
struct FrameInputs {
  // Borrowed array: the call's fast locals (bound arguments) by localsplus index, the index
  // Source::local(name, index) holds. An entry may be nullptr (an unbound local).
  PyObject* const* locals = nullptr;
  int local_count = 0;          // entries in `locals`
  PyObject* closure = nullptr;  // borrowed: the function's __closure__ (tuple of cells), or nullptr
  PyObject* globals = nullptr;  // borrowed: the function's globals dict
  PyObject* builtins = nullptr;  // borrowed: the builtins dict
  // Borrowed array: the value stack of a frame a trace starts in mid-way (bottom first), the
  // index Source::stack(index) holds; empty when the trace starts at the frame's beginning.
  PyObject* const* stack = nullptr;
  int stack_count = 0;
};

// The sources a guard set reads, each once (identified by its text), numbered in first-use
// order so that a source's base always has a smaller slot than the source itself.
class SourceTable {
 public:
  struct Entry {
    SourcePtr source;
    std::string text;  // source->to_string()
    int base = -1;     // slot of source->base(); -1 for a root (Local, Closure, Global, Builtin)
    Source::Kind kind = Source::Kind::Local;  // source->kind(), kept here for the hot path
    int64_t index = 0;                        // source->index()
    // Global/Builtin/Attr/Key: the name as an interned str. ModuleParam/ModuleBuffer/
    // ModuleChild: the member's name. BytesKey: the bytes. Index: the index as an int. Owned.
    PyRef key;
    // ModuleParam/ModuleBuffer/ModuleChild: "_parameters", "_buffers" or "_modules". Owned.
    PyRef container;
    bool is_dict_attr = false;  // Attr "__dict__": read as the instance dict, not by getattr
    // Attr "__class__": read as type(base), the class the trace looked attributes up on; a
    // class's own __getattribute__ never runs inside a guard (it may be traced code itself).
    bool is_class_attr = false;
    // Attr "__dynvm_rest__" of a list or tuple iterator: a tuple of the items it has yet to
    // give (read through __reduce__; the iterator does not move).
    bool is_iterator_rest = false;
    // The last value read for this slot and what it was read through, so that the next read
    // is a few compares while those are unchanged (read_source_entry). Pointers are borrowed
    // and compared only, except `inner` and `value`, which the unchanged `outer` (or type)
    // keeps alive. Dict version tags (PEP 509) and type version tags come from counters that
    // never repeat, so an equal tag means the same object, unmodified.
    struct LastRead {
      PyObject* outer = nullptr;  // the dict read first: globals, base.__dict__, a dict base
      uint64_t outer_version = 0;
      PyObject* inner = nullptr;  // base.__dict__[container] (module members)
      uint64_t inner_version = 0;
      PyTypeObject* type = nullptr;  // an attribute's owner type: type(base), or base itself
      unsigned int type_version = 0;
      PyObject* value = nullptr;
    };
    mutable LastRead last;
  };

  SourceTable() = default;
  SourceTable(SourceTable&&) noexcept = default;
  SourceTable& operator=(SourceTable&&) noexcept = default;
  SourceTable(const SourceTable&) = delete;
  SourceTable& operator=(const SourceTable&) = delete;
  ~SourceTable() = default;  // drops Python references: hold the GIL

  // GIL held. The slot of `source`, adding it and its bases when new; -1 when Python could not
  // allocate the name objects (no Python error is left set).
  int intern(const SourcePtr& source);
  // The slot of the source printed as `text`, or -1.
  int find(const std::string& text) const;

  const Entry& operator[](int slot) const { return entries_[static_cast<size_t>(slot)]; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, int> slots_;  // text -> slot
};

// Resolves the slots of one SourceTable against one call, each at most once: L['self'].layer1
// is read once for all the guards below it. GIL held for the resolver's whole life. Every
// failure (missing attribute or key, index out of range, unbound local, any exception) makes
// the slot unresolvable and clears the Python error; nothing is raised.
class SourceResolver {
 public:
  // `table` and `inputs` are borrowed for the resolver's life. With `explain`, the first
  // failure is described in failure() (costs allocations; for GuardFailure only).
  SourceResolver(const SourceTable& table, const FrameInputs& inputs, bool explain = false);
  ~SourceResolver();  // releases the references it holds
  SourceResolver(const SourceResolver&) = delete;
  SourceResolver& operator=(const SourceResolver&) = delete;

  // Borrowed (the resolver holds a reference until it is destroyed), or nullptr when the slot
  // cannot be resolved.
  PyObject* resolve(int slot);

  // With `explain`: which slot failed first and why, e.g. "AttributeError: 'Linear' object
  // has no attribute 'foo'"; -1 and "" while nothing failed.
  int failed_slot() const { return failed_slot_; }
  const std::string& failure() const { return failure_; }

 private:
  // One memo entry: `value` is a new reference once state == kResolved.
  struct Memo {
    PyObject* value;
    uint8_t state;
  };
  static constexpr uint8_t kUnresolved = 0;
  static constexpr uint8_t kResolved = 1;
  static constexpr uint8_t kFailed = 2;
  // Sets with at most this many sources resolve without allocating.
  static constexpr size_t kInlineSlots = 32;

  void note_failure(int slot);

  const SourceTable& table_;
  const FrameInputs& inputs_;
  Memo* memo_;
  Memo inline_memo_[kInlineSlots];
  std::unique_ptr<Memo[]> heap_memo_;
  bool explain_;
  int failed_slot_ = -1;
  std::string failure_;
};

// GIL held. Reads one entry of a table whose base (nullptr for a root) is already resolved:
// a new reference, or nullptr, possibly with a Python error set, when it cannot be read. The
// one definition of what reading a source means, shared by the resolver and by compiled guards.
// The pseudo-attribute that reads what a list or tuple iterator has yet to give.
inline constexpr const char* kIteratorRest = "__dynvm_rest__";
// New reference: a tuple of the items a list_iterator or tuple_iterator (borrowed) has yet
// to give, without moving it; nullptr with a Python error for anything else. `sequence`,
// when given, receives the list or tuple it walks (borrowed: the iterator holds it; null
// once exhausted).
PyObject* iterator_rest(PyObject* iterator, PyObject** sequence = nullptr);
// Whether `object` (borrowed) is exactly a list_iterator or tuple_iterator.
bool is_sequence_iterator(PyObject* object);

PyObject* read_source_entry(const SourceTable::Entry& entry, PyObject* base,
                            const FrameInputs& inputs);

// GIL held. Resolves one source outside a guard check (e.g. to rebuild a value for eager
// execution): a new reference, or an empty PyRef (no Python error set) when it cannot be read.
PyRef resolve_source(const SourcePtr& source, const FrameInputs& inputs);

}  // namespace dynvm::vm
