// Tests of the eager backend: graphs given as text, run on real tensors, compared with the
// same computation called directly through ATen.
#include "dynvm/codegen/aten_executor.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "dynvm/graph/graph_parser.h"

namespace dynvm::codegen {
namespace {

// Parses `text` and builds its executor, failing the test on either error. The graph is
// dropped before the executor runs: the executor must not need it.
std::unique_ptr<AtenExecutor> build(const std::string& text) {
  INFO(text);
  Expected<graph::Graph> graph = graph::parse_graph(text);
  if (!graph) FAIL("parse error: " << graph.error().message);
  Expected<std::unique_ptr<AtenExecutor>> executor = AtenExecutor::build(*graph);
  if (!executor) FAIL("build error: " << executor.error().message);
  return std::move(executor).value();
}

// The executor's build error for `text`, failing the test when it builds.
std::string build_error(const std::string& text) {
  INFO(text);
  Expected<graph::Graph> graph = graph::parse_graph(text);
  if (!graph) FAIL("parse error: " << graph.error().message);
  Expected<std::unique_ptr<AtenExecutor>> executor = AtenExecutor::build(*graph);
  if (executor) FAIL("built, but an error was expected");
  return executor.error().message;
}

// Checks that `text` fails to build with a message containing every one of `parts`.
void check_build_error(const std::string& text, const std::vector<std::string>& parts) {
  std::string message = build_error(text);
  INFO(message);
  for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::allclose(a, b);
}

bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}

// Sets the grad mode for a scope.
class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : saved_(c10::GradMode::is_enabled()) {
    c10::GradMode::set_enabled(enabled);
  }
  ~GradModeScope() { c10::GradMode::set_enabled(saved_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool saved_;
};

// Probe operators for the liveness test: dynvm_test::remember(x) keeps a weak reference to
// x and returns -x; dynvm_test::is_alive(y) says (as a bool tensor) whether x still exists.
using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
std::optional<WeakTensor>& remembered() {
  static std::optional<WeakTensor> tensor;
  return tensor;
}

at::Tensor remember(const at::Tensor& x) {
  remembered().emplace(x.getIntrusivePtr());
  return x.neg();
}

at::Tensor is_alive(const at::Tensor& /*unused*/) {
  return at::scalar_tensor(remembered() && !remembered()->expired(), at::kBool);
}

TORCH_LIBRARY(dynvm_test, m) {
  m.def("remember(Tensor x) -> Tensor", remember);
  m.def("is_alive(Tensor y) -> Tensor", is_alive);
}

TEST_CASE("a pointwise chain matches ATen", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: f32[8] cpu, %y: f32[8] cpu):
  %0: f32[8] cpu = aten::add.Tensor(%x, %y, alpha=2)
  %1: f32[8] cpu = aten::mul.Tensor(%0, %x)
  %2: f32[8] cpu = aten::relu(%1)
  %3: f32[8] cpu = aten::sigmoid(%2)
  %4: f32[8] cpu = aten::sub.Tensor(%3, %y)
  return (%4)
)");
  CHECK(executor->num_inputs() == 2);
  CHECK(executor->num_outputs() == 1);
  CHECK(executor->num_steps() == 5);
  at::Tensor x = at::randn({8});
  at::Tensor y = at::randn({8});
  std::vector<at::Tensor> out = executor->run({x, y});
  REQUIRE(out.size() == 1);
  at::Tensor expected = at::sub(at::sigmoid(at::relu(at::mul(at::add(x, y, 2), x))), y);
  CHECK(same(out[0], expected));
  // Running again gives the same result: nothing of the first run is left behind.
  CHECK(same(executor->run({x, y})[0], expected));
}

