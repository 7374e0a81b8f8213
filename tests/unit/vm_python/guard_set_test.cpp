// GuardSet: the text of every guard kind, deduplication, and values the builders refuse.
#include <string>

#include "catch.h"
#include "dynvm/vm/guard.h"
#include "python_fixture.h"

using dynvm::PyRef;
using dynvm::vm::GuardKind;
using dynvm::vm::GuardSet;
using dynvm::vm::Source;
using dynvm::vm::SourcePtr;

namespace {

const char* kModel = R"(
import collections
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer('scale', torch.ones(2))

    def forward(self, x):
        return self.fc(x) * self.scale

net = Net()
x = torch.zeros(2, 3)
n = 3
xs = [1, 2, 3, 4]
cfg = {'a': 1, 'b': 2}
ordered = collections.OrderedDict(cfg)
)";

SourcePtr self_source() { return Source::local("self", 0); }

}  // namespace

TEST_CASE("every guard kind prints as one deterministic line") {
  PyRef ns = dynvm::test::run(kModel);
  PyRef net = dynvm::test::get(ns, "net");
  GuardSet guards;
  auto self = self_source();
  REQUIRE(guards.add_tensor_match(Source::local("x", 1), dynvm::test::get(ns, "x").get()));
  REQUIRE(guards.add_id_match(Source::global("torch"), dynvm::test::get(ns, "torch").get()));
  REQUIRE(guards.add_constant_match(Source::local("n", 2), dynvm::test::get(ns, "n").get()));
  REQUIRE(guards.add_len_match(Source::local("xs", 3), dynvm::test::get(ns, "xs").get()));
  REQUIRE(guards.add_type_match(self, net.get()));
  REQUIRE(guards.add_module_dict_version(self, net.get()));
  REQUIRE(guards.add_no_hooks(self, net.get()));
  REQUIRE(guards.add_dict_keys(Source::local("cfg", 4), dynvm::test::get(ns, "cfg").get()));
  PyRef weight = PyRef::steal(PyRun_String("net.fc.weight", Py_eval_input, ns.get(), ns.get()));
  auto fc = Source::module_member(Source::Kind::ModuleChild, self, "fc");
  REQUIRE(guards.add_tensor_match(Source::module_member(Source::Kind::ModuleParam, fc, "weight"),
                                  weight.get()));
  guards.add_grad_mode(true);
  guards.add_default_dtype();
  guards.add_autocast();

  CHECK(guards.to_string() ==
        "TENSOR_MATCH L['x']: torch.Tensor float32 cpu [2, 3] stride [3, 1] "
        "requires_grad=False\n"
        "ID_MATCH G['torch']\n"
        "CONSTANT_MATCH L['n'] == 3\n"
        "LEN_MATCH L['xs'] list len 4\n"
        "TYPE_MATCH L['self'] snippet.Net\n"
        "DICT_VERSION L['self'].__dict__\n"
        "NO_GLOBAL_HOOKS\n"
        "NO_HOOKS L['self']\n"
        "DICT_KEYS L['cfg'] dict ['a', 'b']\n"
        "TENSOR_MATCH L['self'].fc.weight: torch.nn.parameter.Parameter float32 cpu [2, 3] "
        "stride [3, 1] requires_grad=True\n"
        "GRAD_MODE torch.is_grad_enabled() == True\n"
        "DEFAULT_DTYPE torch.get_default_dtype() == torch.float32\n"
        "AUTOCAST cpu=False cuda=False\n");
  CHECK(guards.size() == 13);
  CHECK(guards.lines().size() == 13);
  CHECK(guards[0].kind == GuardKind::TensorMatch);
  CHECK(std::string(dynvm::vm::guard_kind_name(GuardKind::NoGlobalHooks)) == "NO_GLOBAL_HOOKS");
  // Sources are numbered once each, bases first.
  int weight_slot = guards.sources().find("L['self'].fc.weight");
  int fc_slot = guards.sources().find("L['self'].fc");
  REQUIRE(weight_slot >= 0);
  CHECK(guards.sources()[weight_slot].base == fc_slot);
  CHECK(guards.sources()[fc_slot].base == guards.sources().find("L['self']"));
}

