// The graph passes checked on real tensors: a decomposed or functionalized graph must
// compute what the original computes (through the eager backend), and every value a
// decomposition creates must have the dtype and sizes its metadata claims.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/aten_executor.h"
#include "dynvm/graph/fusion_pipeline.h"
#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/node_builder.h"
#include "dynvm/graph/pass_runner.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::codegen {
namespace {

graph::Graph parse(const std::string& text) {
  Expected<graph::Graph> g = graph::parse_graph(text);
  INFO(text);
  if (!g) FAIL("parse error: " << g.error().message);
  return std::move(g).value();
}

graph::Graph after_passes(const graph::Graph& g, const std::vector<std::string>& passes) {
  graph::Graph copy = g.clone();
  graph::PassRunOptions options;
  options.verify = true;
  auto result = graph::run_passes(copy, passes, options);
  if (!result) FAIL("passes failed: " << result.error().message);
  return copy;
}

std::unique_ptr<AtenExecutor> build(const graph::Graph& g) {
  auto executor = AtenExecutor::build(g);
  INFO(graph::to_text(g));
  if (!executor) FAIL("build error: " << executor.error().message);
  return std::move(executor).value();
}

at::ScalarType scalar_type(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::Float16:
      return at::kHalf;
    case graph::DType::BFloat16:
      return at::kBFloat16;
    case graph::DType::Float64:
      return at::kDouble;
    case graph::DType::Int64:
      return at::kLong;
    case graph::DType::Int32:
      return at::kInt;
    case graph::DType::Int16:
      return at::kShort;
    case graph::DType::Int8:
      return at::kChar;
    case graph::DType::UInt8:
      return at::kByte;
    case graph::DType::Bool:
      return at::kBool;
    default:
      return at::kFloat;
  }
}

// Random inputs for the graph's inputs; names starting with "pos" or containing "var"
// get positive values.
std::vector<at::Tensor> random_inputs(const graph::Graph& g) {
  std::vector<at::Tensor> inputs;
  for (const graph::Value* input : g.inputs()) {
    const graph::TensorMeta& meta = *input->meta();
    at::Tensor t =
        input->name().rfind("pos", 0) == 0 || input->name().find("var") != std::string::npos
            ? at::rand(meta.sizes) + 0.5
            : at::randn(meta.sizes) * 3;
    inputs.push_back(t.to(scalar_type(meta.dtype)));
  }
  return inputs;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(t.clone());
  return out;
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  bool half = a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16;
  return at::allclose(a.to(at::kDouble), b.to(at::kDouble), half ? 1e-2 : 1e-4, half ? 1e-2 : 1e-5,
                      /*equal_nan=*/true);
}

// Every node of `g` is a primitive or one of `externs`.
void check_only_primitives(const graph::Graph& g, const std::vector<std::string>& externs) {
  for (const graph::Node* node : g.nodes()) {
    if (graph::primitive_kind(*node) != graph::PrimitiveKind::Extern) continue;
    bool allowed = false;
    for (const std::string& op : externs) allowed = allowed || node->op() == op;
    INFO(graph::to_text(g));
    CHECK(allowed);
    if (!allowed) FAIL_CHECK("not primitive: " << node->op());
  }
}

// Runs `g` with every tensor value as an output and compares each with its metadata.
void check_metadata(const graph::Graph& g, const std::vector<at::Tensor>& inputs) {
  graph::Graph all = g.clone();
  std::vector<graph::Value*> values;
  for (graph::Node* node : all.nodes()) {
    for (graph::Value* v : node->outputs()) {
      if (v->kind() == graph::ValueKind::Tensor) values.push_back(v);
    }
  }
  all.set_outputs(values);
  std::vector<at::Tensor> out = build(all)->run(clones(inputs));
  REQUIRE(out.size() == values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const graph::TensorMeta& meta = *values[i]->meta();
    INFO(graph::to_text(all) << "value #" << i);
    CHECK(out[i].sizes().vec() == meta.sizes);
    CHECK(out[i].scalar_type() == scalar_type(meta.dtype));
  }
}

// Decomposes `text`, then checks primitives only (besides `externs`), metadata, and
// the results against the original graph on random inputs.
void check_decomposition(const std::string& text, const std::vector<std::string>& externs = {}) {
  graph::Graph original = parse(text);
  graph::Graph decomposed = after_passes(original, {"decompose", "dce"});
  check_only_primitives(decomposed, externs);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<at::Tensor> inputs = random_inputs(original);
    std::vector<at::Tensor> expected = build(original)->run(clones(inputs));
    std::vector<at::Tensor> actual = build(decomposed)->run(clones(inputs));
    REQUIRE(expected.size() == actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO(graph::to_text(decomposed) << "output " << i);
      CHECK(close(expected[i], actual[i]));
    }
    if (trial == 0) check_metadata(decomposed, inputs);
  }
}

TEST_CASE("decomposed activations match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[4, 8] cpu):
  %0: f32[4, 8] cpu = aten::gelu(%x)
  %1: f32[4, 8] cpu = aten::gelu(%x, approximate="tanh")
  %2: f32[4, 8] cpu = aten::silu(%x)
  %3: f32[4, 8] cpu = aten::hardtanh(%x, -2.0, 2.5)
  %4: f32[4, 8] cpu = aten::relu6(%x)
  %5: f32[4, 8] cpu = aten::hardsigmoid(%x)
  %6: f32[4, 8] cpu = aten::hardswish(%x)
  %7: f32[4, 8] cpu = aten::leaky_relu(%x, 0.2)
  %8: f32[4, 8] cpu = aten::softplus(%x, 2, 3)
  %9: f32[4, 8] cpu = aten::mish(%x)
  %10: f32[4, 8] cpu = aten::elu(%x, 1.5, 1, 1)
  %11: f32[4, 8] cpu = aten::rsub.Scalar(%x, 2, alpha=3)
  %12: f32[4, 8] cpu = aten::square(%x)
  return (%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12)
)");
}