TEST_CASE("scalar literals convert to what the schema takes", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %0: Tensor = aten::add.Scalar(%x, 2)
  %1: Tensor = aten::mul.Scalar(%0, 0.5)
  %2: Tensor = aten::add.Scalar(%1, True, alpha=3)
  %3: Tensor = aten::leaky_relu(%2, 0.25)
  %4: Tensor = aten::clamp(%3, -1, 2.5)
  %5: Tensor = aten::pow.Tensor_Scalar(%4, 2)
  return (%5)
)");
  at::Tensor x = at::randn({3, 5}) * 4;
  at::Tensor expected = at::pow(
      at::clamp(at::leaky_relu(at::add(at::mul(at::add(x, 2), 0.5), true, 3), 0.25), -1, 2.5), 2);
  CHECK(same(executor->run({x})[0], expected));
}

TEST_CASE("int, SymInt, int[N] and ScalarType literals", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %0: Tensor = aten::sum.dim_IntList(%x, [1], True, dtype=torch.float64)
  %1: Tensor = aten::mean.dim(%x, 0)
  %2: Tensor = aten::view(%x, [3, 2, 4])
  %3: Tensor = aten::slice.Tensor(%2, 2, 1, 3)
  %4: Tensor = aten::permute(%3, [2, 0, 1])
  %5: Tensor = aten::_reshape_alias(%x, [4, 6], [6, 1])
  %6: Tensor = aten::narrow(%x, 1, 1, 3)
  return (%0, %1, %4, %5, %6)
)");
  at::Tensor x = at::randn({6, 4});
  std::vector<at::Tensor> out = executor->run({x});
  REQUIRE(out.size() == 5);
  CHECK(same(out[0], at::sum(x, {1}, true, at::kDouble)));
  CHECK(out[0].scalar_type() == at::kDouble);
  CHECK(same(out[1], at::mean(x, {0})));
  CHECK(same(out[2], x.view({3, 2, 4}).slice(2, 1, 3).permute({2, 0, 1})));
  CHECK(same(out[3], x.view({4, 6})));
  CHECK(same(out[4], x.narrow(1, 1, 3)));
}

TEST_CASE("float, float[], bool[N] and None literals", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %g: Tensor):
  %y: Tensor, %mean: Tensor, %rstd: Tensor = aten::native_layer_norm(%x, [5], None, None, 1e-05)
  %up: Tensor = aten::upsample_nearest2d.vec(%x, None, [2.0, 3])
  %dx: Tensor, %dw: Tensor, %db: Tensor = aten::native_layer_norm_backward(%g, %x, [5], %mean, %rstd, None, None, [True, False, False])
  return (%y, %up, %dx)
)");
  at::Tensor x = at::randn({2, 3, 4, 5});
  at::Tensor g = at::randn({2, 3, 4, 5});
  std::vector<at::Tensor> out = executor->run({x, g});
  REQUIRE(out.size() == 3);
  auto [y, mean, rstd] = at::native_layer_norm(x, {5}, {}, {}, 1e-5);
  CHECK(same(out[0], y));
  CHECK(same(out[1], at::upsample_nearest2d(x, c10::nullopt, std::vector<double>{2.0, 3.0})));
  CHECK(out[1].sizes() == at::IntArrayRef({2, 3, 8, 15}));
  auto grads = at::native_layer_norm_backward(g, x, {5}, mean, rstd, {}, {}, {true, false, false});
  CHECK(same(out[2], std::get<0>(grads)));
}

TEST_CASE("string, MemoryFormat, Layout and Device literals", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %y: Tensor):
  %0: Tensor = aten::div.Tensor_mode(%x, %y, rounding_mode="floor")
  %1: Tensor = aten::gelu(%x, approximate="tanh")
  %2: Tensor = aten::clone(%x, memory_format=torch.channels_last)
  %3: Tensor = aten::to.dtype(%x, torch.float64, False, True, memory_format=torch.preserve_format)
  %4: Tensor = aten::zeros([2, 3], dtype=torch.int32, layout=torch.strided, device=cpu, pin_memory=False)
  return (%0, %1, %2, %3, %4)
)");
  at::Tensor x = at::randn({2, 3, 4, 5}) * 5;
  at::Tensor y = at::rand({2, 3, 4, 5}) + 0.5;
  std::vector<at::Tensor> out = executor->run({x, y});
  REQUIRE(out.size() == 5);
  CHECK(same(out[0], at::div(x, y, "floor")));
  CHECK(same(out[1], at::gelu(x, "tanh")));
  CHECK(same(out[2], x));
  CHECK(out[2].is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(!out[2].is_contiguous());
  CHECK(out[3].scalar_type() == at::kDouble);
  CHECK(same(out[3], x.to(at::kDouble)));
  CHECK(out[4].scalar_type() == at::kInt);
  CHECK(out[4].device() == at::Device(at::kCPU));
  CHECK(same(out[4], at::zeros({2, 3}, at::kInt)));
}

