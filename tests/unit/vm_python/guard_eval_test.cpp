// guards_hold: every guard kind passing and failing, and the explanation of each failure.
#include <string>

#include "catch.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/guard_eval.h"
#include "python_fixture.h"

using dynvm::PyRef;
using dynvm::test::eval;
using dynvm::test::exec;
using dynvm::vm::GuardFailure;
using dynvm::vm::GuardSet;
using dynvm::vm::Source;

namespace {

// Checks `guards` (over L['v'], local 0) for a call passing `value`, with the fast and the
// verbose check, which must agree and leave no Python error. *reason: why it failed.
bool holds_for(const GuardSet& guards, const PyRef& ns, const PyRef& value,
               std::string* reason = nullptr) {
  dynvm::test::Call call = dynvm::test::call_with_value(ns, value);
  dynvm::vm::FrameInputs inputs = call.inputs();
  bool fast = dynvm::vm::guards_hold(guards, inputs);
  CHECK_FALSE(dynvm::test::python_error_pending());
  GuardFailure why;
  bool verbose = dynvm::vm::guards_hold(guards, inputs, &why);
  CHECK_FALSE(dynvm::test::python_error_pending());
  CHECK(fast == verbose);
  if (reason != nullptr) *reason = verbose ? "" : why.reason;
  return fast;
}

// holds_for the value of `expr` in `ns`.
bool holds_for(const GuardSet& guards, const PyRef& ns, const std::string& expr,
               std::string* reason = nullptr) {
  return holds_for(guards, ns, eval(ns, expr), reason);
}

const auto kV = Source::local("v", 0);

}  // namespace

TEST_CASE("TYPE_MATCH compares the exact type, ID_MATCH the object") {
  PyRef ns = dynvm::test::run("import torch\nclass Int(int): pass\nother = object()\n");
  GuardSet types;
  REQUIRE(types.add_type_match(kV, eval(ns, "3").get()));
  std::string reason;
  CHECK(holds_for(types, ns, "7"));
  CHECK_FALSE(holds_for(types, ns, "7.0", &reason));
  CHECK(reason == "L['v'] is 7.0");
  CHECK_FALSE(holds_for(types, ns, "Int(7)", &reason));
  CHECK(reason == "L['v'] is a snippet.Int");

  GuardSet ids;
  REQUIRE(ids.add_id_match(kV, eval(ns, "torch").get()));
  CHECK(holds_for(ids, ns, "torch"));
  CHECK_FALSE(holds_for(ids, ns, "other", &reason));
  CHECK(reason == "L['v'] is another object (a object)");
  GuardSet none;
  REQUIRE(none.add_id_match(kV, Py_None));
  CHECK(holds_for(none, ns, "None"));
  CHECK_FALSE(holds_for(none, ns, "False", &reason));
  CHECK(reason == "L['v'] is another object (False)");
}

