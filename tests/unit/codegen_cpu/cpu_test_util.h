// Helpers for the CPU target's tests: groups from text, random inputs with any layout, and
// comparison of a compiled kernel with the same group run through ATen.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/aten_executor.h"
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
inline std::unique_ptr<CpuKernel> check_against_aten(const std::string& text, int64_t seed = 1) {
  INFO(text);
  graph::Graph group = parse(text);
  Expected<std::unique_ptr<CpuKernel>> kernel = CpuKernel::compile(group, uncached());
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

}  // namespace dynvm::codegen::testing