TEST_CASE("equal guards are added once; different payloads are kept apart") {
  PyRef ns = dynvm::test::run(
      "import torch\none = 1\none_float = 1.0\nyes = True\nx = torch.zeros(2)\n"
      "y = torch.zeros(3)\nbig_a = 2**100\nbig_b = 2**100\nhalf_a = 0.5\nhalf_b = float('0.5')\n"
      "nan = float('nan')\n");
  GuardSet guards;
  auto n = Source::local("n", 0);
  size_t first = *guards.add_constant_match(n, dynvm::test::get(ns, "one").get());
  CHECK(*guards.add_constant_match(Source::local("n", 0), dynvm::test::get(ns, "one").get()) ==
        first);
  CHECK(*guards.add_constant_match(n, dynvm::test::get(ns, "one_float").get()) != first);
  CHECK(*guards.add_constant_match(n, dynvm::test::get(ns, "yes").get()) != first);
  CHECK(guards.size() == 3);
  // Equal values in distinct objects are one guard; a NaN never equals itself, so it is not.
  size_t big = *guards.add_constant_match(n, dynvm::test::get(ns, "big_a").get());
  CHECK(*guards.add_constant_match(n, dynvm::test::get(ns, "big_b").get()) == big);
  size_t half = *guards.add_constant_match(n, dynvm::test::get(ns, "half_a").get());
  CHECK(*guards.add_constant_match(n, dynvm::test::get(ns, "half_b").get()) == half);
  size_t nan = *guards.add_constant_match(n, dynvm::test::get(ns, "nan").get());
  CHECK(*guards.add_constant_match(n, dynvm::test::get(ns, "nan").get()) != nan);

  size_t tensor = *guards.add_tensor_match(Source::local("x", 1), dynvm::test::get(ns, "x").get());
  CHECK(*guards.add_tensor_match(Source::local("x", 1), dynvm::test::get(ns, "x").get()) == tensor);
  CHECK(*guards.add_tensor_match(Source::local("x", 1), dynvm::test::get(ns, "y").get()) != tensor);
  // The same value on another source is another guard.
  CHECK(*guards.add_tensor_match(Source::local("z", 2), dynvm::test::get(ns, "x").get()) != tensor);

  size_t grad = guards.add_grad_mode(true);
  CHECK(guards.add_grad_mode(true) == grad);
  CHECK(guards.add_grad_mode(false) != grad);
  CHECK(guards.add_default_dtype() == guards.add_default_dtype());
  CHECK(*guards.add_no_global_hooks() == *guards.add_no_global_hooks());
  CHECK(guards.sources().size() == 3);  // L['n'], L['x'], L['z']
}

TEST_CASE("builders refuse values they cannot guard") {
  PyRef ns = dynvm::test::run(R"(
import collections, enum, torch
class Color(enum.IntEnum):
    RED = 1
class NoLen:
    def __len__(self):
        raise RuntimeError('no len')
items = [1, 2]
red = Color.RED
dense = torch.zeros(2, 3)
sparse = dense.to_sparse()
quantized = torch.quantize_per_tensor(torch.zeros(2), 0.1, 0, torch.quint8)
ordered = collections.OrderedDict(a=1)
keyed_by_object = {object(): 1}
no_len = NoLen()
net = torch.nn.Linear(2, 2)
hook = net.register_forward_hook(lambda module, args, out: None)
)");
  GuardSet guards;
  auto v = Source::local("v", 0);
  auto constant = guards.add_constant_match(v, dynvm::test::get(ns, "items").get());
  REQUIRE_FALSE(constant);
  CHECK(constant.error().message.find("a list is not a constant") == 0);
  CHECK_FALSE(guards.add_constant_match(v, dynvm::test::get(ns, "red").get()));

  auto not_tensor = guards.add_tensor_match(v, dynvm::test::get(ns, "items").get());
  REQUIRE_FALSE(not_tensor);
  CHECK(not_tensor.error().message == "not a torch.Tensor but a list");
  auto sparse = guards.add_tensor_match(v, dynvm::test::get(ns, "sparse").get());
  REQUIRE_FALSE(sparse);
  CHECK(sparse.error().message.find("layout") != std::string::npos);
  auto quantized = guards.add_tensor_match(v, dynvm::test::get(ns, "quantized").get());
  REQUIRE_FALSE(quantized);
  CHECK(quantized.error().message == "a quantized tensor");

  CHECK_FALSE(guards.add_dict_version(v, dynvm::test::get(ns, "ordered").get()));
  CHECK_FALSE(guards.add_dict_version(v, dynvm::test::get(ns, "items").get()));
  CHECK_FALSE(guards.add_dict_keys(v, dynvm::test::get(ns, "items").get()));
  CHECK_FALSE(guards.add_dict_keys(v, dynvm::test::get(ns, "keyed_by_object").get()));
  auto no_len = guards.add_len_match(v, dynvm::test::get(ns, "no_len").get());
  REQUIRE_FALSE(no_len);
  CHECK(no_len.error().message == "len() failed: RuntimeError: no len");
  auto hooked = guards.add_no_hooks(v, dynvm::test::get(ns, "net").get());
  REQUIRE_FALSE(hooked);
  CHECK(hooked.error().message == "the module has hooks (_forward_hooks)");
  CHECK(guards.empty());
  CHECK_FALSE(dynvm::test::python_error_pending());
}

TEST_CASE("nested tensors are refused where torch has them") {
  PyRef ns = dynvm::test::run(R"(
import torch, warnings
nested = None
if hasattr(torch, 'nested') and hasattr(torch.nested, 'nested_tensor'):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # "prototype stage"
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
)");
  PyRef nested = dynvm::test::get(ns, "nested");
  if (nested.get() == Py_None) return;
  GuardSet guards;
  CHECK_FALSE(guards.add_tensor_match(Source::local("v", 0), nested.get()));
}
