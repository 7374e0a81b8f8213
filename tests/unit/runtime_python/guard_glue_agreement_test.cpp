// Compiled guards against the reference interpreter: random guard sets over random sources,
// checked on random calls and after random mutations of the objects they read. Both must
// decide the same, name the same first failing guard and leave no Python error.
#include <Python.h>

#include <array>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/glue_jit.h"
#include "dynvm/runtime/guard_glue.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/guard_eval.h"
#include "dynvm/vm/source_resolver.h"
#include "python_fixture.h"

using dynvm::PyRef;
using dynvm::runtime::GuardGlue;
using dynvm::vm::FrameInputs;
using dynvm::vm::GuardFailure;
using dynvm::vm::GuardKind;
using dynvm::vm::GuardSet;
using dynvm::vm::Source;
using dynvm::vm::SourcePtr;

namespace {

// Fresh objects for each round: mutations of one round never reach the next.
const char* kWorld = R"(
import collections
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.layers = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()])
        self.register_buffer('scale', torch.ones(2))
        self.limit = 4

class Box:
    def __init__(self, a, b):
        self.a = a
        self.b = b
    @property
    def broken(self):
        raise ValueError('broken property')

def make_cell(value):
    def inner():
        return value
    def set_value(new):
        nonlocal value
        value = new
    return inner, set_value

net1 = Net()
net2 = Net()
t1 = torch.zeros(2)
t2 = torch.zeros(2, 3)
t3 = torch.zeros(3, 2).t()
t4 = torch.zeros(2, dtype=torch.float64)
t5 = torch.zeros(2, requires_grad=True)
p1 = torch.nn.Parameter(torch.zeros(2))
box1 = Box(1, t1)
box2 = Box('a', (1, 2))
d1 = {'a': 1, 'b': t1}
d2 = {'a': 1.5}
od = collections.OrderedDict(a=1, b=2)
lst = [t1, 2, 'x']
tup = (1, 'a', t2)
inner, set_cell = make_cell(t1)
g0 = 3
g1 = t1
g2 = box1
g3 = [1, 2]
pool = [0, 1, 7, -3, 2 ** 70, 1.0, -0.0, 0.0, float('nan'), True, False, None, 'x', 'xy', b'b',
        (1, 2), (1, 'a'), [], [1, 2], {}, net1, net2, torch.nn.Linear(2, 2), t1, t2, t3, t4, t5,
        p1, box1, box2, d1, d2, od, lst, tup, torch, object(), len, Box]
)";

// Statements that change what the guards read; each runs in a try block.
const std::array<const char*, 38> kMutations = {
    "box1.a = 5",
    "box1.a = torch.ones(2)",
    "del box1.a",
    "box1.b = 'x'",
    "box2.__dict__.clear()",
    "d1['c'] = 1",
    "d1.pop('a')",
    "d1['a'] = 2.0",
    "d2.clear()",
    "od.move_to_end('a')",
    "lst.append(3)",
    "lst.clear()",
    "lst[0] = t4",
    "net1.fc = torch.nn.Linear(3, 2)",
    "net1.limit = 5",
    "net1.register_forward_hook(lambda *args: None)",
    "net2.fc.weight.requires_grad_(False)",
    "del net2.layers",
    "net1.layers.append(torch.nn.ReLU())",
    "net1.scale = torch.ones(3)",
    "t1.resize_(3)",
    "t2.requires_grad_(True)",
    "torch.set_grad_enabled(False)",
    "torch.set_default_dtype(torch.float64)",
    "torch.nn.modules.module.register_module_forward_hook(lambda *args: None)",
    "g0 = 4",
    "g1 = t4",
    "del g2",
    "g3 = (1, 2)",
    "set_cell(3)",
    "set_cell(t2)",
    "pool.reverse()",
    "tup = tup + (1,)",
    "net1.training = False",
    "net2.fc.in_features = 4",
    "net2.fc.training = net2.fc.training",
    "Net.limit = property(lambda self: 9)",
    "torch.nn.Linear.extra = 1",
};

// Undoes the global state the mutations may change.
const char* kRestore = R"(
for name in ('limit',):
    if name in Net.__dict__:
        delattr(Net, name)