TEST_CASE("Tensor[] arguments and Tensor[] results", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %y: Tensor):
  %0: Tensor = aten::cat([%x, %y, %x], 1)
  %a: Tensor, %b: Tensor, %c: Tensor = aten::split.Tensor(%0, 3, 1)
  %parts: Tensor[] = aten::split.Tensor(%0, 4)
  %1: Tensor = aten::cat(%parts, 1)
  %s: Tensor, %t: Tensor = aten::_foreach_add.ScalarList([%a, %c], [1, 2.5])
  return (%a, %b, %c, %1, %s, %t)
)");
  at::Tensor x = at::randn({4, 3});
  at::Tensor y = at::randn({4, 3});
  std::vector<at::Tensor> out = executor->run({x, y});
  REQUIRE(out.size() == 6);
  at::Tensor joined = at::cat({x, y, x}, 1);
  std::vector<at::Tensor> parts = at::split(joined, 3, 1);
  REQUIRE(parts.size() == 3);
  CHECK(same(out[0], parts[0]));
  CHECK(same(out[1], parts[1]));
  CHECK(same(out[2], parts[2]));
  CHECK(same(out[3], joined));  // one chunk of 4 rows, concatenated back
  CHECK(same(out[4], x + 1));
  CHECK(same(out[5], x + 2.5));
}

TEST_CASE("a spread Tensor[] of the wrong length is a runtime error", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %a: Tensor, %b: Tensor = aten::split.Tensor(%x, 2)
  return (%a)
)");
  CHECK_NOTHROW(executor->run({at::randn({4})}));
  CHECK_THROWS_AS(executor->run({at::randn({6})}), c10::Error);
}

TEST_CASE("operators with several results fill their outputs in order", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %w: Tensor, %b: Tensor, %rm: Tensor, %rv: Tensor):
  %values: Tensor, %indices: Tensor = aten::max.dim(%x, 1)
  %y: Tensor, %save_mean: Tensor, %save_invstd: Tensor = aten::native_batch_norm(%x, %w, %b, %rm, %rv, True, 0.1, 1e-05)
  %p: Tensor, %i: Tensor = aten::max_pool2d_with_indices(%x, [2, 2], [2, 2])
  return (%values, %indices, %y, %save_mean, %p, %i)
)");
  at::Tensor x = at::randn({2, 3, 4, 4});
  at::Tensor w = at::randn({3});
  at::Tensor b = at::randn({3});
  at::Tensor rm = at::zeros({3});
  at::Tensor rv = at::ones({3});
  at::Tensor rm_ref = rm.clone();
  at::Tensor rv_ref = rv.clone();
  std::vector<at::Tensor> out = executor->run({x, w, b, rm, rv});
  REQUIRE(out.size() == 6);
  auto [values, indices] = at::max(x, 1);
  CHECK(same(out[0], values));
  CHECK(at::equal(out[1], indices));
  auto [y, save_mean, save_invstd] =
      at::native_batch_norm(x, w, b, rm_ref, rv_ref, true, 0.1, 1e-5);
  CHECK(same(out[2], y));
  CHECK(same(out[3], save_mean));
  // Training mode updates the running statistics in place, in the caller's tensors.
  CHECK(same(rm, rm_ref));
  CHECK(same(rv, rv_ref));
  auto [pooled, pool_indices] = at::max_pool2d_with_indices(x, {2, 2}, {2, 2});
  CHECK(same(out[4], pooled));
  CHECK(at::equal(out[5], pool_indices));
}

