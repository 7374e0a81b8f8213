// The VM's instruction loop: executes one frame's normalised ops over traced values.
#include "inline_frame.h"
#include "known_objects.h"

#include <utility>

#include "dynvm/vm/opcode_coverage.h"

#include "lazy_items.h"
#include "python_values.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

using frontend::Instruction;
using frontend::Op;

InlineFrame::InlineFrame(TraceContext& context, std::shared_ptr<const frontend::CodeInfo> code,
                         PyRef code_object, GlobalsScope scope)
    : context_(context),
      code_(std::move(code)),
      code_object_(std::move(code_object)),
      scope_(std::move(scope)) {
  locals.assign(code_->localsplus.size(), TracedValue::null());
}

int InlineFrame::current_line() const {
  if (pc_ < 0 || pc_ >= static_cast<int>(code_->instructions.size())) return code_->firstlineno;
  int line = code_->instructions[pc_].positions.line;
  return line > 0 ? line : code_->firstlineno;
}

ValuePtr InlineFrame::pop() {
  if (stack_.empty()) unsupported("internal: value stack underflow");
  ValuePtr v = std::move(stack_.back());
  stack_.pop_back();
  return v;
}

ValuePtr& InlineFrame::top() { return peek(1); }

ValuePtr& InlineFrame::peek(int n) {
  if (n < 1 || static_cast<size_t>(n) > stack_.size()) {
    unsupported("internal: value stack underflow");
  }
  return stack_[stack_.size() - n];
}

std::vector<ValuePtr> InlineFrame::pop_n(size_t n) {
  if (n > stack_.size()) unsupported("internal: value stack underflow");
  std::vector<ValuePtr> out(stack_.end() - n, stack_.end());
  stack_.resize(stack_.size() - n);
  return out;
}

ValuePtr InlineFrame::const_value(int index) {
  PyObject* consts = reinterpret_cast<PyCodeObject*>(code_object_.get())->co_consts;
  if (index < 0 || index >= PyTuple_GET_SIZE(consts)) unsupported("internal: bad const index");
  PyObject* c = PyTuple_GET_ITEM(consts, index);  // borrowed
  if (PyTuple_Check(c)) {
    std::vector<ValuePtr> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c); ++i) {
      items.push_back(TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(c, i))));
    }
    auto t = TracedValue::tuple(std::move(items));
    t->obj = PyRef::borrow(c);
    return t;
  }
  return TracedValue::constant(PyRef::borrow(c));
}

ValuePtr InlineFrame::import_name(const std::string& name, const ValuePtr& fromlist,
                                  const ValuePtr& level) {
  bool names_known =
      fromlist->is_constant() || (fromlist->is(TracedValue::Kind::Tuple) &&
                                  fromlist->py() != nullptr && PyTuple_CheckExact(fromlist->py()));
  if (!level->is_constant() || !PyLong_CheckExact(level->py()) || !names_known) {
    unsupported("an import with a computed level or name list");
  }
  // The import runs now, as it would at this point of the frame (Dynamo does the same): a
  // module imported before is found in sys.modules, a new one is imported once. The module
  // is then read from sys.modules by its name on every call.
  PyRef module_name = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyRef module = PyRef::steal(PyImport_ImportModuleLevelObject(
      module_name.get(), scope_.globals.get(), nullptr, fromlist->py(),
      static_cast<int>(PyLong_AsLong(level->py()))));
  if (!module) unsupported_from_python_error("import " + name);
  PyRef imported_as = PyRef::steal(PyObject_GetAttrString(module.get(), "__name__"));
  if (!imported_as || !PyUnicode_Check(imported_as.get())) {
    unsupported_from_python_error("the name of the module imported as " + name);
  }
  const char* text = PyUnicode_AsUTF8(imported_as.get());
  PyRef registered = PyRef::steal(PyImport_GetModule(imported_as.get()));
  if (registered.get() != module.get()) {
    PyErr_Clear();
    unsupported("import " + name + ": the module is not sys.modules['" + text + "']");
  }
  return context_.wrap(module.get(), Source::module(text));
}

void InlineFrame::jump_if(bool pop_always, bool jump_when, const Instruction& ins, bool none_test) {
  ValuePtr v = top();
  bool truth;
  if (none_test) {
    if (v->is_tensor()) {
      truth = false;  // a tensor is never None
    } else if (v->is_constant() || v->is(TracedValue::Kind::Object)) {
      truth = v->py() == Py_None;
    } else {
      truth = false;
    }
  } else {
    if (v->is_tensor()) {
      unsupported("data-dependent control flow: branching on the value of a tensor");
    }
    truth = truth_value(context_, v);
  }
  if (truth == jump_when) {
    if (pop_always) pop();
    pc_ = ins.norm.target;
    jumped_ = true;
  } else {
    pop();
  }
}