TEST_CASE("CONSTANT_MATCH needs the same type and value: 1, 1.0 and True differ") {
  PyRef ns = dynvm::test::run("x = 1\n");
  auto constant = [&](const std::string& expr) {
    GuardSet guards;
    REQUIRE(guards.add_constant_match(kV, eval(ns, expr).get()));
    return guards;
  };
  std::string reason;
  GuardSet one = constant("1");
  CHECK(holds_for(one, ns, "1"));
  CHECK(holds_for(one, ns, "int('1')"));
  CHECK_FALSE(holds_for(one, ns, "1.0", &reason));
  CHECK(reason == "L['v'] is 1.0");
  CHECK_FALSE(holds_for(one, ns, "True", &reason));
  CHECK(reason == "L['v'] is True");
  CHECK_FALSE(holds_for(one, ns, "2"));
  CHECK_FALSE(holds_for(one, ns, "'1'"));

  GuardSet one_float = constant("1.0");
  CHECK(holds_for(one_float, ns, "float('1')"));
  CHECK_FALSE(holds_for(one_float, ns, "1"));
  CHECK_FALSE(holds_for(constant("True"), ns, "1"));
  CHECK(holds_for(constant("True"), ns, "1 == 1"));

  CHECK(holds_for(constant("2**100"), ns, "2**100"));
  CHECK_FALSE(holds_for(constant("2**100"), ns, "2**100 + 1"));
  CHECK_FALSE(holds_for(constant("2**100"), ns, "-(2**100)"));
  CHECK(holds_for(constant("-5"), ns, "-5"));

  // The sign of zero is part of a float's value; a NaN matches nothing, not even itself.
  CHECK_FALSE(holds_for(constant("0.0"), ns, "-0.0"));
  PyRef nan = eval(ns, "float('nan')");
  GuardSet nan_guard;
  REQUIRE(nan_guard.add_constant_match(kV, nan.get()));
  CHECK_FALSE(holds_for(nan_guard, ns, nan));

  CHECK(holds_for(constant("'abc'"), ns, "'ab' + 'c'"));
  CHECK_FALSE(holds_for(constant("'abc'"), ns, "'abd'"));
  CHECK_FALSE(holds_for(constant("'abc'"), ns, "b'abc'"));
  CHECK(holds_for(constant("b'abc'"), ns, "bytes([97, 98, 99])"));
  CHECK(holds_for(constant("None"), ns, "None"));
  CHECK_FALSE(holds_for(constant("None"), ns, "0"));
  CHECK(holds_for(constant("1+2j"), ns, "complex(1, 2)"));
  CHECK_FALSE(holds_for(constant("1+2j"), ns, "complex(1, -2)"));
  CHECK(holds_for(constant("(1, 'a', (2.5, None))"), ns, "(1, 'a', (2.5, None))"));
  CHECK_FALSE(holds_for(constant("(1, 'a', (2.5, None))"), ns, "(1, 'a', (2.5, 0))"));
  CHECK_FALSE(holds_for(constant("(1, 2)"), ns, "(1.0, 2)"));
  CHECK_FALSE(holds_for(constant("(1, 2)"), ns, "[1, 2]"));
  CHECK_FALSE(holds_for(constant("(1, 2)"), ns, "(1, 2, 3)"));
}

TEST_CASE("TENSOR_MATCH checks type, dtype, device, sizes, strides and requires_grad") {
  PyRef ns = dynvm::test::run(R"(
import torch
class MyTensor(torch.Tensor):
    pass
base = torch.zeros(2, 3)
)");
  GuardSet guards;
  REQUIRE(guards.add_tensor_match(kV, eval(ns, "base").get()));
  std::string reason;
  CHECK(holds_for(guards, ns, "torch.ones(2, 3)"));
  CHECK(holds_for(guards, ns, "torch.zeros(4, 3)[1:3]"));  // storage offset is not guarded

  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(2, 3, dtype=torch.float64)", &reason));
  CHECK(reason ==
        "L['v'] dtype is float64, expected float32; actual: torch.Tensor float64 cpu [2, 3] "
        "stride [3, 1] requires_grad=False");
  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(2, 4)", &reason));
  CHECK(reason.find("sizes are [2, 4], expected [2, 3], strides are [4, 1], expected [3, 1]") !=
        std::string::npos);
  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(3, 2).t()", &reason));
  CHECK(reason.find("L['v'] strides are [1, 2], expected [3, 1]") == 0);
  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(2, 3, device='meta')", &reason));
  CHECK(reason.find("device is meta, expected cpu") != std::string::npos);
  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(2, 3, requires_grad=True)", &reason));
  CHECK(reason.find("L['v'] requires_grad is True;") == 0);
  CHECK_FALSE(
      holds_for(guards, ns, "torch.nn.Parameter(torch.zeros(2, 3), requires_grad=False)", &reason));
  CHECK(reason.find("L['v'] type is torch.nn.parameter.Parameter, expected torch.Tensor") == 0);
  CHECK_FALSE(holds_for(guards, ns, "torch.zeros(2, 3).as_subclass(MyTensor)", &reason));
  CHECK(reason.find("type is snippet.MyTensor") != std::string::npos);
  CHECK_FALSE(holds_for(guards, ns, "[[0.0] * 3] * 2", &reason));
  CHECK(reason == "L['v'] is a list, not a tensor");
  exec(ns, "with torch.inference_mode():\n    inference = torch.zeros(2, 3)\n");
  CHECK_FALSE(holds_for(guards, ns, "inference", &reason));
  CHECK(reason.find("dispatch keys are") != std::string::npos);
  CHECK(reason.find(" inference") != std::string::npos);

  GuardSet parameter;
  REQUIRE(parameter.add_tensor_match(kV, eval(ns, "torch.nn.Parameter(torch.zeros(2))").get()));
  CHECK(holds_for(parameter, ns, "torch.nn.Parameter(torch.ones(2))"));
  CHECK_FALSE(holds_for(parameter, ns, "torch.ones(2, requires_grad=True)"));

  GuardSet conj;
  REQUIRE(
      conj.add_tensor_match(kV, eval(ns, "torch.zeros(2, dtype=torch.complex64).conj()").get()));
  CHECK(conj[0].text.find("complex64 cpu [2] stride [1] requires_grad=False conj") !=
        std::string::npos);
  CHECK(holds_for(conj, ns, "torch.ones(2, dtype=torch.complex64).conj()"));
  CHECK_FALSE(holds_for(conj, ns, "torch.ones(2, dtype=torch.complex64)"));
}