TEST_CASE("an in-place operator mutates the caller's tensor", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %y: Tensor):
  %0: Tensor = aten::add_.Tensor(%x, %y)
  %1: Tensor = aten::relu_(%0)
  return (%1)
)");
  at::Tensor x = at::randn({5});
  at::Tensor y = at::randn({5});
  at::Tensor expected = at::relu(x + y);
  std::vector<at::Tensor> out = executor->run({x, y});
  CHECK(same(x, expected));
  CHECK(same_tensor(out[0], x));
}

TEST_CASE("a view followed by an in-place operator writes through to its base", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %v: Tensor = aten::view(%x, [2, 3])
  %t: Tensor = aten::t(%v)
  %0: Tensor = aten::mul_.Scalar(%t, 2)
  %1: Tensor = aten::copy_(%0, %t)
  return (%v)
)");
  at::Tensor x = at::arange(6, at::kFloat);
  at::Tensor before = x.clone();
  std::vector<at::Tensor> out = executor->run({x});
  CHECK(same(x, before * 2));
  CHECK(out[0].is_alias_of(x));
  CHECK(same(out[0], (before * 2).view({2, 3})));
}

TEST_CASE("Tensor?[] arguments: index and index_put_", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %i: Tensor, %v: Tensor):
  %0: Tensor = aten::index.Tensor(%x, [None, %i])
  %1: Tensor = aten::index_put_(%x, [%i], %v, True)
  return (%0, %1)
)");
  at::Tensor x = at::randn({4, 4});
  at::Tensor i = at::tensor(std::vector<int64_t>{3, 0, 3});
  at::Tensor v = at::randn({3, 4});
  at::Tensor x_ref = x.clone();
  c10::List<c10::optional<at::Tensor>> column_index;
  column_index.push_back(c10::nullopt);
  column_index.push_back(i);
  at::Tensor expected_index = at::index(x_ref, column_index);
  c10::List<c10::optional<at::Tensor>> row_index;
  row_index.push_back(i);
  x_ref.index_put_(row_index, v, true);
  std::vector<at::Tensor> out = executor->run({x, i, v});
  CHECK(same(out[0], expected_index));
  CHECK(same(x, x_ref));
  CHECK(same_tensor(out[1], x));
}

TEST_CASE("set_grad_enabled switches grad mode and the caller's mode is restored",
          "[codegen_aten]") {
  auto executor = build(R"(
graph(%w: Tensor):
  dynvm::set_grad_enabled(False)
  %0: Tensor = aten::mul.Tensor(%w, %w)
  dynvm::set_grad_enabled(True)
  %1: Tensor = aten::mul.Tensor(%w, %w)
  return (%0, %1)
)");
  at::Tensor w = at::randn({3}).set_requires_grad(true);
  for (bool caller_mode : {true, false}) {
    GradModeScope scope(caller_mode);
    std::vector<at::Tensor> out = executor->run({w});
    CHECK(!out[0].requires_grad());
    CHECK(out[1].requires_grad());
    CHECK(c10::GradMode::is_enabled() == caller_mode);
  }
}

TEST_CASE("the caller's grad mode is restored when an operator throws", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %y: Tensor):
  dynvm::set_grad_enabled(False)
  %0: Tensor = aten::add.Tensor(%x, %y)
  return (%0)
)");
  GradModeScope scope(true);
  CHECK_THROWS_AS(executor->run({at::randn({3}), at::randn({4})}), c10::Error);
  CHECK(c10::GradMode::is_enabled());
}