TEST_CASE("decomposed pointwise composites match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[4, 8] cpu, %y: f32[4, 8] cpu, %z: f32[8] cpu, %w: f32[4, 8] cpu):
  %0: f32[4, 8] cpu = aten::addcmul(%x, %y, %z, value=0.5)
  %1: f32[4, 8] cpu = aten::addcdiv(%x, %y, %z)
  %2: f32[4, 8] cpu = aten::lerp.Scalar(%x, %y, 0.25)
  %3: f32[4, 8] cpu = aten::lerp.Scalar(%x, %y, 0.75)
  %4: f32[4, 8] cpu = aten::lerp.Tensor(%x, %y, %w)
  %5: f32[4, 8] cpu = aten::clamp_min(%x, 0.5)
  %6: f32[4, 8] cpu = aten::clamp_max(%x, -0.5)
  %7: f32[4, 8] cpu = aten::clamp_min.Tensor(%x, %z)
  %8: f32[4, 8] cpu = aten::clamp_max.Tensor(%x, %y)
  %9: f32[4, 4] cpu = aten::glu(%x)
  %10: f32[2, 8] cpu = aten::glu(%y, 0)
  %11: f32[4, 8] cpu, %12: f32[0] cpu = aten::log_sigmoid_forward(%x)
  %13: f32[4, 8] cpu, %14: bool[4, 8] cpu = aten::native_dropout(%x, 0.3, False)
  %15: f32[4, 8] cpu = aten::relu(%13)
  return (%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %15)
)");
}

// ATen converts addcmul's value to the result type first: for integers 0.5 adds nothing.
TEST_CASE("decomposed addcmul of integers truncates the value as ATen does", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: i64[4, 8] cpu, %y: i64[4, 8] cpu, %z: i64[8] cpu):
  %0: i64[4, 8] cpu = aten::addcmul(%x, %y, %z, value=0.5)
  %1: i64[4, 8] cpu = aten::addcmul(%x, %y, %z, value=-1.5)
  %2: i64[4, 8] cpu = aten::addcmul(%x, %y, %z, value=3)
  return (%0, %1, %2)
)");
}

// ATen's kernels of these take floating types only (bool: not threshold and addcmul
// either, and rsub refuses a bool); eager raises, so the decomposition leaves them to
// ATen to raise as well.
TEST_CASE("activations of integers and bools are not decomposed", "[graph_passes]") {
  graph::Graph original = parse(R"(
graph(%n: i64[4, 8] cpu, %b: bool[4, 8] cpu):
  %0: i64[4, 8] cpu = aten::gelu(%n)
  %1: i64[4, 8] cpu = aten::silu(%n)
  %2: i64[4, 8] cpu = aten::hardsigmoid(%n)
  %3: i64[4, 8] cpu = aten::hardswish(%n)
  %4: i64[4, 8] cpu = aten::leaky_relu(%n, 0.2)
  %5: i64[4, 8] cpu = aten::softplus(%n, 1, 20)
  %6: i64[4, 8] cpu = aten::mish(%n)
  %7: i64[4, 8] cpu = aten::elu(%n, 1, 1, 1)
  %8: i64[4, 4] cpu = aten::glu(%n)
  %9: i64[4, 8] cpu = aten::lerp.Scalar(%n, %n, 0.25)
  %10: i64[4, 8] cpu, %11: i64[0] cpu = aten::log_sigmoid_forward(%n)
  %12: bool[4, 8] cpu = aten::gelu(%b)
  %13: bool[4, 8] cpu = aten::threshold(%b, 0.5, 1)
  %14: bool[4, 8] cpu = aten::addcmul(%b, %b, %b)
  %15: i64[4, 8] cpu = aten::rsub.Scalar(%n, True)
  return (%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %12, %13, %14, %15)
)");
  graph::Graph decomposed = after_passes(original, {"decompose", "dce"});
  INFO(graph::to_text(decomposed));
  CHECK(graph::to_text(decomposed) == graph::to_text(original));
}

// ATen's normalisation kernels raise for parameters of another dtype than the input's
// (float32 ones of a half-precision input aside): such nodes stay with ATen.
TEST_CASE("normalisations with parameters of another dtype are not decomposed", "[graph_passes]") {
  graph::Graph original = parse(R"(
graph(%x: f32[2, 6, 8] cpu, %w: f64[8] cpu, %n: i64[8] cpu, %c: f64[6] cpu, %h: bf16[6] cpu):
  %0: f32[2, 6, 8] cpu, %1: f32[2, 6, 1] cpu, %2: f32[2, 6, 1] cpu = aten::native_layer_norm(%x, [8], %w, None, 1e-05)
  %3: f32[2, 6, 8] cpu, %4: f32[2, 6, 1] cpu, %5: f32[2, 6, 1] cpu = aten::native_layer_norm(%x, [8], None, %n, 1e-05)
  %6: f32[2, 6, 8] cpu, %7: f32[2, 3] cpu, %8: f32[2, 3] cpu = aten::native_group_norm(%x, %c, None, 2, 6, 8, 3, 1e-05)
  %9: f32[2, 6, 8] cpu, %10: f32[0] cpu, %11: f32[0] cpu = aten::native_batch_norm(%x, %h, None, %c, %c, False, 0.1, 1e-05)
  %12: f32[2, 6, 8] cpu, %13: f32[6] cpu, %14: f32[6] cpu = aten::native_batch_norm(%x, %c, None, None, None, True, 0.1, 1e-05)
  return (%0, %3, %6, %9, %12)
)");
  graph::Graph decomposed = after_passes(original, {"decompose", "dce"});
  INFO(graph::to_text(decomposed));
  CHECK(graph::to_text(decomposed) == graph::to_text(original));
  // A half-precision input with float32 parameters is ATen's mixed-dtype batch norm.
  check_decomposition(R"(
graph(%x: bf16[2, 3, 4, 5] cpu, %w: f32[3] cpu, %b: f32[3] cpu, %rm: f32[3] cpu, %pos_rv: f32[3] cpu):
  %y: bf16[2, 3, 4, 5] cpu, %sm: f32[0] cpu, %si: f32[0] cpu = aten::native_batch_norm(%x, %w, %b, %rm, %pos_rv, False, 0.1, 1e-05)
  return (%y)
)");
}

