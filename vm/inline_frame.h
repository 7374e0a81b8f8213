// InlineFrame: one Python frame being executed over traced values — the traced
// function itself or a function it calls, inlined. Private to vm/.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "dynvm/frontend/code_info.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/traced_value.h"
#include "torch_bridge.h"

namespace dynvm::vm {

class TraceContext;

// Where an inlined frame's global names come from.
struct GlobalsScope {
  PyRef globals;          // the globals dict (borrowed by value)
  PyRef builtins;         // the builtins dict
  SourcePtr dict_source;  // null: the traced frame's own globals (G[...], B[...])
};

class InlineFrame {
 public:
  InlineFrame(TraceContext& context, std::shared_ptr<const frontend::CodeInfo> code,
              PyRef code_object, GlobalsScope scope);

  // localsplus slots: parameters first (set by the caller), then locals, cells, frees.
  // A null pointer is a slot of the traced frame not read yet (see make_root).
  std::vector<ValuePtr> locals;

  // Where a root frame stops: before the instruction `instruction` the `arrival`-th time
  // execution reaches it.
  struct StopPoint {
    int instruction = -1;
    int arrival = 0;
  };
  // Makes this the traced frame itself: execution starts at instruction `start` with
  // `stack`, stops at `stop` (run() then returns nullptr) and stamps Unsupported with the
  // instruction being executed. `live_locals` (borrowed, one per localsplus slot, may be
  // empty) are the frame's locals when it starts mid-way: a slot whose `locals` entry is
  // null is wrapped from it when first read, so that unread locals cost no guard.
  void make_root(int start, std::vector<ValuePtr> stack, StopPoint stop,
                 std::vector<PyObject*> live_locals);
  bool stopped() const { return stopped_; }
  const std::vector<ValuePtr>& value_stack() const { return stack_; }

  // Runs to the return; returns the returned value. Throws Unsupported. A generator's
  // frame (suspend_at_yields) returns null at each yield instead, and the next run()
  // resumes it after that yield.
  ValuePtr run();
  // Makes the frame a generator's, stepped one yield at a time (lazy_items.h).
  void suspend_at_yields() { generator_ = true; }
  // What the generator yielded when run() returned, or null when it returned.
  ValuePtr take_yielded() { return std::move(yielded_); }

  const frontend::CodeInfo& code() const { return *code_; }
  const GlobalsScope& scope() const { return scope_; }
  // The source line of the instruction being executed.
  int current_line() const;
  // The frame whose call runs this one (while it runs), or null for the traced frame.
  const InlineFrame* caller() const { return caller_; }
  // Fills the place of an Unsupported raised while this frame executes its instruction.
  void annotate(Unsupported& u) const;

 private:
  void step(const frontend::Instruction& ins);
  ValuePtr& local(int index);
  void require_mutable(
      const ValuePtr& container);  // locals[index], wrapped from the live frame on first use
  ValuePtr pop();
  ValuePtr& top();
  ValuePtr& peek(int n);  // 1 = top
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  std::vector<ValuePtr> pop_n(size_t n);  // in push order

  // The frame's global names (vm/globals.cpp): a read sees what the trace stored or deleted
  // earlier; a store or delete is a side effect on the frame's globals dict.
  ValuePtr load_global(const std::string& name);
  void store_global(const std::string& name, const ValuePtr& value);
  void delete_global(const std::string& name);
  // The handler of this frame's exception table that covers the current instruction
  // receives `exception`: the stack cut to its depth, the exception pushed, pc_ set. False
  // when no handler covers it (the exception leaves the frame).
  bool enter_handler(const PyRef& exception);
  [[noreturn]] void raise(const ValuePtr& exception, const ValuePtr& cause = nullptr);
  // `import name` (fromlist None) or `from name import ...`, relative at `level`.
  ValuePtr import_name(const std::string& name, const ValuePtr& fromlist, const ValuePtr& level);
  ValuePtr const_value(int index);
  void do_call(int argc, int kw_names_const);
  ValuePtr zero_argument_super();
  void jump_if(bool pop_always, bool jump_when, const frontend::Instruction& ins,
               bool none_test = false);