if 'extra' in torch.nn.Linear.__dict__:
    del torch.nn.Linear.extra
torch.set_grad_enabled(True)
torch.set_default_dtype(torch.float32)
for d in (torch.nn.modules.module._global_forward_hooks,):
    d.clear()
)";

class Round {
 public:
  explicit Round(uint32_t seed) : random_(seed) {
    ns_ = dynvm::test::run(kWorld);
    pool_ = dynvm::test::get(ns_, "pool");
  }

  PyRef pick() {
    Py_ssize_t size = PyList_GET_SIZE(pool_.get());
    return PyRef::borrow(PyList_GET_ITEM(pool_.get(), below(static_cast<int>(size))));
  }

  dynvm::test::Call call(int local_count, int stack_count) {
    dynvm::test::Call c;
    for (int i = 0; i < local_count; ++i) c.locals.push_back(chance(12) ? PyRef() : pick());
    for (int i = 0; i < stack_count; ++i) c.stack.push_back(pick());
    c.closure = dynvm::test::eval(ns_, "inner.__closure__");
    c.globals = ns_;
    c.builtins = PyRef::borrow(PyEval_GetBuiltins());
    return c;
  }

  // A call like `base` with some locals and stack entries replaced or unbound.
  dynvm::test::Call vary(const dynvm::test::Call& base) {
    dynvm::test::Call c = base;
    for (PyRef& local : c.locals) {
      if (chance(4)) local = chance(6) ? PyRef() : pick();
    }
    for (PyRef& entry : c.stack) {
      if (chance(4)) entry = pick();
    }
    return c;
  }

  void mutate() {
    std::string statement = kMutations[static_cast<size_t>(below(kMutations.size()))];
    dynvm::test::exec(ns_, "try:\n    " + statement + "\nexcept Exception:\n    pass\n");
  }

  void restore() { dynvm::test::exec(ns_, kRestore); }

  SourcePtr random_source() {
    SourcePtr source;
    switch (below(6)) {
      case 0:
      case 1:
        // One index per name, as in a real frame; "l9" is out of range (unreadable).
        if (chance(5)) {
          source = Source::local("l9", 5);
        } else {
          int n = below(4);
          source = Source::local("l" + std::to_string(n), n);
        }
        break;
      case 2:
        source = Source::stack(below(3));
        break;
      case 3: {
        static const std::array<const char*, 6> names = {"g0", "g1", "g2", "g3", "net1", "missing"};
        source = Source::global(names[static_cast<size_t>(below(names.size()))]);
        break;
      }
      case 4:
        source = chance(2) ? Source::builtin(chance(4) ? "nope" : "len") : Source::closure("c", 0);
        break;
      default:
        source = Source::global(chance(2) ? "box1" : chance(2) ? "d1" : "net2");
        break;
    }
    int depth = below(4);
    for (int i = 0; i < depth; ++i) source = extend(source);
    return source;
  }

  SourcePtr extend(const SourcePtr& base) {
    static const std::array<const char*, 9> attrs = {
        "a", "b", "fc", "weight", "training", "broken", "__dict__", "limit", "missing"};
    static const std::array<const char*, 4> keys = {"a", "b", "c", "lr"};
    static const std::array<int64_t, 5> indices = {0, 1, -1, 2, 5};
    switch (below(6)) {
      case 0:
      case 1:
        return Source::attr(base, attrs[static_cast<size_t>(below(attrs.size()))]);
      case 2:
        return Source::key(base, keys[static_cast<size_t>(below(keys.size()))]);
      case 3:
        return Source::item(base, indices[static_cast<size_t>(below(indices.size()))]);
      case 4:
        return Source::module_member(
            chance(2) ? Source::Kind::ModuleParam : Source::Kind::ModuleBuffer, base,
            chance(2) ? (chance(2) ? "weight" : "bias") : "scale");
      default:
        return Source::module_member(Source::Kind::ModuleChild, base, chance(2) ? "fc" : "layers");
    }
  }