TEST_CASE("LEN_MATCH checks type and length") {
  PyRef ns = dynvm::test::run(R"(
import torch
layers = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.ReLU()])
class BadLen(list):
    def __len__(self):
        raise RuntimeError('no len')
)");
  GuardSet list_len;
  REQUIRE(list_len.add_len_match(kV, eval(ns, "[1, 2, 3, 4]").get()));
  std::string reason;
  CHECK(holds_for(list_len, ns, "[5, 6, 7, 8]"));
  CHECK_FALSE(holds_for(list_len, ns, "[1, 2, 3, 4, 5]", &reason));
  CHECK(reason == "L['v'] has len 5");
  CHECK_FALSE(holds_for(list_len, ns, "(1, 2, 3, 4)", &reason));
  CHECK(reason == "L['v'] is (1, 2, 3, 4)");

  GuardSet module_len;
  REQUIRE(module_len.add_len_match(kV, eval(ns, "layers").get()));
  CHECK(module_len[0].text == "LEN_MATCH L['v'] torch.nn.modules.container.ModuleList len 2");
  CHECK(holds_for(module_len, ns, "layers"));
  exec(ns, "layers.append(torch.nn.ReLU())");
  CHECK_FALSE(holds_for(module_len, ns, "layers"));

  GuardSet bad;
  REQUIRE(bad.add_len_match(kV, eval(ns, "[1]").get()));
  // A __len__ that raises only fails the guard.
  CHECK_FALSE(holds_for(bad, ns, "BadLen()"));
}

TEST_CASE("DICT_KEYS checks the keys and their order") {
  PyRef ns = dynvm::test::run("import collections\nordered = collections.OrderedDict(a=1, b=2)\n");
  GuardSet plain;
  REQUIRE(plain.add_dict_keys(kV, eval(ns, "{'a': 1, 'b': 2}").get()));
  std::string reason;
  CHECK(holds_for(plain, ns, "{'a': 10, 'b': 20}"));
  CHECK_FALSE(holds_for(plain, ns, "{'b': 2, 'a': 1}", &reason));
  CHECK(reason == "L['v'] has keys ['b', 'a']");
  CHECK_FALSE(holds_for(plain, ns, "{'a': 1}"));
  CHECK_FALSE(holds_for(plain, ns, "{'a': 1, 'b': 2, 'c': 3}"));
  CHECK_FALSE(holds_for(plain, ns, "ordered"));

  GuardSet ordered;
  REQUIRE(ordered.add_dict_keys(kV, eval(ns, "ordered").get()));
  CHECK(holds_for(ordered, ns, "ordered"));
  exec(ns, "ordered.move_to_end('a')");  // reorders without touching the dict underneath
  CHECK_FALSE(holds_for(ordered, ns, "ordered", &reason));
  CHECK(reason == "L['v'] has keys ['b', 'a']");
}