TEST_CASE("decomposed fills, masks and logsumexp match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[4, 8] cpu, %n: i32[4, 8] cpu, %m: bool[8] cpu):
  %0: f32[4, 8] cpu = aten::full_like(%x, 2.5)
  %1: i32[4, 8] cpu = aten::full_like(%n, 2.5)
  %2: f64[4, 8] cpu = aten::zeros_like(%x, dtype=torch.float64)
  %3: i32[4, 8] cpu = aten::ones_like(%n, memory_format=torch.preserve_format)
  %4: f32[4, 8] cpu = aten::masked_fill.Scalar(%x, %m, -inf)
  %5: i32[4, 8] cpu = aten::masked_fill.Scalar(%n, %m, 7.9)
  %6: f32[4, 8] cpu = aten::where.ScalarOther(%m, %x, 0.5)
  %7: i32[4, 8] cpu = aten::where.ScalarSelf(%m, 3, %n)
  %8: f32[4, 8] cpu = aten::threshold(%x, 0.1, 20)
  %9: f32[4] cpu = aten::logsumexp(%x, [1])
  %10: f32[1, 8] cpu = aten::logsumexp(%4, [0], True)
  %11: f32[4] cpu = aten::logsumexp(%4, [1])
  %12: f32[] cpu = aten::sum(%x)
  %13: f32[4, 8] cpu = aten::masked_fill.Tensor(%x, %m, %12)
  return (%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %13)
)");
  // A float value into an integer tensor may not fit: ATen's checked conversion decides.
  check_decomposition(R"(
graph(%n: i32[4, 8] cpu, %m: bool[8] cpu, %v: f64[] cpu):
  %0: i32[4, 8] cpu = aten::masked_fill.Tensor(%n, %m, %v)
  return (%0)
)",
                      {"aten::masked_fill.Tensor"});
}

TEST_CASE("decomposed group_norm and baddbmm match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[2, 6, 3, 4] cpu, %w: f32[6] cpu, %b: f32[6] cpu, %s: f32[2, 3, 5] cpu, %b1: f32[2, 3, 4] cpu, %b2: f32[2, 4, 5] cpu):
  %y: f32[2, 6, 3, 4] cpu, %mean: f32[2, 3] cpu, %rstd: f32[2, 3] cpu = aten::native_group_norm(%x, %w, %b, 2, 6, 12, 3, 1e-05)
  %z: f32[2, 6, 3, 4] cpu, %m2: f32[2, 1] cpu, %r2: f32[2, 1] cpu = aten::native_group_norm(%x, None, None, 2, 6, 12, 1, 0.001)
  %p: f32[2, 3, 5] cpu = aten::baddbmm(%s, %b1, %b2, beta=0.5, alpha=2)
  return (%y, %mean, %rstd, %z, %m2, %r2, %p)
)",
                      {"aten::bmm"});
}

TEST_CASE("decomposed half-precision gelu computes in float", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: bf16[16] cpu, %y: bf16[16] cpu):
  %0: bf16[16] cpu = aten::gelu(%x, approximate="tanh")
  %1: bf16[16] cpu = aten::silu(%y)
  return (%0, %1)
)");
}

TEST_CASE("decomposed softmax and log_softmax match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[3, 5, 7] cpu):
  %0: f32[3, 5, 7] cpu = aten::_softmax(%x, -1, False)
  %1: f32[3, 5, 7] cpu = aten::_softmax(%x, 1, False)
  %2: f32[3, 5, 7] cpu = aten::_log_softmax(%x, 2, False)
  %3: f64[3, 5, 7] cpu = aten::softmax.int(%x, 0, dtype=torch.float64)
  return (%0, %1, %2, %3)
)");
}

TEST_CASE("decomposed layer_norm matches ATen, statistics included", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[2, 3, 8] cpu, %w: f32[3, 8] cpu, %b: f32[3, 8] cpu):
  %y: f32[2, 3, 8] cpu, %mean: f32[2, 1, 1] cpu, %rstd: f32[2, 1, 1] cpu = aten::native_layer_norm(%x, [3, 8], %w, %b, 1e-05)
  %z: f32[2, 3, 8] cpu, %m2: f32[2, 3, 1] cpu, %r2: f32[2, 3, 1] cpu = aten::native_layer_norm(%x, [8], None, None, 0.001)
  return (%y, %mean, %rstd, %z, %m2, %r2)
)");
}

TEST_CASE("decomposed eval batch_norm matches ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[2, 3, 4, 5] cpu, %w: f32[3] cpu, %b: f32[3] cpu, %rm: f32[3] cpu, %pos_rv: f32[3] cpu):
  %y: f32[2, 3, 4, 5] cpu, %sm: f32[0] cpu, %si: f32[0] cpu = aten::native_batch_norm(%x, %w, %b, %rm, %pos_rv, False, 0.1, 1e-05)
  %z: f32[2, 3, 4, 5] cpu, %sm2: f32[0] cpu, %si2: f32[0] cpu = aten::native_batch_norm(%x, None, None, %rm, %pos_rv, False, 0.1, 0.001)
  return (%y, %z)
)");
}