  // Adds a random guard on `source`'s value in `call` (or a global-state guard); false when
  // the value could not be read or the chosen kind does not apply to it.
  bool add_guard(GuardSet& guards, dynvm::test::Call& call) {
    if (chance(8)) {
      switch (below(4)) {
        case 0:
          guards.add_grad_mode(!chance(8));
          return true;
        case 1:
          guards.add_default_dtype();
          return true;
        case 2:
          guards.add_autocast();
          return true;
        default:
          return static_cast<bool>(guards.add_no_global_hooks());
      }
    }
    SourcePtr source = random_source();
    PyRef value = dynvm::vm::resolve_source(source, call.inputs());
    REQUIRE_FALSE(dynvm::test::python_error_pending());
    if (!value) return false;
    PyObject* v = value.get();
    bool added = false;
    switch (below(11)) {
      case 0:
        added = static_cast<bool>(guards.add_type_match(source, v));
        break;
      case 1:
        added = static_cast<bool>(guards.add_id_match(source, v));
        break;
      case 2:
        added = static_cast<bool>(guards.add_constant_match(source, v));
        break;
      case 3:
        added = static_cast<bool>(guards.add_tensor_match(source, v));
        break;
      case 4:
        added = static_cast<bool>(guards.add_len_match(source, v));
        break;
      case 5:
        added = static_cast<bool>(guards.add_dict_keys(source, v));
        break;
      case 6:
        added = PyDict_Check(v) ? static_cast<bool>(guards.add_dict_version(source, v))
                                : static_cast<bool>(guards.add_module_dict_version(source, v));
        break;
      case 7:
        added = static_cast<bool>(guards.add_no_hooks(source, v));
        break;
      case 8:
        added = static_cast<bool>(guards.add_module_attrs(source, v));
        break;
      case 9: {
        // The same object under another source when one turns up, else any other source.
        SourcePtr first = random_source();
        for (int attempt = 0; attempt < 16; ++attempt) {
          SourcePtr other = random_source();
          PyRef same = dynvm::vm::resolve_source(other, call.inputs());
          dynvm::test::python_error_pending();
          if (same.get() == v && other->to_string() != source->to_string()) {
            first = other;
            break;
          }
        }
        added = static_cast<bool>(guards.add_duplicate_input(source, first));
        break;
      }
      default:
        // A tensor guard where one applies, else a type guard: the common case in traces.
        added = static_cast<bool>(guards.add_tensor_match(source, v)) ||
                static_cast<bool>(guards.add_type_match(source, v));
        break;
    }
    dynvm::test::python_error_pending();  // a refused guard may leave its reason set
    return added;
  }

  int below(size_t n) { return static_cast<int>(random_() % n); }
  bool chance(int one_in) { return below(static_cast<size_t>(one_in)) == 0; }

 private:
  std::mt19937 random_;
  PyRef ns_;
  PyRef pool_;
};

// The interpreter's verdict: -1, or the index of the first failing guard.
int64_t interpreted(const GuardSet& guards, const FrameInputs& inputs) {
  bool fast = dynvm::vm::guards_hold(guards, inputs);
  GuardFailure why;
  bool verbose = dynvm::vm::guards_hold(guards, inputs, &why);
  REQUIRE(fast == verbose);
  return verbose ? -1 : static_cast<int64_t>(why.index);
}

}  // namespace