void InlineFrame::do_call(int argc, int kw_names_const) {
  std::vector<ValuePtr> all = pop_n(static_cast<size_t>(argc));
  KwArgs kwargs;
  if (kw_names_const >= 0) {
    PyObject* consts = reinterpret_cast<PyCodeObject*>(code_object_.get())->co_consts;
    PyObject* names = PyTuple_GET_ITEM(consts, kw_names_const);  // borrowed tuple of str
    // As the compiler writes it: a tuple of str naming some of the call's arguments.
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) > static_cast<Py_ssize_t>(all.size())) {
      unsupported("KW_NAMES: not a tuple of at most " + std::to_string(argc) + " keyword names");
    }
    Py_ssize_t nkw = PyTuple_GET_SIZE(names);
    size_t first_kw = all.size() - static_cast<size_t>(nkw);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* name = PyTuple_GET_ITEM(names, i);  // borrowed
      const char* utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
      if (utf8 == nullptr) {
        PyErr_Clear();
        unsupported("KW_NAMES: a keyword name that is not a str");
      }
      kwargs.emplace_back(utf8, all[first_kw + i]);
    }
    all.resize(first_kw);
  }
  ValuePtr self_or_callable = pop();
  ValuePtr callable_or_null = pop();
  ValuePtr callable;
  if (callable_or_null->is_null()) {
    callable = self_or_callable;
  } else {
    callable = callable_or_null;
    all.insert(all.begin(), self_or_callable);
  }
  if (kwargs.empty() && callable->is(TracedValue::Kind::Object) &&
      callable->py() == reinterpret_cast<PyObject*>(&PySuper_Type)) {
    if (all.empty()) {
      push(zero_argument_super());
      return;
    }
    if (all.size() == 2 && all[0]->py() != nullptr && PyType_Check(all[0]->py()) &&
        (all[1]->py() == nullptr || !PyType_Check(all[1]->py()))) {
      // super(Class, obj) (3.11 calls it; 3.12 has LOAD_SUPER_ATTR for both forms): the
      // class, a guarded object, and the instance, looked up past the class in its MRO.
      auto sup = std::make_shared<TracedValue>();
      sup->kind = TracedValue::Kind::Super;
      sup->items = {all[0], all[1]};
      push(sup);
      return;
    }
  }
  push(call_value(context_, callable, std::move(all), std::move(kwargs)));
}

ValuePtr InlineFrame::zero_argument_super() {
  // super() reads the __class__ cell and the first argument of the calling frame.
  ValuePtr cls;
  for (size_t i = 0; i < code_->localsplus.size(); ++i) {
    if (code_->localsplus[i].name == "__class__" &&
        local(static_cast<int>(i))->is(TracedValue::Kind::Cell)) {
      cls = locals[i]->items[0];
    }
  }
  if (!cls || code_->argcount == 0 || locals.empty()) unsupported("super() outside a method");
  ValuePtr self = local(0);
  if (self->is(TracedValue::Kind::Cell)) self = self->items[0];
  auto sup = std::make_shared<TracedValue>();
  sup->kind = TracedValue::Kind::Super;
  sup->items = {cls, self};
  return sup;
}

void InlineFrame::make_root(int start, std::vector<ValuePtr> stack, StopPoint stop,
                            std::vector<PyObject*> live_locals) {
  is_root_ = true;
  pc_ = start;
  stack_ = std::move(stack);
  stop_ = stop;
  arrivals_.assign(code_->instructions.size(), 0);
  live_locals_ = std::move(live_locals);
  context_.root_code = code_.get();
}

ValuePtr& InlineFrame::local(int index) {
  ValuePtr& slot = locals.at(static_cast<size_t>(index));
  if (slot) return slot;
  // A local of the traced frame, started mid-way, read for the first time.
  PyObject* object =
      static_cast<size_t>(index) < live_locals_.size() ? live_locals_[index] : nullptr;
  const frontend::LocalSlot& info = code_->localsplus.at(static_cast<size_t>(index));
  SourcePtr source = Source::local(info.name, index);
  if (object == nullptr) {
    slot = TracedValue::null();
  } else if (PyCell_Check(object)) {
    PyObject* contents = PyCell_GET(object);  // borrowed
    ValuePtr v = contents == nullptr
                     ? TracedValue::null()
                     : context_.wrap(contents, Source::attr(source, "cell_contents"));
    slot = TracedValue::cell(v);
    slot->mutable_here = false;
    slot->source = source;
  } else {
    slot = context_.wrap(object, source);
  }
  return slot;
}

void InlineFrame::require_mutable(const ValuePtr& container) {
  // A display being built: the trace made it, or it is on the stack of a frame resumed
  // mid-way (a comprehension's list), whose new contents are then written back.
  if (!context_.track_mutation(container)) {
    unsupported("adding to a " + container->describe() + " the trace cannot write back");
  }
}

bool InlineFrame::enter_handler(const PyRef& exception) {
  const auto& instructions = code_->instructions;
  if (pc_ < 0 || pc_ >= static_cast<int>(instructions.size())) return false;
  uint32_t offset = instructions[pc_].offset;
  const frontend::ExceptionTableEntry* entry = code_->handler_at(offset);
  if (entry == nullptr || entry->target_index < 0 || stack_.size() < entry->depth) return false;
  stack_.resize(entry->depth);
  if (entry->lasti) push(TracedValue::constant(PyRef::steal(PyLong_FromUnsignedLong(offset / 2))));
  push(TracedValue::constant(exception));
  pc_ = entry->target_index;
  return true;
}

void InlineFrame::raise(const ValuePtr& exception, const ValuePtr& cause) {
  PyObject* value = exception->is_constant() || exception->is(TracedValue::Kind::Object)
                        ? exception->py()
                        : nullptr;
  PyRef instance;
  if (value != nullptr && PyExceptionInstance_Check(value)) {
    instance = PyRef::borrow(value);
  } else if (value != nullptr && PyExceptionClass_Check(value)) {
    // `raise ValueError`: an instance made now, as Python makes it.
    if (constructs_as_base_exception(value)) instance = PyRef::steal(PyObject_CallNoArgs(value));
    if (!instance) PyErr_Clear();
  }
  if (!instance) unsupported("raise statement reached while tracing");
  if (cause) {
    // `raise exc from cause` (or `from None`): the cause set, the context suppressed.
    PyObject* c =
        cause->is_constant() || cause->is(TracedValue::Kind::Object) ? cause->py() : nullptr;
    if (c == nullptr || (c != Py_None && !PyExceptionInstance_Check(c))) {
      unsupported("raise ... from a " + cause->describe());
    }
    PyException_SetCause(instance.get(), c == Py_None ? nullptr : Py_NewRef(c));
  }
  Unsupported raised;
  raised.reason = std::string("raise ") + Py_TYPE(instance.get())->tp_name;
  raised.exception = std::move(instance);
  throw raised;
}