TEST_CASE("max_pool2d_with_indices without its indices becomes max_pool2d", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[2, 3, 9, 10] cpu):
  %y: f32[2, 3, 5, 5] cpu, %i: i64[2, 3, 5, 5] cpu = aten::max_pool2d_with_indices(%x, [3, 3], [2, 2], [1, 1])
  %z: f32[2, 3, 5, 4] cpu, %j: i64[2, 3, 5, 4] cpu = aten::max_pool2d_with_indices(%x, [2, 3], [2, 3], [1, 1], [1, 1], True)
  return (%y, %z)
)");
}

TEST_CASE("decomposed mean, var and std match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[4, 6, 5] cpu):
  %0: f32[4] cpu = aten::mean.dim(%x, [1, -1])
  %1: f32[4, 1, 5] cpu = aten::mean.dim(%x, [1], True)
  %2: f32[] cpu = aten::mean(%x)
  %3: f32[6] cpu = aten::var.correction(%x, [0, 2], correction=0)
  %4: f32[4, 6, 1] cpu = aten::var.correction(%x, [2], correction=1, keepdim=True)
  %5: f32[] cpu = aten::var.correction(%x, None, correction=None)
  %6: f32[4, 5] cpu = aten::var.dim(%x, [1], False)
  %7: f32[4, 5] cpu = aten::std.correction(%x, [1], correction=1)
  %8: f32[] cpu = aten::sum(%x)
  return (%0, %1, %2, %3, %4, %5, %6, %7, %8)
)");
}

TEST_CASE("decomposed addmm and linear match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%b: f32[5] cpu, %m1: f32[3, 4] cpu, %m2: f32[4, 5] cpu, %x: f32[2, 3, 4] cpu, %w: f32[5, 4] cpu, %v: f32[4] cpu):
  %0: f32[3, 5] cpu = aten::addmm(%b, %m1, %m2)
  %1: f32[3, 5] cpu = aten::addmm(%b, %m1, %m2, beta=0.5, alpha=2)
  %2: f32[2, 3, 5] cpu = aten::linear(%x, %w, %b)
  %3: f32[3, 5] cpu = aten::linear(%m1, %w)
  %4: f32[5] cpu = aten::linear(%v, %w, %b)
  return (%0, %1, %2, %3, %4)
)",
                      {"aten::mm"});
}

TEST_CASE("decomposed identities and shape ops match ATen", "[graph_passes]") {
  check_decomposition(R"(
graph(%x: f32[2, 3, 4] cpu):
  %0: f32[2, 3, 4] cpu = aten::dropout(%x, 0.5, False)
  %1: f32[2, 3, 4] cpu = aten::clone(%0)
  %2: f32[2, 3, 4] cpu = aten::contiguous(%1)
  %3: f32[2, 12] cpu = aten::flatten.using_ints(%2, 1, 2)
  %4: f32[2, 12] cpu = aten::relu(%3)
  %5: f64[2, 12] cpu = aten::to.dtype(%4, torch.float64, False, False)
  %6: f32[2, 12] cpu = aten::_unsafe_view(%2, [2, 12])
  %7: f32[2, 12] cpu = aten::add.Tensor(%6, %4, alpha=1)
  return (%5, %7)
)");
}

// Runs the original and the functionalized graph on copies of the same inputs: outputs
// and the inputs afterwards (what the graph wrote into them) must agree.
void check_functionalization(const std::string& text) {
  graph::Graph original = parse(text);
  graph::Graph functional = after_passes(original, {"functionalize", "dce"});
  for (const graph::Node* node : functional.nodes()) {
    INFO(graph::to_text(functional));
    bool in_place = node->op().find("_.") != std::string::npos ||
                    (node->op().back() == '_' && node->op() != "aten::copy_");
    CHECK_FALSE(in_place);
  }
  std::vector<at::Tensor> inputs = random_inputs(original);
  std::vector<at::Tensor> eager_inputs = clones(inputs);
  std::vector<at::Tensor> functional_inputs = clones(inputs);
  std::vector<at::Tensor> expected = build(original)->run(eager_inputs);
  std::vector<at::Tensor> actual = build(functional)->run(functional_inputs);
  INFO(graph::to_text(functional));
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(close(expected[i], actual[i]));
  for (size_t i = 0; i < inputs.size(); ++i) CHECK(close(eager_inputs[i], functional_inputs[i]));
  // Outputs that alias an input in eager mode alias it after functionalization too.
  for (size_t i = 0; i < expected.size(); ++i) {
    for (size_t j = 0; j < inputs.size(); ++j) {
      bool eager_alias = expected[i].is_alias_of(eager_inputs[j]);
      CHECK(eager_alias == actual[i].is_alias_of(functional_inputs[j]));
    }
  }
}