  TraceContext& context_;
  const InlineFrame* caller_ = nullptr;
  std::shared_ptr<const frontend::CodeInfo> code_;
  PyRef code_object_;
  GlobalsScope scope_;
  std::vector<ValuePtr> stack_;
  int pc_ = 0;
  bool jumped_ = false;
  ValuePtr return_value_;
  bool generator_ = false;
  ValuePtr yielded_;
  // Root frame only.
  bool is_root_ = false;
  bool stopped_ = false;
  StopPoint stop_;
  std::vector<int> arrivals_;           // per instruction
  std::vector<PyObject*> live_locals_;  // borrowed
  // Handlers of the traced frame entered and not yet left (POP_EXCEPT), each with the
  // instruction that raised and its arrival: a break inside one comes at the first raise
  // instead, so that eager raises and handles the exception itself.
  std::vector<std::pair<int, int>> handler_origins_;
};

// Calls a traced callable with traced arguments (inlining user code). Throws Unsupported.
ValuePtr call_value(TraceContext& context, const ValuePtr& callable, std::vector<ValuePtr> args,
                    KwArgs kwargs);

// Inlines a Python function (a live PyFunctionObject reached through `source`, or a
// function the trace made) with bound arguments.
ValuePtr inline_function(TraceContext& context, const ValuePtr& function,
                         std::vector<ValuePtr> args, KwArgs kwargs);

// obj.name for a traced object. Throws Unsupported (AttributeMissing where the object proves
// to have no such attribute).
ValuePtr load_attribute(TraceContext& context, const ValuePtr& object, const std::string& name);

// obj.name = value (STORE_ATTR, setattr()) and del obj.name (DELETE_ATTR, delattr()) for a
// traced object: on an object the trace made, as its class does it; on one that existed
// before the call, a side effect. Throw Unsupported.
void store_attribute(TraceContext& context, const ValuePtr& object, const std::string& name,
                     const ValuePtr& value);
void delete_attribute_of(TraceContext& context, const ValuePtr& object, const std::string& name);

// object.__getattribute__(obj, name) for a concrete object (kind Object): the lookup without
// its class's own __getattribute__.
ValuePtr generic_object_attribute(TraceContext& context, const ValuePtr& object,
                                  const std::string& name);

// The operators of the language over traced values. Throw Unsupported.
ValuePtr binary_operation(TraceContext& context, int binary_op, const ValuePtr& lhs,
                          const ValuePtr& rhs);
ValuePtr compare_operation(TraceContext& context, int compare_op, const ValuePtr& lhs,
                           const ValuePtr& rhs);
ValuePtr unary_operation(TraceContext& context, const char* python_operator,
                         const ValuePtr& operand);
ValuePtr subscript(TraceContext& context, const ValuePtr& container, const ValuePtr& key);
void store_subscript(TraceContext& context, const ValuePtr& container, const ValuePtr& key,
                     const ValuePtr& value);
bool contains(TraceContext& context, const ValuePtr& item, const ValuePtr& container);
// The match statement (vm/match_statement.cpp): whether type(subject) is a sequence or a
// mapping by its flags (MATCH_SEQUENCE, MATCH_MAPPING); the values of constant `keys` in
// a mapping, or None (MATCH_KEYS); the attributes a class pattern extracts, or None
// (MATCH_CLASS). Throw Unsupported, also where eager raises.
bool matches_sequence(TraceContext& context, const ValuePtr& subject);
bool matches_mapping(TraceContext& context, const ValuePtr& subject);
ValuePtr match_keys(TraceContext& context, const ValuePtr& subject, const ValuePtr& keys);
ValuePtr match_class(TraceContext& context, const ValuePtr& subject, const ValuePtr& cls,
                     int positional, const ValuePtr& names);
// `logger.warning(...)` and the other emitting methods of a logging.Logger, called with
// constants on a level it emits: recorded as a side effect that makes the call after the
// graph (a CallMethod), with None as its result. Null when the call is not one, to be
// traced as usual (vm/logging_calls.cpp).
ValuePtr defer_logging_call(TraceContext& context, const ValuePtr& callable,
                            const std::vector<ValuePtr>& args, const KwArgs& kwargs);
// `warnings.warn(message, category, stacklevel)` with constants, where the frame at that
// stacklevel is one the trace runs and warnings' filters do not make it an error: recorded
// as a side effect that makes the warning after the graph as warn would have made it there
// (nothing for an ignored one), guarded on the filters; None as its result. Null when the
// call is not one, to be traced as usual (vm/warning_calls.cpp).
ValuePtr defer_warning_call(TraceContext& context, const ValuePtr& callable,
                            const std::vector<ValuePtr>& args, const KwArgs& kwargs);
// An lru_cache-wrapped method of a logging.Logger (transformers' `logger.warning_once`)
// whose traced body made only deferred log calls since `first_effect`, and returned None:
// those calls are replaced by one deferred call of the method itself, whose cache decides
// after the graph whether it logs. False, changing nothing, when the call is not one.
bool defer_cached_logging_call(TraceContext& context, const ValuePtr& callable,
                               const std::vector<ValuePtr>& args, const KwArgs& kwargs,
                               size_t first_effect, const ValuePtr& result);
// iter(value): an Iterator is itself, a class's own __iter__ gives its iterator (a generator
// stays lazy), anything else an Iterator over its items. Throws Unsupported.
ValuePtr iterator_of(TraceContext& context, const ValuePtr& value);
// iter(value) as a list of items, for unrolling; an Iterator is consumed. Throws Unsupported.
std::vector<ValuePtr> iterate(TraceContext& context, const ValuePtr& value);
// The items of an iterable for unpacking or extending, or for a builtin that takes it whole
// (list, sum): an iterator is consumed as eager consumes it, with no step skipped or
// added (drain_iterator's `whole`).
std::vector<ValuePtr> unpack_items(TraceContext& context, const ValuePtr& value);

}  // namespace dynvm::vm
