// Helpers for the CPU target's tests: groups from text, random inputs with any layout, and
// comparison of a compiled kernel with the same group run through ATen.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/aten_executor.h"
#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/graph/graph_parser.h"

namespace dynvm::codegen::testing {

// Tests compile afresh: a kernel cached on disk by an older build of the emitter must not
// stand in for the code under test (the cache has tests of its own, in temporary dirs).
inline CpuCompileOptions uncached() {
  CpuCompileOptions options;
  options.use_disk_cache = false;
  return options;
}

inline graph::Graph parse(const std::string& text) {
  Expected<graph::Graph> graph = graph::parse_graph(text);
  if (!graph) FAIL("parse error: " << graph.error().message << "\n" << text);
  return std::move(graph).value();
}

// A random tensor with exactly the sizes, strides and dtype of `meta`.
inline at::Tensor random_input(const graph::TensorMeta& meta, int64_t seed) {
  at::manual_seed(static_cast<uint64_t>(seed));
  at::Tensor values;
  switch (meta.dtype) {
    case graph::DType::Bool:
      values = at::rand(meta.sizes) > 0.5;
      break;
    case graph::DType::UInt8:
    case graph::DType::Int8:
    case graph::DType::Int16:
    case graph::DType::Int32:
    case graph::DType::Int64:
      values = at::randint(-20, 20, meta.sizes);
      if (meta.dtype == graph::DType::UInt8) values = values.abs();
      break;
    default:
      values = at::randn(meta.sizes) * 2;
      break;
  }
  at::ScalarType type = at::ScalarType::Float;
  switch (meta.dtype) {
    case graph::DType::Bool:
      type = at::kBool;
      break;
    case graph::DType::UInt8:
      type = at::kByte;
      break;
    case graph::DType::Int8:
      type = at::kChar;
      break;
    case graph::DType::Int16:
      type = at::kShort;
      break;
    case graph::DType::Int32:
      type = at::kInt;
      break;
    case graph::DType::Int64:
      type = at::kLong;
      break;
    case graph::DType::Float16:
      type = at::kHalf;
      break;
    case graph::DType::BFloat16:
      type = at::kBFloat16;
      break;
    case graph::DType::Float64:
      type = at::kDouble;
      break;
    default:
      break;
  }
  at::Tensor out = at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(type));
  out.copy_(values);
  return out;
}

// Compiles `text`, runs it and the AtenExecutor on the same random inputs and compares.
// Returns the kernel for further checks.
inline std::unique_ptr<CpuKernel> check_against_aten(const std::string& text, int64_t seed = 1,
                                                     CpuCompileOptions options = uncached()) {
  INFO(text);
  graph::Graph group = parse(text);
  Expected<std::unique_ptr<CpuKernel>> kernel = CpuKernel::compile(group, options);
  if (!kernel) FAIL("compile error: " << kernel.error().message);
  Expected<std::unique_ptr<AtenExecutor>> reference = AtenExecutor::build(group);
  if (!reference) FAIL("AtenExecutor: " << reference.error().message);
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < group.inputs().size(); ++i) {
    inputs.push_back(random_input(*group.inputs()[i]->meta(), seed + static_cast<int64_t>(i)));
  }
  std::vector<at::Tensor> expected = (*reference)->run(inputs);
  std::vector<at::Tensor> actual = (*kernel)->run(inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("output " << i);
    CHECK(actual[i].scalar_type() == expected[i].scalar_type());
    CHECK(actual[i].sizes() == expected[i].sizes());
    // Laid out as the group says (eager may pick another layout for the same values).
    CHECK(actual[i].strides().vec() == group.outputs()[i]->meta()->strides);
    double rtol = 1e-5;
    double atol = 1e-5;
    switch (actual[i].scalar_type()) {
      case at::kDouble:
        rtol = atol = 1e-10;
        break;
      case at::kHalf:
        rtol = atol = 1e-2;
        break;
      case at::kBFloat16:
        rtol = atol = 3e-2;
        break;
      case at::kFloat:
        break;
      default:
        rtol = atol = 0;
        break;
    }
    at::Tensor a = actual[i].to(at::kDouble);
    at::Tensor e = expected[i].to(at::kDouble);
    bool close = at::allclose(a, e, rtol, atol, /*equal_nan=*/true);
    if (!close) {
      at::Tensor diff = (a - e).abs();
      FAIL_CHECK("output " << i << " differs: max abs diff " << diff.max().item<double>()
                           << "\nloop IR:\n"
                           << to_text((*kernel)->loop_kernel()));
    }
  }
  return std::move(kernel).value();
}

// A group with one planned and one returned output, a row sum and a softmax read by
// matmuls (reduction outputs written into reused memory), a transposed planned output
// and an int64 intermediate, in one arena.
inline constexpr const char* kMixed = R"(
graph(%x: f32[16, 64] cpu, %w: f32[64, 64] cpu, %ix: i64[16] cpu, %row: f32[1, 64] cpu):
  %0: f32[16, 64] cpu = aten::exp(%x)
  %1: f32[16, 64] cpu = aten::neg(%0)
  %2: f32[16, 64] cpu = aten::mm(%0, %w)
  %3: f32[16, 1] cpu = aten::amax(%2, [-1], True)
  %4: f32[16, 64] cpu = aten::sub.Tensor(%2, %3)
  %5: f32[16, 64] cpu = aten::exp(%4)
  %6: f32[16, 1] cpu = aten::sum.dim_IntList(%5, [-1], True)
  %7: f32[16, 64] cpu = aten::div.Tensor(%5, %6)
  %8: f32[16, 64] cpu = aten::mm(%7, %w)
  %9: f32[64, 16]{1, 64} cpu = aten::t(%8)
  %10: f32[64, 16]{1, 64} cpu = aten::tanh(%9)
  %11: f32[64, 64] cpu = aten::mm(%10, %1)
  %12: i64[16] cpu = aten::mul.Scalar(%ix, 3)
  %13: i64[16] cpu = aten::abs(%12)
  %14: f32[16, 64] cpu = aten::index_select(%11, 0, %13)
  %15: f32[16, 64] cpu = aten::sigmoid(%14)
  %16: f32[16, 1] cpu = aten::sum.dim_IntList(%15, [-1], True)
  %17: f32[16, 64] cpu = aten::mm(%16, %row)
  %18: f32[16, 64] cpu = aten::relu(%17)
  return (%1, %18)
)";

inline std::unique_ptr<CompiledGraph> compile(const graph::Graph& graph,
                                              const std::string& backend) {
  Expected<std::unique_ptr<CompiledGraph>> compiled =
      CompiledGraph::build(graph, backend, /*grad_enabled=*/false);
  if (!compiled) FAIL("build: " << compiled.error().message);
  return std::move(compiled).value();
}

// Kernels and ATen round differently and the matmuls amplify it: errors are measured
// against the largest magnitude of the expected values.
inline void check_close(const std::vector<at::Tensor>& actual,
                        const std::vector<at::Tensor>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("output " << i);
    REQUIRE(actual[i].sizes() == expected[i].sizes());
    double error = (actual[i] - expected[i]).abs().max().item<double>();
    double scale = std::max(1.0, expected[i].abs().max().item<double>());
    CHECK(error <= 1e-5 * scale);
  }
}

}  // namespace dynvm::codegen::testing
