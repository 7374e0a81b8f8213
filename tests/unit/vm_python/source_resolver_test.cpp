// Resolving sources from a call: every source kind, memoisation within one check, and
// failures that make guards fail without leaving a Python error.
#include <string>

#include "catch.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/guard_eval.h"
#include "dynvm/vm/source_resolver.h"
#include "python_fixture.h"

using dynvm::PyRef;
using dynvm::test::eval;
using dynvm::test::exec;
using dynvm::vm::GuardFailure;
using dynvm::vm::GuardSet;
using dynvm::vm::Source;
using dynvm::vm::SourcePtr;
using dynvm::vm::SourceResolver;
using dynvm::vm::SourceTable;

namespace {

const char* kObjects = R"(
import collections
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.layers = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()])
        self.register_buffer('scale', torch.ones(2))
        self.limit = 4

reads = [0]
class Counted:
    @property
    def value(self):
        reads[0] += 1
        return self._value
    @property
    def broken(self):
        raise ValueError('broken property')

net = Net()
counted = Counted()
counted._value = torch.zeros(2)
cfg = {'lr': 0.5, 'steps': [1, 2, 3], 'labels': {7: 'seven'}}
ordered = collections.OrderedDict(a=1)
import weakref
class Target:
    pass
kept = Target()
kept.name = 'kept'
alive = weakref.ref(kept)
dead = weakref.ref(Target())
pair = ('first', 'second')

def make_closure():
    captured = torch.zeros(1)
    def inner():
        return captured
    return inner
closure_fn = make_closure()
)";

// Resolves `source` against a call with locals (self=net, counted, cfg, pair) and the
// snippet's globals; the result's repr, or "<unresolved>".
std::string resolve_text(const PyRef& ns, const SourcePtr& source) {
  dynvm::test::Call call = dynvm::test::call_with(ns, {"net", "counted", "cfg", "pair"});
  call.closure = eval(ns, "closure_fn.__closure__");
  PyRef value = dynvm::vm::resolve_source(source, call.inputs());
  CHECK_FALSE(dynvm::test::python_error_pending());
  if (!value) return "<unresolved>";
  PyRef repr = PyRef::steal(PyObject_Repr(value.get()));
  return PyUnicode_AsUTF8(repr.get());
}

const auto kSelf = Source::local("self", 0);

SourcePtr member(Source::Kind kind, const SourcePtr& base, const std::string& name) {
  return Source::module_member(kind, base, name);
}

}  // namespace

TEST_CASE("every source kind resolves") {
  PyRef ns = dynvm::test::run(kObjects);
  CHECK(resolve_text(ns, Source::attr(kSelf, "limit")) == "4");
  CHECK(resolve_text(ns, Source::key(Source::local("cfg", 2), "lr")) == "0.5");
  CHECK(resolve_text(ns, Source::item(Source::key(Source::local("cfg", 2), "steps"), -1)) == "3");
  CHECK(resolve_text(ns, Source::item(Source::local("pair", 3), 1)) == "'second'");
  CHECK(resolve_text(ns, Source::key(Source::global("ordered"), "a")) == "1");
  CHECK(resolve_text(ns, Source::global("reads")) == "[0]");
  CHECK(resolve_text(ns, Source::builtin("len")) == "<built-in function len>");
  CHECK(resolve_text(ns, Source::closure("captured", 0)) == "tensor([0.])");
  CHECK(resolve_text(ns, Source::module("sys")) == "<module 'sys' (built-in)>");
  CHECK(resolve_text(ns, Source::item(Source::key(Source::local("cfg", 2), "labels"), 7)) ==
        "'seven'");  // a dict with integer keys
  auto fc = member(Source::Kind::ModuleChild, kSelf, "fc");
  CHECK(resolve_text(ns, fc) == "Linear(in_features=3, out_features=2, bias=True)");
  CHECK(resolve_text(ns, Source::attr(member(Source::Kind::ModuleParam, fc, "bias"), "shape")) ==
        "torch.Size([2])");
  CHECK(resolve_text(ns, member(Source::Kind::ModuleBuffer, kSelf, "scale")) == "tensor([1., 1.])");
  // ModuleList.__getitem__, through PyObject_GetItem.
  CHECK(resolve_text(ns, Source::item(member(Source::Kind::ModuleChild, kSelf, "layers"), 1)) ==
        "Tanh()");
  CHECK(resolve_text(ns, Source::key(Source::attr(kSelf, "__dict__"), "limit")) == "4");
  // A weak reference's target, None once it is gone.
  CHECK(resolve_text(ns, Source::attr(Source::weakref_target(Source::global("alive")), "name")) ==
        "'kept'");
  CHECK(resolve_text(ns, Source::weakref_target(Source::global("dead"))) == "None");
}