void InlineFrame::annotate(Unsupported& u) const {
  if (u.filename.empty()) {
    u.filename = code_->filename;
    u.lineno = current_line();
  }
  if (u.opcode < 0 && pc_ >= 0 && pc_ < static_cast<int>(code_->instructions.size())) {
    u.opcode = static_cast<int>(code_->instructions[static_cast<size_t>(pc_)].opcode);
  }
  // Not past the end: execution that runs off the code has no instruction to resume at.
  if (is_root_ && u.root_instruction < 0 && pc_ >= 0 && pc_ < static_cast<int>(arrivals_.size())) {
    u.root_instruction = pc_;
    u.root_arrival = arrivals_[static_cast<size_t>(pc_)];
  }
}

ValuePtr InlineFrame::run() {
  struct Executing {  // this frame, while it runs, then the one that called it
    TraceContext& ctx;
    const InlineFrame* caller;
    ~Executing() { ctx.executing_frame = caller; }
  } executing{context_, context_.executing_frame};
  caller_ = context_.executing_frame;
  context_.executing_frame = this;
  const auto& instructions = code_->instructions;
  int executed = 0;
  while (!return_value_) {
    try {
      if (pc_ < 0 || pc_ >= static_cast<int>(instructions.size())) {
        unsupported("internal: execution ran off the end of the code");
      }
      if (is_root_) {
        int arrival = ++arrivals_[static_cast<size_t>(pc_)];
        if (pc_ == stop_.instruction && arrival == stop_.arrival) {
          stopped_ = true;
          return nullptr;
        }
        context_.root_instruction = pc_;
        context_.root_arrival = arrival;
      }
      if (++executed > context_.options.max_instructions) {
        unsupported("the trace executed too many instructions (a very long unrolled loop)");
      }
      const Instruction& ins = instructions[pc_];
      jumped_ = false;
      count_executed(ins.opcode);
      step(ins);
    } catch (Unsupported& u) {
      // Frames handle exceptions the trace proves. A break inside a handler of the traced
      // frame itself cannot resume there (CPython's thread state would not hold the
      // exception): it comes at the instruction that raised, where eager raises and
      // handles it; so does an exception that leaves the traced frame.
      if (u.exception) {
        std::pair<int, int> origin{pc_,
                                   is_root_ && pc_ >= 0 && pc_ < static_cast<int>(arrivals_.size())
                                       ? arrivals_[static_cast<size_t>(pc_)]
                                       : 0};
        if (enter_handler(u.exception)) {
          if (is_root_) handler_origins_.push_back(origin);
          continue;
        }
      }
      if (is_root_ && !handler_origins_.empty()) {
        u.root_instruction = handler_origins_.front().first;
        u.root_arrival = handler_origins_.front().second;
      }
      annotate(u);
      throw;
    }
    if (!jumped_) ++pc_;
    if (yielded_) return nullptr;
  }
  return return_value_;
}

namespace {

// A dict key: a constant, or a tuple of constants ((device, dtype)) made a constant tuple.
ValuePtr constant_key(const ValuePtr& key) {
  if (key->is_constant()) return key;
  if (key->is(TracedValue::Kind::Tuple) && !key->class_value && !key->is_size) {
    bool all_constant = true;
    for (const ValuePtr& item : key->items) all_constant = all_constant && item->is_constant();
    PyRef tuple = all_constant ? concrete_object(key) : PyRef();
    if (tuple) return TracedValue::constant(std::move(tuple));
  }
  unsupported("a dict with a non-constant key");
}

const char* unary_operator_name(Op op) {
  switch (op) {
    case Op::UnaryPositive:
      return "pos";
    case Op::UnaryNegative:
      return "neg";
    case Op::UnaryNot:
      return "not_";
    case Op::UnaryInvert:
      return "invert";
    default:
      return nullptr;
  }
}

ValuePtr make_slice(std::vector<ValuePtr> parts) {
  auto s = std::make_shared<TracedValue>();
  s->kind = TracedValue::Kind::Slice;
  while (parts.size() < 3) parts.push_back(TracedValue::constant(PyRef::borrow(Py_None)));
  s->items = std::move(parts);
  return s;
}

std::string format_value(const ValuePtr& value, int conversion, const ValuePtr& spec) {
  PyRef object = concrete_object(value);
  if (!object) unsupported("f-string formatting of a " + value->describe());
  PyRef converted = object;
  if (conversion == 1) converted = PyRef::steal(PyObject_Str(object.get()));
  if (conversion == 2) converted = PyRef::steal(PyObject_Repr(object.get()));
  if (conversion == 3) converted = PyRef::steal(PyObject_ASCII(object.get()));
  if (!converted) unsupported_from_python_error("f-string conversion");
  PyRef spec_object = spec ? concrete_object(spec) : PyRef();
  PyRef text = PyRef::steal(PyObject_Format(converted.get(), spec_object.get()));
  if (!text) unsupported_from_python_error("f-string formatting");
  return PyUnicode_AsUTF8(text.get());
}

ValuePtr string_constant(const std::string& s) {
  return TracedValue::constant(
      PyRef::steal(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()))));
}

}  // namespace