TEST_CASE("DICT_VERSION fails once a module's attributes change") {
  PyRef ns = dynvm::test::run(R"(
import torch
net = torch.nn.Linear(2, 2)
twin = torch.nn.Linear(2, 2)
)");
  GuardSet guards;
  REQUIRE(guards.add_module_dict_version(kV, eval(ns, "net").get()));
  std::string reason;
  CHECK(holds_for(guards, ns, "net"));
  exec(ns, "_ = net.training, net.weight, net.in_features");  // reads change nothing
  CHECK(holds_for(guards, ns, "net"));
  exec(ns, "net.training = True");  // rebinding the same object is no change
  CHECK(holds_for(guards, ns, "net"));
  CHECK_FALSE(holds_for(guards, ns, "twin", &reason));
  CHECK(reason == "L['v'].__dict__ was modified (or replaced) since the trace");

  exec(ns, "setattr(net, 'scale', 2.0)");
  CHECK_FALSE(holds_for(guards, ns, "net"));

  GuardSet after_eval;
  REQUIRE(after_eval.add_module_dict_version(kV, eval(ns, "net").get()));
  CHECK(holds_for(after_eval, ns, "net"));
  exec(ns, "net.eval()");
  CHECK_FALSE(holds_for(after_eval, ns, "net"));

  GuardSet plain;
  REQUIRE(plain.add_dict_version(kV, eval(ns, "net.__dict__").get()));
  CHECK(holds_for(plain, ns, "net.__dict__"));
  exec(ns, "del net.scale");
  CHECK_FALSE(holds_for(plain, ns, "net.__dict__"));
  CHECK_FALSE(holds_for(plain, ns, "[]", &reason));
  CHECK(reason == "L['v'] is a list");
}

TEST_CASE("MODULE_ATTRS holds while the module's constant attributes keep their values") {
  PyRef ns = dynvm::test::run(R"(
import torch
class Conv(torch.nn.Conv2d):
    pass
conv = Conv(3, 4, 3, stride=2)
twin = Conv(3, 4, 3, stride=2)
other = Conv(3, 4, 3, stride=1)
lin = torch.nn.Linear(2, 2)
)");
  GuardSet guards;
  REQUIRE(guards.add_module_attrs(kV, eval(ns, "conv").get()));
  const std::string& text = guards[0].text;
  CHECK(text.rfind("MODULE_ATTRS L['v']: training=True, ", 0) == 0);
  CHECK(text.find("stride=(2, 2)") != std::string::npos);
  CHECK(text.find("weight") == std::string::npos);  // tensors are guarded elsewhere
  std::string reason;
  CHECK(holds_for(guards, ns, "conv"));
  // Another module with equal attributes holds through the slow path.
  CHECK(holds_for(guards, ns, "twin"));
  CHECK_FALSE(holds_for(guards, ns, "other", &reason));
  CHECK(reason == "L['v'].stride is (1, 1), expected (2, 2)");
  CHECK_FALSE(holds_for(guards, ns, "lin", &reason));
  CHECK(reason == "L['v'] is a torch.nn.modules.linear.Linear");

  exec(ns, "conv.stride = (2, 2)");  // an equal new tuple: the dict changed, the value did not
  CHECK(holds_for(guards, ns, "conv"));
  exec(ns, "conv.eval()");
  CHECK_FALSE(holds_for(guards, ns, "conv", &reason));
  CHECK(reason == "L['v'].training is False, expected True");
  exec(ns, "conv.train()");
  CHECK(holds_for(guards, ns, "conv"));
  // A data descriptor on the class now decides what conv.stride reads: the fast path must
  // notice the class changed even though conv's __dict__ did not.
  GuardSet fresh;
  REQUIRE(fresh.add_module_attrs(kV, eval(ns, "conv").get()));
  CHECK(holds_for(fresh, ns, "conv"));
  exec(ns, "Conv.stride = property(lambda self: (5, 5))");
  CHECK_FALSE(holds_for(fresh, ns, "conv", &reason));
  CHECK(reason == "L['v'].stride is (5, 5), expected (2, 2)");
  exec(ns, "del Conv.stride");
  CHECK(holds_for(fresh, ns, "conv"));
  exec(ns, "del conv.padding_mode");
  CHECK_FALSE(holds_for(fresh, ns, "conv", &reason));
  CHECK(reason.rfind("L['v'].padding_mode could not be read: ", 0) == 0);
}