TEST_CASE("backward through a replayed graph gives ATen's gradients", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %w: Tensor, %b: Tensor, %fc_w: Tensor, %fc_b: Tensor):
  %conv: Tensor = aten::convolution(%x, %w, %b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
  %relu: Tensor = aten::relu(%conv)
  %pool: Tensor = aten::mean.dim(%relu, [-1, -2], True)
  %flat: Tensor = aten::view(%pool, [2, 4])
  %fc_t: Tensor = aten::t(%fc_w)
  %logits: Tensor = aten::addmm(%fc_b, %flat, %fc_t)
  %loss: Tensor = aten::sum(%logits)
  return (%loss)
)");
  at::Tensor x = at::randn({2, 3, 6, 6});
  at::Tensor w = at::randn({4, 3, 3, 3}).set_requires_grad(true);
  at::Tensor b = at::randn({4}).set_requires_grad(true);
  at::Tensor fc_w = at::randn({5, 4}).set_requires_grad(true);
  at::Tensor fc_b = at::randn({5}).set_requires_grad(true);

  std::vector<at::Tensor> out = executor->run({x, w, b, fc_w, fc_b});
  REQUIRE(out[0].requires_grad());
  out[0].backward();
  std::vector<at::Tensor> grads = {w.grad().clone(), b.grad().clone(), fc_w.grad().clone(),
                                   fc_b.grad().clone()};
  for (at::Tensor& p : std::vector<at::Tensor>{w, b, fc_w, fc_b}) p.mutable_grad().reset();

  at::Tensor conv = at::conv2d(x, w, b, 1, 1);
  at::Tensor pooled = at::mean(at::relu(conv), {-1, -2}, true).view({2, 4});
  at::Tensor loss = at::sum(at::addmm(fc_b, pooled, fc_w.t()));
  CHECK(same(out[0], loss));
  loss.backward();
  CHECK(same(grads[0], w.grad()));
  CHECK(same(grads[1], b.grad()));
  CHECK(same(grads[2], fc_w.grad()));
  CHECK(same(grads[3], fc_b.grad()));
}

TEST_CASE("an output that is an input is the caller's own tensor", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor, %unused: Tensor):
  %0: Tensor = aten::neg(%x)
  %1: Tensor = aten::lift_fresh(%x)
  return (%x, %0, %x, %1)
)");
  at::Tensor x = at::randn({3});
  at::Tensor unused = at::randn({3});
  std::vector<at::Tensor> out = executor->run({x, unused});
  REQUIRE(out.size() == 4);
  CHECK(same_tensor(out[0], x));
  CHECK(same_tensor(out[2], x));
  CHECK(same(out[1], -x));
  CHECK(same(out[3], x));
  // Nothing keeps a reference once the results are gone.
  out.clear();
  CHECK(x.use_count() == 1);
  CHECK(unused.use_count() == 1);
}

TEST_CASE("an intermediate is released right after its last use", "[codegen_aten]") {
  at::Tensor x = at::randn({16});
  auto released = build(R"(
graph(%x: Tensor):
  %0: Tensor = aten::neg(%x)
  %1: Tensor = dynvm_test::remember(%0)
  %2: Tensor = dynvm_test::is_alive(%1)
  return (%2)
)");
  CHECK(!released->run({x})[0].item<bool>());
  // The same graph reading %0 once more keeps it alive until then.
  auto kept = build(R"(
graph(%x: Tensor):
  %0: Tensor = aten::neg(%x)
  %1: Tensor = dynvm_test::remember(%0)
  %2: Tensor = dynvm_test::is_alive(%1)
  %3: Tensor = aten::neg(%0)
  return (%2, %3)
)");
  CHECK(kept->run({x})[0].item<bool>());
}

TEST_CASE("outputs no one reads and ignored results are dropped", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %values: Tensor, %indices: Tensor = aten::max.dim(%x, 0)
  %sorted: Tensor = aten::sort(%x)
  return (%indices, %sorted)
)");
  at::Tensor x = at::randn({4, 2});
  std::vector<at::Tensor> out = executor->run({x});
  CHECK(at::equal(out[0], std::get<1>(at::max(x, 0))));
  CHECK(same(out[1], std::get<0>(at::sort(x))));
}

TEST_CASE("a wrong number of inputs is a runtime error", "[codegen_aten]") {
  auto executor = build(R"(
graph(%x: Tensor):
  %0: Tensor = aten::neg(%x)
  return (%0)
)");
  CHECK_THROWS_AS(executor->run({}), c10::Error);
}