void InlineFrame::step(const Instruction& ins) {
  const auto& n = ins.norm;
  switch (n.op) {
    case Op::Nop:
    case Op::Resume:
    case Op::CopyFreeVars:  // free slots are filled when the frame is made
      return;
    case Op::PopTop:
      pop();
      return;
    case Op::PushNull:
      push(TracedValue::null());
      return;
    case Op::Copy:
      push(peek(n.arg));
      return;
    case Op::Swap:
      std::swap(peek(1), peek(n.arg));
      return;
    case Op::EndFor:
      pop();
      pop();
      return;
    case Op::LoadConst:
      push(const_value(n.index));
      return;
    case Op::Return:
      return_value_ = n.index >= 0 ? const_value(n.index) : pop();
      return;
    case Op::LoadFast: {
      ValuePtr v = local(n.index);
      if (v->is_null()) {
        unsupported("local variable '" + code_->localsplus[n.index].name +
                    "' referenced before assignment");
      }
      push(v);
      return;
    }
    case Op::LoadFastAndClear:
      push(local(n.index));
      locals[n.index] = TracedValue::null();
      return;
    case Op::StoreFast:
      locals.at(n.index) = pop();
      return;
    case Op::DeleteFast:
      if (local(n.index)->is_null()) {
        unsupported("local variable '" + code_->localsplus[n.index].name +
                    "' deleted before assignment");
      }
      locals.at(n.index) = TracedValue::null();
      return;
    case Op::MakeCell: {
      ValuePtr contents = local(n.index);
      if (contents->is(TracedValue::Kind::Cell)) return;
      locals[n.index] = TracedValue::cell(contents);
      return;
    }
    case Op::LoadClosure:
      push(local(n.index));
      return;
    case Op::LoadDeref: {
      ValuePtr cell = local(n.index);
      if (!cell->is(TracedValue::Kind::Cell) || cell->items.empty() || cell->items[0]->is_null()) {
        unsupported("free variable '" + code_->localsplus[n.index].name +
                    "' referenced before assignment");
      }
      push(cell->items[0]);
      return;
    }
    case Op::StoreDeref: {
      ValuePtr cell = local(n.index);
      if (!cell->is(TracedValue::Kind::Cell)) unsupported("internal: STORE_DEREF on a non-cell");
      if (!cell->mutable_here) {
        unsupported("assignment to the nonlocal variable '" + code_->localsplus[n.index].name +
                    "' of an enclosing function");
      }
      context_.check_generator_mutation(
          cell, "assigning the nonlocal '" + code_->localsplus[n.index].name + "'");
      cell->items[0] = pop();
      return;
    }
    case Op::LoadGlobal:
      if (n.flags & frontend::kOpPushNull) push(TracedValue::null());
      push(load_global(code_->names.at(n.index)));
      return;
    case Op::StoreGlobal:
      store_global(code_->names.at(n.index), pop());
      return;
    case Op::DeleteGlobal:
      delete_global(code_->names.at(n.index));
      return;
    case Op::ImportName: {
      ValuePtr fromlist = pop();
      ValuePtr level = pop();
      push(import_name(code_->names.at(n.index), fromlist, level));
      return;
    }
    case Op::ImportFrom:
      // The module stays on the stack; the name was imported with it when it is a submodule.
      push(load_attribute(context_, top(), code_->names.at(n.index)));
      return;
    case Op::LoadAttr: {
      ValuePtr obj = pop();
      const std::string& name = code_->names.at(n.index);
      ValuePtr attr = load_attribute(context_, obj, name);
      if (n.flags & frontend::kOpMethod) {
        push(TracedValue::null());
      }
      push(attr);
      return;
    }
    case Op::LoadSuperAttr: {
      ValuePtr self = pop();
      ValuePtr cls = pop();
      pop();  // the global `super`
      auto sup = std::make_shared<TracedValue>();
      sup->kind = TracedValue::Kind::Super;
      sup->items = {cls, self};
      ValuePtr attr = load_attribute(context_, sup, code_->names.at(n.index));
      if (n.flags & frontend::kOpMethod) push(TracedValue::null());
      push(attr);
      return;
    }
    case Op::StoreAttr: {
      ValuePtr obj = pop();
      ValuePtr value = pop();
      store_attribute(context_, obj, code_->names.at(n.index), value);
      return;
    }
    case Op::DeleteAttr:
      delete_attribute_of(context_, pop(), code_->names.at(n.index));
      return;
    case Op::UnaryPositive:
    case Op::UnaryNegative:
    case Op::UnaryNot:
    case Op::UnaryInvert: {
      ValuePtr v = pop();
      if (n.op == Op::UnaryNot && !v->is_tensor()) {
        push(TracedValue::constant(PyRef::borrow(truth_value(context_, v) ? Py_False : Py_True)));
        return;
      }
      push(unary_operation(context_, unary_operator_name(n.op), v));
      return;
    }
    case Op::BinaryOp: {
      ValuePtr rhs = pop();
      ValuePtr lhs = pop();
      push(binary_operation(context_, n.arg, lhs, rhs));
      return;
    }
    case Op::BinarySubscr: {
      ValuePtr key = pop();
      ValuePtr container = pop();
      push(subscript(context_, container, key));
      return;
    }
    case Op::StoreSubscr: {
      ValuePtr key = pop();
      ValuePtr container = pop();
      ValuePtr value = pop();
      store_subscript(context_, container, key, value);
      return;
    }
    case Op::DeleteSubscr: {
      ValuePtr key = pop();
      ValuePtr container = pop();
      if (container->is(TracedValue::Kind::NewObject)) {
        if (!call_dunder(context_, container, "__delitem__", {key})) {
          unsupported("del on an item of a " + container->describe());
        }
        return;
      }
      if (!context_.track_mutation(container))
        unsupported("del on a " + container->describe() + " that existed before the call");
      if (container->is(TracedValue::Kind::List)) {
        PyRef k = concrete_object(key);
        Py_ssize_t size = static_cast<Py_ssize_t>(container->items.size());
        Py_ssize_t i = k && PyLong_Check(k.get()) ? PyLong_AsSsize_t(k.get()) : size;
        if (i < 0) i += size;
        if (i < 0 || i >= size) unsupported("del with an index out of range");
        container->items.erase(container->items.begin() + i);
        return;
      }
      if (container->is(TracedValue::Kind::Dict)) {
        PyRef k = concrete_object(key);
        for (size_t j = 0; k && j < container->keys.size(); ++j) {
          if (PyObject_RichCompareBool(container->keys[j]->py(), k.get(), Py_EQ) == 1) {
            container->keys.erase(container->keys.begin() + static_cast<long>(j));
            container->items.erase(container->items.begin() + static_cast<long>(j));
            return;
          }
        }
        PyErr_Clear();
        unsupported("KeyError in del");
      }
      unsupported("del on a " + container->describe());
    }
    case Op::BinarySlice: {
      ValuePtr end = pop();
      ValuePtr start = pop();
      ValuePtr container = pop();
      push(subscript(context_, container, make_slice({start, end})));
      return;
    }
    case Op::StoreSlice: {
      ValuePtr end = pop();
      ValuePtr start = pop();
      ValuePtr container = pop();
      ValuePtr value = pop();
      store_subscript(context_, container, make_slice({start, end}), value);
      return;
    }
    case Op::BuildSlice:
      push(make_slice(pop_n(static_cast<size_t>(n.arg))));
      return;
    case Op::CompareOp: {
      ValuePtr rhs = pop();
      ValuePtr lhs = pop();
      push(compare_operation(context_, n.arg, lhs, rhs));
      return;
    }
    case Op::IsOp: {
      ValuePtr rhs = pop();
      ValuePtr lhs = pop();
      bool same;
      if (lhs->is_tensor() || rhs->is_tensor()) {
        same = lhs->is_tensor() && rhs->is_tensor() && lhs->graph_value == rhs->graph_value &&
               lhs->obj.get() == rhs->obj.get();
      } else if (lhs->py() != nullptr && rhs->py() != nullptr) {
        same = lhs->py() == rhs->py();
      } else {
        same = lhs == rhs;
        if (!same && (lhs->py() == Py_None || rhs->py() == Py_None)) same = false;
      }
      push(TracedValue::constant(PyRef::borrow((same != (n.arg == 1)) ? Py_True : Py_False)));
      return;
    }
    case Op::ContainsOp: {
      ValuePtr container = pop();
      ValuePtr item = pop();
      bool in = contains(context_, item, container);
      push(TracedValue::constant(PyRef::borrow((in != (n.arg == 1)) ? Py_True : Py_False)));
      return;
    }
    case Op::Jump:
      pc_ = n.target;
      jumped_ = true;
      return;
    case Op::PopJumpIfFalse:
      jump_if(true, false, ins);
      return;
    case Op::PopJumpIfTrue:
      jump_if(true, true, ins);
      return;
    case Op::PopJumpIfNone:
      jump_if(true, true, ins, true);
      return;
    case Op::PopJumpIfNotNone:
      jump_if(true, false, ins, true);
      return;
    case Op::JumpIfFalseOrPop:
      jump_if(false, false, ins);
      return;
    case Op::JumpIfTrueOrPop:
      jump_if(false, true, ins);
      return;
    // GET_YIELD_FROM_ITER (`yield from x`): x's iterator as well, stepped by SEND.
    case Op::GetIter:
    case Op::GetYieldFromIter:
      push(iterator_of(context_, pop()));
      return;
    case Op::ForIter: {
      ValuePtr it = top();
      if (!it->is(TracedValue::Kind::Iterator)) unsupported("iterating a live " + it->describe());
      ValuePtr item = next_item(context_, it);
      if (!item) {
        pop();
        pc_ = n.target;
        jumped_ = true;
        return;
      }
      push(std::move(item));
      return;
    }
    case Op::BeforeWith: {
      ValuePtr manager = pop();
      if (manager->is(TracedValue::Kind::NewObject)) {
        ValuePtr exit = load_attribute(context_, manager, "__exit__");
        ValuePtr entered = call_dunder(context_, manager, "__enter__", {});
        if (!entered) unsupported("'with' on a " + manager->describe() + " without __enter__");
        push(exit);
        push(entered);
        return;
      }
      if (manager->is(TracedValue::Kind::NoOpContext)) {
        push(TracedValue::object(PyRef::borrow(KnownObjects::get()->unchanged_exit.get())));
        push(TracedValue::constant(PyRef::borrow(Py_None)));
        return;
      }
      if (!manager->is(TracedValue::Kind::GradMode)) {
        unsupported("'with' on a " + manager->describe() +
                    " (only torch.no_grad/enable_grad/set_grad_enabled and torch.autocast in its "
                    "current state are traced)");
      }
      auto exit = std::make_shared<TracedValue>();
      exit->kind = TracedValue::Kind::GradModeExit;
      // set_grad_enabled(b) switched the mode when it was called; it restores the mode
      // it found then.
      exit->flag = manager->items.empty() ? context_.grad_enabled : truthiness(manager->items[0]);
      context_.grad_enabled = manager->flag;
      push(exit);
      push(TracedValue::constant(PyRef::borrow(Py_None)));
      return;
    }
    case Op::Call:
      do_call(n.arg, n.index);
      return;
    case Op::CallFunctionEx: {
      ValuePtr kw = (n.arg & 1) ? pop() : nullptr;
      ValuePtr args = pop();
      ValuePtr callable = pop();
      if (!top()->is_null()) {
        // 3.11/3.12 keep a NULL (or self) below the callable; CALL_FUNCTION_EX ignores it.
      }
      pop();
      std::vector<ValuePtr> positional = unpack_items(context_, args);
      KwArgs kwargs;
      if (kw) {
        if (!kw->is(TracedValue::Kind::Dict)) unsupported("**kwargs of a " + kw->describe());
        for (size_t i = 0; i < kw->keys.size(); ++i) {
          PyObject* key = kw->keys[i]->py();
          if (key == nullptr || !PyUnicode_Check(key)) unsupported("non-string keyword name");
          kwargs.emplace_back(PyUnicode_AsUTF8(key), kw->items[i]);
        }
      }
      push(call_value(context_, callable, std::move(positional), std::move(kwargs)));
      return;
    }
    case Op::CallIntrinsic1: {
      auto which = static_cast<frontend::Intrinsic1>(n.arg);
      ValuePtr v = pop();
      std::string_view name = frontend::intrinsic1_name(which);
      if (name == "INTRINSIC_LIST_TO_TUPLE") {
        push(TracedValue::tuple(unpack_items(context_, v)));
      } else if (name == "INTRINSIC_UNARY_POSITIVE") {
        push(unary_operation(context_, "pos", v));
      } else {
        unsupported(std::string("intrinsic ") + std::string(name));
      }
      return;
    }
    case Op::ListToTuple:
      push(TracedValue::tuple(unpack_items(context_, pop())));
      return;
    case Op::MakeFunction: {
      ValuePtr code_value = pop();
      auto fn = std::make_shared<TracedValue>();
      fn->kind = TracedValue::Kind::Function;
      if (n.arg & 0x08) fn->closure = pop();
      if (n.arg & 0x04) {
        pop();  // annotations: not kept, so such a function is not rebuilt after the graph
        fn->flag = true;
      }
      if (n.arg & 0x02) fn->kwdefaults = pop();
      if (n.arg & 0x01) fn->defaults = pop();
      PyObject* code_object = code_value->py();
      if (code_object == nullptr || !PyCode_Check(code_object)) {
        unsupported("internal: MAKE_FUNCTION without a code object");
      }
      fn->code_object = code_value->obj;
      fn->code = context_.code_info(code_object);
      fn->globals = scope_.globals;
      fn->qualname = fn->code->qualname;
      // The new function's globals scope is this frame's.
      fn->source = scope_.dict_source;
      push(fn);
      return;
    }
    case Op::BuildTuple:
      push(TracedValue::tuple(pop_n(static_cast<size_t>(n.arg))));
      return;
    case Op::BuildList:
      push(TracedValue::list(pop_n(static_cast<size_t>(n.arg)), true));
      return;
    case Op::BuildSet: {
      std::vector<ValuePtr> items = pop_n(static_cast<size_t>(n.arg));
      PyRef set = PyRef::steal(PySet_New(nullptr));
      for (const auto& item : items) {
        PyRef o = concrete_object(item);
        if (!o || PySet_Add(set.get(), o.get()) < 0) {
          PyErr_Clear();
          unsupported("a set of non-constant values");
        }
      }
      ValuePtr set_value = TracedValue::constant(set);
      set_value->mutable_here = true;  // made here: add/update may mutate it
      push(set_value);
      return;
    }
    case Op::BuildMap: {
      std::vector<ValuePtr> kv = pop_n(static_cast<size_t>(n.arg) * 2);
      std::vector<ValuePtr> keys, values;
      for (size_t i = 0; i < kv.size(); i += 2) {
        keys.push_back(constant_key(kv[i]));
        values.push_back(kv[i + 1]);
      }
      push(TracedValue::dict(std::move(keys), std::move(values), true));
      return;
    }
    case Op::BuildConstKeyMap: {
      ValuePtr key_tuple = pop();
      // A tuple of as many constant keys as values, or a dict whose keys and values disagree.
      if (!key_tuple->is(TracedValue::Kind::Tuple) ||
          key_tuple->items.size() != static_cast<size_t>(n.arg)) {
        unsupported("BUILD_CONST_KEY_MAP without a tuple of " + std::to_string(n.arg) + " keys");
      }
      std::vector<ValuePtr> keys;
      for (const ValuePtr& key : key_tuple->items) keys.push_back(constant_key(key));
      std::vector<ValuePtr> values = pop_n(static_cast<size_t>(n.arg));
      push(TracedValue::dict(std::move(keys), std::move(values), true));
      return;
    }
    case Op::BuildString: {
      std::vector<ValuePtr> parts = pop_n(static_cast<size_t>(n.arg));
      std::string s;
      for (const auto& p : parts) {
        if (!p->is_constant() || !PyUnicode_Check(p->py())) unsupported("internal: BUILD_STRING");
        s += PyUnicode_AsUTF8(p->py());
      }
      push(string_constant(s));
      return;
    }
    case Op::FormatValue: {
      ValuePtr spec = (n.flags & frontend::kOpFormatSpec) ? pop() : nullptr;
      ValuePtr v = pop();
      push(string_constant(format_value(v, n.arg & 3, spec)));
      return;
    }
    case Op::ListAppend: {
      ValuePtr v = pop();
      ValuePtr list = peek(n.arg);
      require_mutable(list);
      list->items.push_back(v);
      return;
    }
    case Op::ListExtend: {
      ValuePtr iterable = pop();
      ValuePtr list = peek(n.arg);
      require_mutable(list);
      for (auto& item : unpack_items(context_, iterable)) list->items.push_back(item);
      return;
    }
    case Op::SetAdd:
    case Op::SetUpdate: {
      ValuePtr v = pop();
      ValuePtr set = peek(n.arg);
      PyRef o = concrete_object(v);
      if (!set->is_constant() || !PySet_Check(set->py()) || !o) unsupported("a set of tensors");
      int rc =
          n.op == Op::SetAdd ? PySet_Add(set->py(), o.get()) : _PySet_Update(set->py(), o.get());
      if (rc < 0) unsupported_from_python_error("set update");
      return;
    }
    case Op::MapAdd: {
      ValuePtr value = pop();
      ValuePtr key = pop();
      ValuePtr dict = peek(n.arg);
      require_mutable(dict);
      dict->keys.push_back(constant_key(key));
      dict->items.push_back(value);
      return;
    }
    case Op::DictUpdate:
    case Op::DictMerge: {
      ValuePtr other = pop();
      ValuePtr dict = peek(n.arg);
      require_mutable(dict);
      std::vector<ValuePtr> mapping_keys, mapping_values;
      if (new_object_mapping_items(context_, other, &mapping_keys, &mapping_values)) {
        other = TracedValue::dict(std::move(mapping_keys), std::move(mapping_values), true);
      }
      if (!other->is(TracedValue::Kind::Dict)) unsupported("** of a " + other->describe());
      for (size_t i = 0; i < other->keys.size(); ++i) {
        bool replaced = false;
        for (size_t j = 0; j < dict->keys.size(); ++j) {
          int eq = PyObject_RichCompareBool(dict->keys[j]->py(), other->keys[i]->py(), Py_EQ);
          if (eq < 0) unsupported_from_python_error("dict key comparison");
          if (eq) {
            if (n.op == Op::DictMerge) unsupported("duplicate keyword argument");
            dict->items[j] = other->items[i];
            replaced = true;
          }
        }
        if (!replaced) {
          dict->keys.push_back(other->keys[i]);
          dict->items.push_back(other->items[i]);
        }
      }
      return;
    }
    case Op::UnpackSequence: {
      std::vector<ValuePtr> items = unpack_items(context_, pop());
      if (items.size() != static_cast<size_t>(n.arg)) {
        unsupported("unpacking " + std::to_string(items.size()) + " values into " +
                    std::to_string(n.arg));
      }
      for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
      return;
    }
    case Op::UnpackEx: {
      std::vector<ValuePtr> items = unpack_items(context_, pop());
      size_t before = static_cast<size_t>(n.arg & 0xFF);
      size_t after = static_cast<size_t>(n.arg >> 8);
      if (items.size() < before + after) unsupported("not enough values to unpack");
      std::vector<ValuePtr> middle(items.begin() + static_cast<long>(before),
                                   items.end() - static_cast<long>(after));
      for (size_t i = 0; i < after; ++i) push(items[items.size() - 1 - i]);
      push(TracedValue::list(std::move(middle), true));
      for (size_t i = before; i-- > 0;) push(items[i]);
      return;
    }
    case Op::GetLen: {
      ValuePtr v = top();
      std::vector<ValuePtr> items = unpack_items(context_, v);
      push(TracedValue::constant(PyRef::steal(PyLong_FromSize_t(items.size()))));
      return;
    }
    case Op::ReturnGenerator:
      if (!generator_) unsupported("internal: a generator frame without a consumer");
      push(TracedValue::constant(PyRef::borrow(Py_None)));  // popped by the next POP_TOP
      return;
    case Op::YieldValue:
      if (!generator_) unsupported("yield outside a generator the VM runs");
      yielded_ = pop();  // run() returns; the next run() goes on after it
      push(TracedValue::constant(PyRef::borrow(Py_None)));  // the value sent in: None
      return;
    case Op::LoadAssertionError:
      push(TracedValue::object(PyRef::borrow(PyExc_AssertionError)));
      return;
    case Op::RaiseVarargs:
      if (n.arg == 1) raise(pop());
      if (n.arg == 2) {
        ValuePtr cause = pop();
        raise(pop(), cause);
      }
      if (n.arg == 0 && context_.handled_exception) raise(context_.handled_exception);
      unsupported("raise statement reached while tracing");
    case Op::Reraise: {
      // Pops the exception only: with an oparg, the lasti below it is read in place (the
      // handler the exception unwinds to cuts the stack to its own depth).
      raise(pop());
    }
    case Op::PushExcInfo: {
      ValuePtr exception = pop();
      push(context_.handled_exception ? context_.handled_exception
                                      : TracedValue::constant(PyRef::borrow(Py_None)));
      context_.handled_exception = exception;
      push(exception);
      return;
    }
    case Op::PopExcept: {
      if (is_root_ && !handler_origins_.empty()) handler_origins_.pop_back();
      ValuePtr previous = pop();
      context_.handled_exception =
          previous->is_constant() && previous->py() == Py_None ? nullptr : previous;
      return;
    }
    case Op::CheckExcMatch: {
      ValuePtr type = pop();
      PyRef classes = concrete_object(type);
      PyObject* exception = top()->py();
      if (!classes || exception == nullptr) unsupported("except with an abstract class");
      bool matches = PyErr_GivenExceptionMatches(exception, classes.get()) != 0;
      push(TracedValue::constant(PyRef::borrow(matches ? Py_True : Py_False)));
      return;
    }
    case Op::CheckEgMatch: {
      // except*: [exception, class] -> [rest, match] when some of the exception matches,
      // the clause then handling `match`; else [exception, None]. The classes are checked
      // as CPython checks them (no ExceptionGroup class, only exception classes).
      ValuePtr type = pop();
      PyRef classes = concrete_object(type);
      PyObject* exception = top()->py();
      if (!classes || exception == nullptr || !PyExceptionInstance_Check(exception)) {
        unsupported("except* with an abstract class or exception");
      }
      auto valid = [](PyObject* c) {
        int group =
            PyExceptionClass_Check(c) ? PyObject_IsSubclass(c, PyExc_BaseExceptionGroup) : -1;
        if (group < 0) PyErr_Clear();
        return group == 0;
      };
      bool all_valid = PyTuple_Check(classes.get()) ? true : valid(classes.get());
      for (Py_ssize_t i = 0; PyTuple_Check(classes.get()) && i < PyTuple_GET_SIZE(classes.get());
           ++i) {
        all_valid = all_valid && valid(PyTuple_GET_ITEM(classes.get(), i));
      }
      if (!all_valid) unsupported("except* with a class it does not take (CPython raises)");
      bool is_group =
          PyObject_TypeCheck(exception, reinterpret_cast<PyTypeObject*>(PyExc_BaseExceptionGroup));
      PyRef match = PyRef::borrow(Py_None);
      PyRef rest = PyRef::borrow(Py_None);
      if (PyErr_GivenExceptionMatches(exception, classes.get())) {
        if (!is_group) {
          // CPython wraps it in a new group whose traceback is the running frame's.
          unsupported("except* catching an exception that is not a group");
        }
        match = PyRef::borrow(exception);
      } else if (is_group) {
        if (!is_plain_exception_group(exception)) {
          unsupported("except* splitting a subclass of ExceptionGroup (its derive() runs)");
        }
        PyRef pair = PyRef::steal(PyObject_CallMethod(exception, "split", "O", classes.get()));
        if (!pair || !PyTuple_Check(pair.get()) || PyTuple_GET_SIZE(pair.get()) != 2) {
          unsupported_from_python_error("splitting an exception group");
        }
        match = PyRef::borrow(PyTuple_GET_ITEM(pair.get(), 0));
        rest = PyRef::borrow(PyTuple_GET_ITEM(pair.get(), 1));
      }
      if (match.get() == Py_None) {
        push(TracedValue::constant(std::move(match)));
        return;
      }
      pop();
      push(TracedValue::constant(std::move(rest)));
      push(TracedValue::constant(std::move(match)));
      context_.handled_exception = top();
      return;
    }
    case Op::PrepReraiseStar: {
      // The end of try ... except*: [original, raised] -> what to re-raise (None: nothing),
      // from the list of what the clauses raised and the part none of them matched.
      ValuePtr raised = pop();
      ValuePtr original = pop();
      if (!raised->is(TracedValue::Kind::List) || original->py() == nullptr ||
          !PyExceptionInstance_Check(original->py())) {
        unsupported("except* over values the trace does not hold");
      }
      if (PyObject_TypeCheck(original->py(),
                             reinterpret_cast<PyTypeObject*>(PyExc_BaseExceptionGroup)) &&
          !is_plain_exception_group(original->py())) {
        unsupported("except* over a subclass of ExceptionGroup (its derive() runs)");
      }
      PyRef list = PyRef::steal(PyList_New(0));
      for (const ValuePtr& item : raised->items) {
        PyObject* e = item->py();
        if (!list || e == nullptr || (e != Py_None && !PyExceptionInstance_Check(e)) ||
            PyList_Append(list.get(), e) < 0) {
          unsupported("except* with an exception the trace does not hold");
        }
      }
      PyRef result = PyRef::steal(prep_reraise_star(original->py(), list.get()));
      if (!result) unsupported_from_python_error("ending an except* statement");
      push(TracedValue::constant(std::move(result)));
      return;
    }
    case Op::WithExceptStart: {
      // [exit, lasti, previous exception, exception]: exit(type, exception, traceback),
      // whose truth decides whether the exception is suppressed.
      ValuePtr exception = top();
      ValuePtr exit = peek(4);
      PyObject* raised = exception->py();
      if (raised == nullptr || !PyExceptionInstance_Check(raised)) {
        unsupported("leaving a with block by a " + exception->describe());
      }
      PyObject* traceback = PyException_GetTraceback(raised);  // new or null
      ValuePtr traceback_value = TracedValue::constant(
          traceback != nullptr ? PyRef::steal(traceback) : PyRef::borrow(Py_None));
      ValuePtr type =
          TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(raised))));
      push(call_value(context_, exit, {type, exception, traceback_value}, {}));
      return;
    }
    case Op::Send: {
      // [receiver, sent]: the receiver's next item, or, once it is finished, what it
      // returned in its place and a jump past the delegation (3.12's END_SEND included).
      // Consumers the trace runs only ask for items, so the value sent is None.
      ValuePtr sent = pop();
      ValuePtr receiver = top();
      if (!sent->is_constant() || sent->py() != Py_None) unsupported("send() into yield from");
      if (!receiver->is(TracedValue::Kind::Iterator)) {
        unsupported("yield from a live " + receiver->describe());
      }
      if (ValuePtr item = next_item(context_, receiver)) {
        push(std::move(item));
        return;
      }
      pop();
      ValuePtr result = receiver->lazy ? receiver->lazy->returned() : nullptr;
      push(result ? result : TracedValue::constant(PyRef::borrow(Py_None)));
      pc_ = n.target;
      jumped_ = true;
      return;
    }
    case Op::MatchSequence:
      push(TracedValue::constant(
          PyRef::borrow(matches_sequence(context_, top()) ? Py_True : Py_False)));
      return;
    case Op::MatchMapping:
      push(TracedValue::constant(
          PyRef::borrow(matches_mapping(context_, top()) ? Py_True : Py_False)));
      return;
    case Op::MatchKeys: {
      ValuePtr keys = top();
      ValuePtr subject = peek(2);
      push(match_keys(context_, subject, keys));
      return;
    }
    case Op::MatchClass: {
      ValuePtr names = pop();
      ValuePtr cls = pop();
      ValuePtr subject = pop();
      push(match_class(context_, subject, cls, n.arg, names));
      return;
    }
    default: {
      Unsupported refused;
      refused.reason = "bytecode " + std::string(frontend::op_name(n.op)) + " (" +
                       std::string(frontend::opcode_name(ins.opcode)) + ")";
      refused.refused = true;
      throw refused;
    }
  }
}

}  // namespace dynvm::vm
