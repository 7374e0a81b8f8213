// Fused groups compiled for the CPU against the same groups run op by op through ATen.
#include "dynvm/codegen/cpu_kernel.h"

#include <ATen/ATen.h>

#include <string>

#include "catch.h"
#include "cpu_test_util.h"
#include "dynvm/codegen/loop_ir_printer.h"

namespace dynvm::codegen {
namespace {

using testing::check_against_aten;

TEST_CASE("cpu kernel: pointwise chain with a scalar", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f32[4, 37] cpu, %y: f32[4, 37] cpu):
  %0: f32[4, 37] cpu = aten::mul.Tensor(%x, %y)
  %1: f32[4, 37] cpu = aten::add.Tensor(%0, 1.5, alpha=2)
  %2: f32[4, 37] cpu = aten::exp(%1)
  return (%2)
)");
}

TEST_CASE("cpu kernel: softmax over the last dim is one kernel with row loops", "[codegen_cpu]") {
  auto kernel = check_against_aten(R"(
graph(%x: f32[64, 100] cpu):
  %0: f32[64, 100] cpu = aten::mul.Tensor(%x, 0.125)
  %1: f32[64, 1] cpu = aten::amax(%0, [-1], True)
  %2: f32[64, 100] cpu = aten::sub.Tensor(%0, %1)
  %3: f32[64, 100] cpu = aten::exp(%2)
  %4: f32[64, 1] cpu = aten::sum.dim_IntList(%3, [-1], True)
  %5: f32[64, 100] cpu = aten::div.Tensor(%3, %4)
  return (%5)
)");
  std::string text = to_text(kernel->loop_kernel());
  INFO(text);
  CHECK(text.find("reduce max") != std::string::npos);
  CHECK(text.find("reduce sum") != std::string::npos);
  CHECK(text.find("parallel for %i0 in 0..64") != std::string::npos);
}

}  // namespace
}  // namespace dynvm::codegen