TEST_CASE("unresolvable sources give nothing and leave no error") {
  PyRef ns = dynvm::test::run(kObjects);
  CHECK(resolve_text(ns, Source::attr(kSelf, "missing")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::attr(Source::local("counted", 1), "broken")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::key(Source::local("cfg", 2), "momentum")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::item(Source::local("pair", 3), 2)) == "<unresolved>");
  CHECK(resolve_text(ns, Source::item(Source::local("pair", 3), -3)) == "<unresolved>");
  CHECK(resolve_text(ns, Source::item(Source::local("cfg", 2), 0)) == "<unresolved>");  // KeyError
  CHECK(resolve_text(ns, Source::local("beyond", 9)) == "<unresolved>");
  CHECK(resolve_text(ns, Source::closure("captured", 1)) == "<unresolved>");
  CHECK(resolve_text(ns, Source::global("missing")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::builtin("missing")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::module("dynvm_no_such_module")) == "<unresolved>");
  CHECK(resolve_text(ns, member(Source::Kind::ModuleParam, kSelf, "missing")) == "<unresolved>");
  CHECK(resolve_text(ns, member(Source::Kind::ModuleParam, Source::local("cfg", 2), "lr")) ==
        "<unresolved>");  // a dict has no instance dict
  CHECK(resolve_text(ns, Source::attr(Source::attr(kSelf, "missing"), "deeper")) == "<unresolved>");
  CHECK(resolve_text(ns, Source::weakref_target(Source::global("ordered"))) == "<unresolved>");

  dynvm::test::Call unbound = dynvm::test::call_with(ns, {"no_such_name"});
  CHECK_FALSE(dynvm::vm::resolve_source(kSelf, unbound.inputs()));
}

TEST_CASE("a source shared by several guards is read once per check") {
  PyRef ns = dynvm::test::run(kObjects);
  GuardSet guards;
  auto counted = Source::local("counted", 1);
  auto value = Source::attr(counted, "value");
  PyRef tensor = eval(ns, "counted._value");
  REQUIRE(guards.add_type_match(value, tensor.get()));
  REQUIRE(guards.add_tensor_match(value, tensor.get()));
  REQUIRE(
      guards.add_type_match(Source::attr(value, "shape"), eval(ns, "counted._value.shape").get()));
  CHECK(guards.sources().size() == 3);
  exec(ns, "reads[0] = 0");
  dynvm::test::Call call = dynvm::test::call_with(ns, {"net", "counted"});
  CHECK(dynvm::vm::guards_hold(guards, call.inputs()));
  CHECK(PyLong_AsLong(eval(ns, "reads[0]").get()) == 1);
  CHECK(dynvm::vm::guards_hold(guards, call.inputs()));
  CHECK(PyLong_AsLong(eval(ns, "reads[0]").get()) == 2);  // once per check, not across

  // The resolver itself: same object each time, one read.
  exec(ns, "reads[0] = 0");
  dynvm::vm::FrameInputs inputs = call.inputs();
  SourceResolver resolver(guards.sources(), inputs);
  int slot = guards.sources().find("L['counted'].value");
  PyObject* first = resolver.resolve(slot);
  CHECK(first != nullptr);
  CHECK(resolver.resolve(slot) == first);
  CHECK(PyLong_AsLong(eval(ns, "reads[0]").get()) == 1);
}

TEST_CASE("a guard on an unreadable source fails with the reason") {
  PyRef ns = dynvm::test::run(kObjects);
  GuardSet guards;
  REQUIRE(guards.add_type_match(kSelf, eval(ns, "net").get()));
  auto missing = Source::attr(kSelf, "missing");
  REQUIRE(guards.add_constant_match(Source::attr(missing, "deeper"), eval(ns, "1").get()));
  dynvm::test::Call call = dynvm::test::call_with(ns, {"net"});
  dynvm::vm::FrameInputs inputs = call.inputs();
  CHECK_FALSE(dynvm::vm::guards_hold(guards, inputs));
  CHECK_FALSE(dynvm::test::python_error_pending());
  GuardFailure why;
  CHECK_FALSE(dynvm::vm::guards_hold(guards, inputs, &why));
  CHECK_FALSE(dynvm::test::python_error_pending());
  CHECK(why.index == 1);
  CHECK(why.reason ==
        "L['self'].missing could not be read: AttributeError: 'Net' object has no attribute "
        "'missing'");

  GuardSet keyed;
  REQUIRE(
      keyed.add_constant_match(Source::key(Source::local("cfg", 2), "lr"), eval(ns, "0.5").get()));
  dynvm::test::Call without_key = dynvm::test::call_with(ns, {"net", "counted", "cfg"});
  CHECK(dynvm::vm::guards_hold(keyed, without_key.inputs()));
  exec(ns, "del cfg['lr']");
  dynvm::vm::FrameInputs changed = without_key.inputs();
  CHECK_FALSE(dynvm::vm::guards_hold(keyed, changed, &why));
  CHECK(why.reason == "L['cfg']['lr'] could not be read: not found");

  GuardSet property;
  REQUIRE(property.add_id_match(Source::attr(Source::local("counted", 1), "broken"), Py_None));
  CHECK_FALSE(dynvm::vm::guards_hold(property, changed, &why));
  CHECK(why.reason == "L['counted'].broken could not be read: ValueError: broken property");
  CHECK_FALSE(dynvm::test::python_error_pending());
}

TEST_CASE("source tables number each source once, bases first") {
  dynvm::test::ensure_python();
  SourceTable table;
  auto weight =
      member(Source::Kind::ModuleParam, member(Source::Kind::ModuleChild, kSelf, "fc"), "weight");
  int slot = table.intern(weight);
  CHECK(slot == 2);
  CHECK(table.size() == 3);
  CHECK(table[0].text == "L['self']");
  CHECK(table[1].base == 0);
  CHECK(table[2].base == 1);
  CHECK(table.intern(Source::local("self", 0)) == 0);
  CHECK(table.find("L['self'].fc") == 1);
  CHECK(table.find("L['other']") == -1);
}