TEST_CASE("functionalized in-place ops match eager, written-back inputs included",
          "[graph_passes]") {
  check_functionalization(R"(
graph(%x: f32[4, 3] cpu, %y: f32[3] cpu):
  %0: f32[4, 3] cpu = aten::add_.Tensor(%x, %y, alpha=2)
  %1: f32[4, 3] cpu = aten::relu_(%0)
  %2: f32[4, 3] cpu = aten::mul.Tensor(%x, %y)
  %3: f32[4, 3] cpu = aten::exp(%2)
  %4: f32[4, 3] cpu = aten::mul_.Scalar(%3, 2)
  return (%1, %3)
)");
  check_functionalization(R"(
graph(%x: f32[4, 3] cpu, %y: f64[3] cpu):
  %s: f32[2, 3] cpu = aten::slice.Tensor(%x, 0, 1, 3)
  %c: f32[2, 3] cpu = aten::copy_(%s, %y)
  %row: f32[3] cpu = aten::select.int(%x, 0, 0)
  %z: f32[3] cpu = aten::zero_(%row)
  %t: f32[3, 4]{1, 3} cpu = aten::t(%x)
  %m: f32[3, 4]{1, 3} cpu = aten::sigmoid_(%t)
  %v: f32[12] cpu = aten::view(%x, [12])
  return (%v, %s)
)");
  check_functionalization(R"(
graph(%x: f32[4] cpu, %y: f64[4] cpu):
  %a: f32[2, 2] cpu = aten::view(%x, [2, 2])
  %t: f32[2, 2]{1, 2} cpu = aten::t(%a)
  %w: f32[2, 2] cpu = aten::mul_.Scalar(%a, 3)
  %r: f32[2, 2] cpu = aten::relu(%t)
  %p: f32[4] cpu = aten::add_.Tensor(%x, %y, alpha=1)
  %q: f32[2, 2] cpu = aten::permute(%a, [1, 0])
  %f: f32[2, 2] cpu = aten::fill_.Scalar(%q, 0.5)
  return (%r, %t, %p)
)");
  // Out variants of primitives (AMSGrad's maximum, Adamax's amax), one written in place.
  check_functionalization(R"(
graph(%a: f32[4] cpu, %m: f32[4] cpu, %x: f32[3, 4] cpu, %n: f32[4] cpu):
  %0: f32[4] cpu = aten::maximum.out(%m, %a, out=%m)
  %1: f32[4] cpu = aten::amax.out(%x, [0], False, out=%n)
  %2: f32[4] cpu = aten::mul.Tensor(%m, %n)
  return (%2, %0)
)");
  // An operand that is the written tensor itself, through an in-place result (x.mul_(y)
  // with y = x.add_(1)): read and written at the same elements, so still functionalized.
  check_functionalization(R"(
graph(%x: f32[4] cpu):
  %y: f32[4] cpu = aten::add_.Tensor(%x, 1)
  %z: f32[4] cpu = aten::mul_.Tensor(%x, %y)
  %e: f32[4] cpu = aten::exp(%x)
  return (%e)
)");
}

// An optimizer step writes a leaf parameter that requires grad under no_grad: eager
// accepts that, and the write-back into it must run under no_grad too (with grad mode on,
// ATen refuses an in-place write into such a leaf).
TEST_CASE("writes under no_grad become functional and are written back under no_grad",
          "[graph_passes]") {
  graph::Graph original = parse(R"(
graph(%p: f32[4, 3] cpu grad, %g: f32[4, 3] cpu, %m: f32[4, 3] cpu):
  dynvm::set_grad_enabled(False)
  %0: f32[4, 3] cpu = aten::mul_.Scalar(%m, 0.9)
  %1: f32[4, 3] cpu = aten::add_.Tensor(%0, %g, alpha=1)
  %2: f32[4, 3] cpu grad = aten::add_.Tensor(%p, %1, alpha=-0.1)
  dynvm::set_grad_enabled(True)
  %3: f32[4, 3] cpu = aten::mul.Tensor(%g, 2)
  return (%3)
)");
  graph::Graph functional = after_passes(original, {"functionalize", "dce"});
  INFO(graph::to_text(functional));
  for (const graph::Node* node : functional.nodes()) {
    CHECK((node->op() == "aten::copy_" || node->op().find("_.") == std::string::npos));
  }
  std::vector<at::Tensor> inputs = random_inputs(original);
  auto leaf_inputs = [&] {
    std::vector<at::Tensor> copies = clones(inputs);
    copies[0].requires_grad_(true);
    return copies;
  };
  at::AutoGradMode grad_on(true);
  std::vector<at::Tensor> eager_inputs = leaf_inputs();
  std::vector<at::Tensor> functional_inputs = leaf_inputs();
  std::vector<at::Tensor> expected = build(original)->run(eager_inputs);
  std::vector<at::Tensor> actual = build(functional)->run(functional_inputs);
  REQUIRE(expected.size() == actual.size());
  CHECK(close(expected[0], actual[0]));
  for (size_t i = 0; i < inputs.size(); ++i) {
    CHECK(close(eager_inputs[i].detach(), functional_inputs[i].detach()));
  }
  CHECK(functional_inputs[0].is_leaf());
  CHECK(functional_inputs[0].requires_grad());
  CHECK(at::GradMode::is_enabled());
}

TEST_CASE("training batch_norm: functional running statistics, then primitives", "[graph_passes]") {
  const char* text = R"(
graph(%x: f32[4, 3, 5, 2] cpu, %w: f32[3] cpu, %b: f32[3] cpu, %rm: f32[3] cpu, %pos_rv: f32[3] cpu):
  %y: f32[4, 3, 5, 2] cpu, %sm: f32[3] cpu, %si: f32[3] cpu = aten::native_batch_norm(%x, %w, %b, %rm, %pos_rv, True, 0.1, 1e-05)
  %r: f32[4, 3, 5, 2] cpu = aten::relu_(%y)
  return (%r, %sm, %si)
)";
  check_functionalization(text);
  // The whole pipeline: running statistics written back, everything else fused.
  graph::Graph original = parse(text);
  graph::Graph lowered = after_passes(original, {"functionalize", "decompose", "cse", "dce"});
  check_only_primitives(lowered, {"aten::copy_"});
  std::vector<at::Tensor> inputs = random_inputs(original);
  std::vector<at::Tensor> eager_inputs = clones(inputs);
  std::vector<at::Tensor> lowered_inputs = clones(inputs);
  std::vector<at::Tensor> expected = build(original)->run(eager_inputs);
  std::vector<at::Tensor> actual = build(lowered)->run(lowered_inputs);
  INFO(graph::to_text(lowered));
  for (size_t i = 0; i < expected.size(); ++i) CHECK(close(expected[i], actual[i]));
  for (size_t i = 0; i < inputs.size(); ++i) CHECK(close(eager_inputs[i], lowered_inputs[i]));
  check_metadata(lowered, inputs);
}