TEST_CASE("compiled guards agree with the interpreter on random guards, calls and mutations") {
  dynvm::test::ensure_python();
  if (!dynvm::codegen::glue_jit_available()) {
    WARN("skipped: built without the CPU JIT");
    return;
  }
  int checks = 0;
  int passes = 0;
  int kept_values = 0;
  std::map<GuardKind, int> failures_by_kind;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    INFO("seed " << seed);
    Round round(seed);
    dynvm::test::Call traced = round.call(4, 3);
    GuardSet guards;
    int wanted = 1 + round.below(14);
    for (int attempt = 0; attempt < 60 && static_cast<int>(guards.size()) < wanted; ++attempt) {
      round.add_guard(guards, traced);
    }
    auto glue = GuardGlue::compile(guards, "random_" + std::to_string(seed));
    REQUIRE(glue);
    INFO("guards:\n" << guards.to_string());
    for (int step = 0; step < 12; ++step) {
      dynvm::test::Call call = step == 0 ? traced : round.vary(traced);
      if (step > 0 && round.chance(2)) round.mutate();
      FrameInputs inputs = call.inputs();
      int64_t expected = interpreted(guards, inputs);
      dynvm::runtime::GlueValues kept;
      int64_t compiled = (*glue)->first_failure(inputs, round.chance(2) ? &kept : nullptr);
      CHECK_FALSE(dynvm::test::python_error_pending());
      INFO("step " << step);
      REQUIRE(compiled == expected);
      // What a passing check kept is what reading the source gives (the graph's inputs are
      // taken from there).
      for (int slot = 0; expected < 0 && slot < static_cast<int>(guards.sources().size()); ++slot) {
        PyObject* value = kept.value(slot);
        if (value == nullptr) continue;
        // Some reads make a new object each time (a tensor's item, a bound method): for
        // those, only the type can be compared.
        INFO("kept slot " << slot << ": " << guards.sources()[slot].text);
        PyRef again = dynvm::vm::resolve_source(guards.sources()[slot].source, inputs);
        PyRef third = dynvm::vm::resolve_source(guards.sources()[slot].source, inputs);
        REQUIRE(again);
        CHECK(Py_TYPE(again.get()) == Py_TYPE(value));
        if (again.get() == third.get()) {
          CHECK(again.get() == value);
          ++kept_values;
        }
      }
      ++checks;
      if (expected < 0) {
        ++passes;
      } else {
        ++failures_by_kind[guards[static_cast<size_t>(expected)].kind];
      }
    }
    round.restore();
  }
  // The rounds must exercise both outcomes and failures of many kinds, or they prove little.
  CHECK(checks == 150 * 12);
  CHECK(passes > 100);
  CHECK(checks - passes > 300);
  CHECK(failures_by_kind.size() >= 8);
  CHECK(kept_values > 100);
}

TEST_CASE("compiled guards keep an error pending on entry and add none") {
  dynvm::test::ensure_python();
  if (!dynvm::codegen::glue_jit_available()) {
    WARN("skipped: built without the CPU JIT");
    return;
  }
  PyRef ns =
      dynvm::test::run("import torch\nclass Box: pass\nbox = Box()\nbox.a = torch.zeros(2)\n");
  GuardSet guards;
  auto a = Source::attr(Source::local("box", 0), "a");
  REQUIRE(guards.add_tensor_match(a, dynvm::test::eval(ns, "box.a").get()));
  auto glue = GuardGlue::compile(guards, "pending");
  REQUIRE(glue);
  dynvm::test::Call call = dynvm::test::call_with(ns, {"box"});
  FrameInputs inputs = call.inputs();
  PyErr_SetString(PyExc_KeyError, "pending");
  CHECK((*glue)->first_failure(inputs) == -1);
  REQUIRE(PyErr_ExceptionMatches(PyExc_KeyError));
  PyErr_Clear();
  dynvm::test::exec(ns, "del box.a");
  CHECK((*glue)->first_failure(inputs) == 0);  // the attribute read fails; no AttributeError left
  CHECK_FALSE(dynvm::test::python_error_pending());
}

TEST_CASE("guards lower to inline checks for locals, types and identities") {
  dynvm::test::ensure_python();
  PyRef ns = dynvm::test::run("import torch\nx = torch.zeros(2)\nn = 3\n");
  GuardSet guards;
  REQUIRE(guards.add_tensor_match(Source::local("x", 0), dynvm::test::eval(ns, "x").get()));
  REQUIRE(guards.add_type_match(Source::local("n", 1), dynvm::test::eval(ns, "n").get()));
  REQUIRE(guards.add_id_match(Source::global("torch"), dynvm::test::eval(ns, "torch").get()));
  std::string text = dynvm::codegen::to_text(GuardGlue::lower(guards, "example"));
  INFO(text);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  // Locals are loaded inline; only the global is read through a helper, and its new
  // reference is stored for release.
  CHECK(count("call read_source(") == 1);
  CHECK(count("store ") == 1);
  // Only the tensor's metadata needs the helper; its type, the int's type and the module's
  // identity are compared inline.
  CHECK(count("call check_guard(") == 1);
  CHECK(count("check_eq ") == 3);
  CHECK(count("check_ult ") == 2);  // both locals are bounds-checked
}