TEST_CASE("DUPLICATE_INPUT holds while two sources give one object") {
  PyRef ns = dynvm::test::run(
      "class Pair:\n"
      "    def __init__(self, a, b):\n"
      "        self.a, self.b = a, b\n"
      "x, y = [1], [1]\n");
  GuardSet guards;
  auto a = Source::attr(kV, "a");
  auto b = Source::attr(kV, "b");
  REQUIRE(guards.add_duplicate_input(b, a));
  REQUIRE(guards.size() == 1);
  CHECK(guards[0].text == "DUPLICATE_INPUT L['v'].b is L['v'].a");
  // The fast check alone cannot decide it: it needs the other source's value.
  CHECK_FALSE(dynvm::vm::guard_check(guards[0], eval(ns, "x").get()));
  std::string reason;
  CHECK(holds_for(guards, ns, "Pair(x, x)"));
  CHECK_FALSE(holds_for(guards, ns, "Pair(x, y)", &reason));
  CHECK(reason == "L['v'].b is another object (a list)");
  // The same pair again is one guard; another first source is another.
  REQUIRE(guards.add_duplicate_input(b, a));
  CHECK(guards.size() == 1);
  REQUIRE(guards.add_duplicate_input(b, Source::attr(kV, "c")));
  CHECK(guards.size() == 2);
}

TEST_CASE("NO_HOOKS fails while a module or torch has hooks") {
  PyRef ns = dynvm::test::run(R"(
import torch
net = torch.nn.Linear(2, 2)
def hook(module, args, output=None):
    return None
)");
  GuardSet guards;
  REQUIRE(guards.add_no_hooks(kV, eval(ns, "net").get()));
  std::string reason;
  CHECK(holds_for(guards, ns, "net"));

  exec(ns, "handle = net.register_forward_hook(hook)");
  CHECK_FALSE(holds_for(guards, ns, "net", &reason));
  CHECK(reason == "L['v'] has hooks in '_forward_hooks'");
  exec(ns, "handle.remove()");
  CHECK(holds_for(guards, ns, "net"));

  exec(ns, "handle = net.register_forward_pre_hook(hook)");
  CHECK_FALSE(holds_for(guards, ns, "net", &reason));
  CHECK(reason == "L['v'] has hooks in '_forward_pre_hooks'");
  exec(ns, "handle.remove()");

  // Once the module's __dict__ changed, the hook dicts are looked up again.
  exec(ns, "net.scale = 3");
  CHECK(holds_for(guards, ns, "net"));
  exec(ns, "net._forward_hooks = {1: hook}");
  CHECK_FALSE(holds_for(guards, ns, "net"));
  exec(ns, "net._forward_hooks = {}");
  CHECK(holds_for(guards, ns, "net"));

  exec(ns, "handle = torch.nn.modules.module.register_module_forward_hook(hook)");
  CHECK_FALSE(holds_for(guards, ns, "net", &reason));
  CHECK(reason == "torch.nn.modules.module._global_forward_hooks is not empty");
  CHECK_FALSE(guards.add_no_global_hooks());
  exec(ns, "handle.remove()");
  CHECK(holds_for(guards, ns, "net"));
}