TEST_CASE("functionalization tells copies from aliases and handles several inputs",
          "[graph_passes]") {
  // reshape of a transposed tensor copies: writing the copy leaves the input alone.
  check_functionalization(R"(
graph(%x: f32[3, 4] cpu):
  %t: f32[4, 3]{1, 4} cpu = aten::t(%x)
  %r: f32[12] cpu = aten::reshape(%t, [-1])
  %m: f32[12] cpu = aten::mul_.Scalar(%r, 2)
  %c: f32[3, 4] cpu = aten::contiguous(%x)
  %a: f32[3, 4] cpu = aten::add_.Scalar(%c, 1)
  return (%r, %t)
)");
  // Two inputs written through several views each, in any order.
  check_functionalization(R"(
graph(%x: f32[3, 4] cpu, %y: f32[4] cpu, %z: f32[4] cpu):
  %row: f32[4] cpu = aten::select.int(%x, 0, 1)
  %col: f32[3] cpu = aten::select.int(%x, 1, 2)
  %0: f32[4] cpu = aten::add_.Tensor(%row, %y, alpha=1)
  %1: f32[3] cpu = aten::mul_.Scalar(%col, -1)
  %2: f32[4] cpu = aten::copy_(%y, %row)
  %3: f32[4] cpu = aten::exp(%row)
  %4: f32[2, 2] cpu = aten::view(%y, [2, 2])
  %5: f32[2, 2] cpu = aten::sigmoid_(%4)
  %6: f32[4] cpu = aten::add.Tensor(%y, %z, alpha=1)
  %7: f32[4] cpu = aten::detach_(%z)
  %8: f32[4] cpu = aten::mul_.Tensor(%7, %6)
  return (%3, %6, %col, %4, %8)
)");
}

// Runs a lowered program as the runtime would: fused groups through their extracted
// graphs, every other outer node on its own, both through the eager backend. Every value
// the memory plan assigns a slot is copied into that slot's bytes and read from there,
// so two values wrongly sharing a slot while both are live give wrong results.
std::vector<at::Tensor> run_program(const graph::FusionProgram& program,
                                    const std::vector<at::Tensor>& inputs) {
  const graph::Graph& outer = program.outer;
  std::vector<at::Tensor> slots;
  for (const graph::BufferSlot& slot : program.memory.slots) {
    slots.push_back(at::empty({slot.bytes}, at::kByte));
  }
  auto place = [&](const graph::Value* v, const at::Tensor& result) {
    const graph::BufferAssignment* assigned = program.memory.find(*v);
    if (assigned == nullptr || result.numel() == 0) return result;
    const graph::TensorMeta& meta = *v->meta();
    at::Tensor typed = slots[assigned->slot].view(scalar_type(meta.dtype));
    at::Tensor in_slot = typed.as_strided(meta.sizes, meta.strides, 0);
    in_slot.copy_(result);
    return in_slot;
  };
  std::vector<at::Tensor> values(outer.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) values[outer.inputs()[i]->id()] = inputs[i];
  for (const graph::Node* node : outer.nodes()) {
    std::vector<const graph::Value*> reads;
    node->for_each_input([&](const graph::Value* v) {
      if (std::find(reads.begin(), reads.end(), v) == reads.end()) reads.push_back(v);
    });
    std::vector<at::Tensor> args;
    for (const graph::Value* v : reads) args.push_back(values[v->id()]);
    std::vector<at::Tensor> results;
    if (node->op() == graph::kFusedOp) {
      const graph::Graph& group =
          program.groups.at(static_cast<size_t>(node->kwarg("group")->as_int()));
      results = build(group)->run(args);
    } else {
      // The node alone, reading its values as inputs.
      graph::Graph single;
      std::vector<graph::Value*> map(outer.num_values(), nullptr);
      for (size_t i = 0; i < reads.size(); ++i) {
        map[reads[i]->id()] = single.add_input("in" + std::to_string(i), reads[i]->type());
      }
      std::function<graph::Argument(const graph::Argument&)> remap =
          [&](const graph::Argument& a) -> graph::Argument {
        if (a.is_value()) return map[a.as_value()->id()];
        if (!a.is_list()) return a;
        std::vector<graph::Argument> items;
        for (const graph::Argument& item : a.as_list()) items.push_back(remap(item));
        return graph::Argument::list(std::move(items));
      };
      std::vector<graph::Argument> node_args;
      for (const graph::Argument& a : node->args()) node_args.push_back(remap(a));
      std::vector<graph::KeywordArgument> kwargs;
      for (const graph::KeywordArgument& k : node->kwargs())
        kwargs.push_back({k.name, remap(k.value)});
      std::vector<graph::ValueType> types;
      for (const graph::Value* v : node->outputs()) types.push_back(v->type());
      graph::Node* copy = single.append(node->op(), node_args, types, kwargs);
      single.set_outputs(copy->outputs());
      results = build(single)->run(args);
    }
    REQUIRE(results.size() == node->num_outputs());
    for (size_t i = 0; i < results.size(); ++i) {
      values[node->output(i)->id()] = place(node->output(i), results[i]);
    }
  }
  std::vector<at::Tensor> outputs;
  for (const graph::Value* v : outer.outputs()) outputs.push_back(values[v->id()]);
  return outputs;
}