// Each case: a graph that must not build, and what its error must say.
struct BuildErrorCase {
  const char* graph;
  std::vector<std::string> message_parts;
};

TEST_CASE("graphs the backend cannot run are errors naming the node", "[codegen_aten]") {
  const std::vector<BuildErrorCase> cases = {
      // An unknown operator, an unknown overload.
      {"graph(%x: Tensor):\n  %0: Tensor = aten::does_not_exist(%x, 1)\n  return (%0)",
       {"unknown operator aten::does_not_exist",
        "node `%0: Tensor = aten::does_not_exist(%x, 1)`"}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::add.NoSuchOverload(%x, %x)\n  return (%0)",
       {"unknown operator aten::add.NoSuchOverload"}},
      // Wrong arity: too many positional arguments, a missing one, unknown or doubled keywords.
      {"graph(%x: Tensor):\n  %0: Tensor = aten::neg(%x, %x)\n  return (%0)",
       {"aten::neg takes 1 positional argument(s), the node gives 2", "aten::neg(%x, %x)"}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::add.Tensor(%x)\n  return (%0)",
       {"argument 'other' of aten::add.Tensor is missing"}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::add.Tensor(%x, %x, beta=2)\n  return (%0)",
       {"has no argument named 'beta'"}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::add.Tensor(%x, %x, other=%x)\n  return (%0)",
       {"'other' is given both by position and by keyword"}},
      // Literals the schema type cannot take.
      {"graph(%x: Tensor):\n  %0: Tensor = aten::view(%x, [2, \"three\"])\n  return (%0)",
       {"argument 'size' (SymInt[]) cannot take [2, \"three\"]"}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::add.Tensor(%x, \"one\")\n  return (%0)",
       {"argument 'other' (Tensor) cannot take \"one\""}},
      {"graph(%x: Tensor):\n  %0: Tensor = aten::sum.dim_IntList(%x, [0], "
       "dtype=torch.channels_last)\n  return (%0)",
       {"argument 'dtype'", "cannot take torch.channels_last"}},
      // Outputs that do not match the schema's results.
      {"graph(%x: Tensor):\n  %0: Tensor, %1: Tensor = aten::neg(%x)\n  return (%0)",
       {"the node has 2 outputs, aten::neg returns 1"}},
      {"graph(%x: Tensor):\n  %0: int = aten::neg(%x)\n  return (%x)", {"output %0 is a int"}},
      // The grad-mode switch takes one literal bool.
      {"graph(%x: Tensor):\n  dynvm::set_grad_enabled(1)\n  return (%x)",
       {"dynvm::set_grad_enabled takes one literal bool"}},
      // Inputs and outputs are tensors.
      {"graph(%x: Tensor, %n: int):\n  return (%x)", {"graph input %n is a int"}},
      {"graph(%x: Tensor):\n  %p: Tensor[] = aten::split.Tensor(%x, 2)\n  return (%p)",
       {"graph output %0 is a Tensor[]"}},
  };
  for (const BuildErrorCase& c : cases) check_build_error(c.graph, c.message_parts);
}

}  // namespace
}  // namespace dynvm::codegen

TEST_CASE("a number where the schema takes a tensor is a wrapped number", "[codegen_aten]") {
  // x * 2.5 on an int tensor: eager gives float32 (the default dtype), because the 2.5 is a
  // wrapped number; a plain 0-d double tensor would have given float64.
  auto graph = dynvm::graph::parse_graph(
      "graph(%x: i32[2] cpu):\n  %0: f32[2] cpu = aten::mul.Tensor(%x, 2.5)\n  return (%0)");
  REQUIRE(graph);
  auto executor = dynvm::codegen::AtenExecutor::build(graph.value());
  REQUIRE(executor);
  at::Tensor x = at::arange(2, at::kInt);
  std::vector<at::Tensor> out = executor.value()->run({x});
  REQUIRE(out.size() == 1);
  CHECK(out[0].scalar_type() == at::kFloat);
  CHECK(at::equal(out[0], x * 2.5));
}