TEST_CASE("global state guards: grad mode, default dtype, autocast") {
  PyRef ns = dynvm::test::run("import torch\n");
  GuardSet guards;
  guards.add_grad_mode(true);
  guards.add_default_dtype();
  guards.add_autocast();
  std::string reason;
  CHECK(holds_for(guards, ns, "None"));

  exec(ns, "torch.set_grad_enabled(False)");
  CHECK_FALSE(holds_for(guards, ns, "None", &reason));
  CHECK(reason == "torch.is_grad_enabled() is False");
  exec(ns, "torch.set_grad_enabled(True)");

  exec(ns, "torch.set_default_dtype(torch.float64)");
  CHECK_FALSE(holds_for(guards, ns, "None", &reason));
  CHECK(reason == "torch.get_default_dtype() is torch.float64");
  exec(ns, "torch.set_default_dtype(torch.float32)");

  exec(ns, "torch.set_autocast_cpu_enabled(True)");
  CHECK_FALSE(holds_for(guards, ns, "None", &reason));
  CHECK(reason == "autocast is cpu=True(bfloat16) cuda=False");
  exec(ns, "torch.set_autocast_cpu_enabled(False)");
  CHECK(holds_for(guards, ns, "None"));

  // The dtype counts where autocast is on: a trace made under bfloat16 autocast does not
  // hold under float16 autocast.
  exec(ns,
       "torch.set_autocast_dtype('cpu', torch.bfloat16)\n"
       "torch.set_autocast_enabled('cpu', True)");
  GuardSet bf16;
  bf16.add_autocast();
  CHECK(holds_for(bf16, ns, "None"));
  exec(ns, "torch.set_autocast_dtype('cpu', torch.float16)");
  CHECK_FALSE(holds_for(bf16, ns, "None", &reason));
  CHECK(reason == "autocast is cpu=True(float16) cuda=False");
  exec(ns,
       "torch.set_autocast_dtype('cpu', torch.bfloat16)\n"
       "torch.set_autocast_enabled('cpu', False)");

  GuardSet no_grad;
  no_grad.add_grad_mode(false);
  CHECK_FALSE(holds_for(no_grad, ns, "None"));
}

TEST_CASE("a failure names the first failing guard") {
  PyRef ns = dynvm::test::run("import torch\nx = torch.zeros(2)\n");
  GuardSet guards;
  REQUIRE(guards.add_type_match(kV, eval(ns, "x").get()));
  REQUIRE(guards.add_tensor_match(kV, eval(ns, "x").get()));
  guards.add_grad_mode(true);
  dynvm::test::Call call = dynvm::test::call_with_value(ns, eval(ns, "torch.zeros(3)"));
  dynvm::vm::FrameInputs inputs = call.inputs();
  GuardFailure why;
  REQUIRE_FALSE(dynvm::vm::guards_hold(guards, inputs, &why));
  CHECK(why.index == 1);
  CHECK(why.guard == guards[1].text);
  CHECK(dynvm::vm::to_string(why) ==
        "TENSOR_MATCH L['v']: torch.Tensor float32 cpu [2] stride [1] requires_grad=False "
        "failed: L['v'] sizes are [3], expected [2]; actual: torch.Tensor float32 cpu [3] "
        "stride [1] requires_grad=False");
}

TEST_CASE("an error pending before the check is kept, and none is added") {
  PyRef ns = dynvm::test::run("x = 1\n");
  GuardSet guards;
  REQUIRE(guards.add_constant_match(Source::attr(kV, "missing"), eval(ns, "1").get()));
  dynvm::test::Call call = dynvm::test::call_with_value(ns, eval(ns, "object()"));
  dynvm::vm::FrameInputs inputs = call.inputs();
  PyErr_SetString(PyExc_ValueError, "pending");
  GuardFailure why;
  CHECK_FALSE(dynvm::vm::guards_hold(guards, inputs, &why));
  REQUIRE(PyErr_Occurred() != nullptr);
  CHECK(PyErr_ExceptionMatches(PyExc_ValueError));
  PyErr_Clear();
  CHECK(why.reason ==
        "L['v'].missing could not be read: AttributeError: 'object' object has no attribute "
        "'missing'");
}