TEST_CASE("lowered fusion programs compute what their graphs compute", "[graph_passes]") {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(DYNVM_TEST_DATA_DIR) / "graph_fusion")) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    size_t begin = text.find("# input\n");
    size_t end = text.find("# expected\n");
    REQUIRE(begin != std::string::npos);
    REQUIRE(end != std::string::npos);
    INFO(path.filename().string());
    graph::Graph original = parse(text.substr(begin + 8, end - begin - 8));
    graph::PassRunOptions options;
    options.verify = true;
    auto program = graph::lower_for_fusion(original.clone(), options);
    if (!program) FAIL(program.error().message);
    std::vector<at::Tensor> inputs = random_inputs(original);
    std::vector<at::Tensor> eager_inputs = clones(inputs);
    std::vector<at::Tensor> fused_inputs = clones(inputs);
    // The same random stream for both (dropout draws through bernoulli_ / bernoulli.p).
    at::manual_seed(7);
    std::vector<at::Tensor> expected = build(original)->run(eager_inputs);
    at::manual_seed(7);
    std::vector<at::Tensor> actual = run_program(*program, fused_inputs);
    REQUIRE(expected.size() == actual.size());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(close(expected[i], actual[i]));
    for (size_t i = 0; i < inputs.size(); ++i) CHECK(close(eager_inputs[i], fused_inputs[i]));
    for (size_t i = 0; i < expected.size(); ++i) {
      for (size_t j = 0; j < inputs.size(); ++j) {
        CHECK(expected[i].is_alias_of(eager_inputs[j]) == actual[i].is_alias_of(fused_inputs[j]));
      }
    }
  }
}

}  // namespace
}  // namespace dynvm::codegen

namespace dynvm::codegen {
namespace {

// infer_primitive_meta against ATen: every primitive built with NodeBuilder over inputs
// of mixed dtypes and ranks must get the sizes and dtype ATen produces, and views the
// strides ATen gives them.
TEST_CASE("primitive metadata rules agree with ATen", "[graph_passes]") {
  using graph::Argument;
  using graph::DType;
  graph::Graph g;
  auto input = [&](const char* name, DType dtype, std::vector<int64_t> sizes) {
    return g.add_input(name, graph::ValueType::tensor(graph::TensorMeta::contiguous(dtype, sizes)));
  };
  graph::Value* a = input("a", DType::Float32, {4, 1});
  graph::Value* b = input("b", DType::Int64, {1, 8});
  graph::Value* c = input("c", DType::Int32, {8});
  graph::Value* d = input("d", DType::Bool, {4, 8});
  graph::Value* h = input("h", DType::BFloat16, {4, 8});
  graph::Value* s = input("s", DType::Float64, {});
  graph::Value* e = input("e", DType::Float32, {2, 3, 4});
  graph::NodeBuilder nb(g, nullptr);
  auto i = [](int64_t v) { return Argument::integer(v); };
  auto f = [](double v) { return Argument::real(v); };
  auto ints = [](std::vector<int64_t> v) { return Argument::int_list(v); };
  std::vector<graph::Value*> views;
  nb.binary("aten::add.Tensor", a, b);
  nb.binary("aten::add.Tensor", b, c);
  nb.binary("aten::mul.Tensor", c, s);
  nb.binary("aten::mul.Tensor", h, s);
  nb.binary("aten::mul.Scalar", c, f(2.5));
  nb.binary("aten::mul.Scalar", h, f(2.5));
  nb.binary("aten::add.Scalar", d, i(1));
  nb.binary("aten::sub.Tensor", h, a);
  nb.binary("aten::div.Tensor", c, c);
  nb.binary("aten::div.Scalar", b, i(2));
  nb.unary("aten::exp", c);
  nb.unary("aten::neg", c);
  nb.unary("aten::abs", h);
  nb.unary("aten::rsqrt", h);
  nb.binary("aten::eq.Scalar", h, i(0));
  nb.binary("aten::lt.Tensor", a, b);
  nb.primitive("aten::where.self", {d, h, s});
  nb.primitive("aten::where.self", {d, c, b});
  nb.primitive("aten::clamp", {c, i(0), i(5)});
  nb.primitive("aten::clamp", {h, f(-1.0), f(1.0)});
  nb.binary("aten::pow.Tensor_Scalar", c, i(2));
  nb.binary("aten::pow.Tensor_Scalar", c, f(0.5));
  nb.binary("aten::maximum", c, h);
  nb.binary("aten::logical_and", d, c);
  nb.unary("aten::logical_not", c);
  nb.convert(c, DType::Float64);
  nb.sum(c, {0}, false);
  nb.sum(h, {1}, true);
  nb.primitive("aten::sum.dim_IntList", {e, ints({0, 2}), Argument::boolean(false)},
               {{"dtype", Argument::dtype(DType::Float64)}});
  nb.amax(e, {-1}, true);
  nb.primitive("aten::amin", {b, ints({1})});
  nb.primitive("aten::max_pool2d",
               {e, ints({2}), ints({}), ints({0}), ints({1}), Argument::boolean(true)});
  nb.primitive("aten::max_pool2d", {e, ints({3, 2}), ints({2, 1}), ints({1, 1})});
  graph::Value* flat = nb.primitive("aten::view", {e, ints({6, -1})});
  graph::Value* perm = nb.primitive("aten::permute", {e, ints({2, 0, 1})});
  views = {flat,
           perm,
           nb.primitive("aten::reshape", {perm, ints({4, 6})}),
           nb.primitive("aten::reshape", {perm, ints({4, 2, 3})}),
           nb.primitive("aten::expand", {a, ints({3, 4, 8})}),
           nb.primitive("aten::expand", {a, ints({-1, 5})}),
           nb.primitive("aten::unsqueeze", {e, i(1)}),
           nb.primitive("aten::unsqueeze", {perm, i(-1)}),
           nb.primitive("aten::squeeze.dim", {a, i(1)}),
           nb.primitive("aten::squeeze.dim", {a, i(0)}),
           nb.unary("aten::t", flat),
           nb.primitive("aten::transpose.int", {e, i(0), i(2)}),
           nb.primitive("aten::slice.Tensor", {e, i(2), i(1), i(4), i(2)}),
           nb.primitive("aten::slice.Tensor", {perm, i(1), i(-1), i(100)}),
           nb.primitive("aten::select.int", {e, i(1), i(-1)}),
           nb.primitive("aten::select.int", {perm, i(0), i(2)})};
  std::vector<graph::Value*> values;
  for (graph::Node* node : g.nodes()) values.push_back(node->output());
  g.set_outputs(values);
  std::vector<at::Tensor> inputs = {at::randn({4, 1}),
                                    at::randint(-5, 5, {1, 8}, at::kLong),
                                    at::randint(-5, 5, {8}, at::kInt),
                                    at::randn({4, 8}) > 0,
                                    at::randn({4, 8}).to(at::kBFloat16),
                                    at::randn({}).to(at::kDouble),
                                    at::randn({2, 3, 4})};
  std::vector<at::Tensor> out = build(g)->run(inputs);
  REQUIRE(out.size() == values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const graph::TensorMeta& meta = *values[k]->meta();
    INFO(graph::to_text(*values[k]->producer(), graph::ValueNames(g)));
    CHECK(out[k].sizes().vec() == meta.sizes);
    CHECK(out[k].scalar_type() == scalar_type(meta.dtype));
    if (std::find(views.begin(), views.end(), values[k]) != views.end()) {
      CHECK(out[k].strides().vec() == meta.strides);
    }
  }
}

}  // namespace
}  // namespace dynvm::codegen

namespace dynvm::codegen {
namespace {

// A random graph of pointwise ops with broadcasting, reductions, expand views and extern
// matrix products over values of shapes [4, 8], [8] and [4, 1].
graph::Graph random_graph(std::mt19937& rng) {
  using graph::Argument;
  graph::Graph g;
  auto tensor = [](std::vector<int64_t> sizes) {
    return graph::ValueType::tensor(graph::TensorMeta::contiguous(graph::DType::Float32, sizes));
  };
  std::vector<graph::Value*> pool = {g.add_input("x", tensor({4, 8})),
                                     g.add_input("y", tensor({8})),
                                     g.add_input("z", tensor({4, 1}))};
  graph::Value* w = g.add_input("w", tensor({8, 8}));
  graph::NodeBuilder b(g, nullptr);
  auto pick = [&]() {
    return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
  };
  auto pick_sized = [&](const std::vector<int64_t>& sizes) -> graph::Value* {
    std::vector<graph::Value*> fits;
    for (graph::Value* v : pool) {
      if (v->meta()->sizes == sizes) fits.push_back(v);
    }
    if (fits.empty()) return nullptr;
    return fits[std::uniform_int_distribution<size_t>(0, fits.size() - 1)(rng)];
  };
  const char* unary[] = {"aten::tanh", "aten::sigmoid", "aten::neg", "aten::relu", "aten::abs"};
  const char* binary[] = {"aten::add.Tensor", "aten::mul.Tensor", "aten::sub.Tensor",
                          "aten::maximum"};
  int count = std::uniform_int_distribution<int>(12, 30)(rng);
  for (int i = 0; i < count; ++i) {
    int choice = std::uniform_int_distribution<int>(0, 9)(rng);
    graph::Value* v = nullptr;
    if (choice <= 2) {
      v = b.unary(unary[std::uniform_int_distribution<int>(0, 4)(rng)], pick());
    } else if (choice <= 5) {
      v = b.binary(binary[std::uniform_int_distribution<int>(0, 3)(rng)], pick(), pick());
    } else if (choice == 6) {
      v = b.binary("aten::mul.Scalar", pick(), Argument::real(0.5));
    } else if (choice == 7) {
      graph::Value* full = pick_sized({4, 8});
      if (full == nullptr) continue;
      bool rows = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
      bool use_max = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
      v = use_max ? b.amax(full, {rows ? 1 : 0}, rows) : b.sum(full, {rows ? 1 : 0}, rows);
    } else if (choice == 8) {
      graph::Value* column = pick_sized({4, 1});
      if (column == nullptr) continue;
      v = b.primitive("aten::expand", {column, Argument::int_list({4, 8})});
    } else {
      graph::Value* full = pick_sized({4, 8});
      if (full == nullptr) continue;
      v = b.node("aten::mm", {b.unary("aten::tanh", full), w}, {tensor({4, 8})})->output();
    }
    pool.push_back(v);
  }
  std::vector<graph::Value*> outputs = {pool.back()};
  for (int k = 0; k < 2; ++k) {
    graph::Value* extra = pick();
    if (!extra->is_input() && std::find(outputs.begin(), outputs.end(), extra) == outputs.end()) {
      outputs.push_back(extra);
    }
  }
  g.set_outputs(outputs);
  return g;
}

TEST_CASE("random graphs: lowered programs match the original", "[graph_passes]") {
  std::mt19937 rng(1234);
  size_t groups = 0;
  for (int trial = 0; trial < 40; ++trial) {
    graph::Graph original = random_graph(rng);
    INFO("trial " << trial << "\n" << graph::to_text(original));
    graph::PassRunOptions options;
    options.verify = true;
    auto program = graph::lower_for_fusion(original.clone(), options);
    if (!program) FAIL(program.error().message);
    groups += program->groups.size();
    std::vector<at::Tensor> inputs = random_inputs(original);
    std::vector<at::Tensor> expected = build(original)->run(clones(inputs));
    std::vector<at::Tensor> actual = run_program(*program, clones(inputs));
    REQUIRE(expected.size() == actual.size());
    INFO(graph::to_text(*program));
    for (size_t i = 0; i < expected.size(); ++i) CHECK(close(expected[i], actual[i]));
  }
  CHECK(groups > 40);
}

}  // namespace
}  // namespace dynvm::codegen
