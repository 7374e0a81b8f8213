// Fused groups compiled for the CPU against the same groups run op by op through ATen.
#include "dynvm/codegen/cpu_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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

namespace dynvm::codegen {
namespace {

using testing::check_against_aten;
using testing::parse;

TEST_CASE("cpu kernel: broadcasting across ranks and a scalar", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%a: f32[4, 1, 5] cpu, %b: f32[3, 1] cpu, %c: f32[] cpu):
  %0: f32[4, 3, 5] cpu = aten::add.Tensor(%a, %b)
  %1: f32[4, 3, 5] cpu = aten::mul.Tensor(%0, %c)
  %2: f32[4, 3, 5] cpu = aten::sub.Scalar(%1, 0.25, 3)
  return (%2)
)");
}

TEST_CASE("cpu kernel: non-contiguous inputs (transposed, strided)", "[codegen_cpu]") {
  auto kernel = check_against_aten(R"(
graph(%x: f32[5, 7]{1, 5} cpu, %y: f32[5, 7] cpu, %z: f32[5, 7]{16, 2} cpu):
  %0: f32[5, 7] cpu = aten::mul.Tensor(%x, %y)
  %1: f32[5, 7] cpu = aten::add.Tensor(%0, %z)
  %2: f32[5, 7] cpu = aten::tanh(%1)
  return (%2)
)");
  // The transposed input keeps the loops apart.
  CHECK(to_text(kernel->loop_kernel()).find("for %i1 in 0..7") != std::string::npos);
}

TEST_CASE("cpu kernel: contiguous pointwise loops coalesce into one", "[codegen_cpu]") {
  auto kernel = check_against_aten(R"(
graph(%x: f32[6, 10, 33] cpu):
  %0: f32[6, 10, 33] cpu = aten::sigmoid(%x)
  return (%0)
)");
  CHECK(to_text(kernel->loop_kernel()).find("parallel for %i0 in 0..1980 {") != std::string::npos);
}

// The parallel loop split across two intra-op threads (each chunk with its own row scratch):
// the same values as ATen, for a pointwise kernel and for row reductions.
TEST_CASE("cpu kernel: chunks of the parallel loop on two threads", "[codegen_cpu]") {
  int before = at::get_num_threads();
  at::set_num_threads(2);
  check_against_aten(R"(
graph(%x: f32[300000] cpu):
  %0: f32[300000] cpu = aten::mul.Tensor(%x, 0.5)
  %1: f32[300000] cpu = aten::tanh(%0)
  return (%1)
)");
  auto kernel = check_against_aten(R"(
graph(%x: f32[512, 1024] cpu, %r: f32[512, 1024] cpu):
  %0: f32[512, 1024] cpu = aten::add.Tensor(%x, %r)
  %1: f32[512, 1] cpu = aten::mean.dim(%0, [-1], True)
  %2: f32[512, 1024] cpu = aten::sub.Tensor(%0, %1)
  %3: f32[512, 1024] cpu = aten::mul.Tensor(%2, %2)
  %4: f32[512, 1] cpu = aten::mean.dim(%3, [-1], True)
  %5: f32[512, 1] cpu = aten::add.Scalar(%4, 1e-05)
  %6: f32[512, 1] cpu = aten::rsqrt(%5)
  %7: f32[512, 1024] cpu = aten::mul.Tensor(%2, %6)
  return (%7)
)");
  at::set_num_threads(before);
  CHECK(to_text(kernel->loop_kernel()).find("parallel for %i0 in 0..512") != std::string::npos);
}

TEST_CASE("cpu kernel: float64", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f64[3, 50] cpu, %y: f64[50] cpu):
  %0: f64[3, 50] cpu = aten::mul.Tensor(%x, %y)
  %1: f64[3, 50] cpu = aten::exp(%0)
  %2: f64[3, 50] cpu = aten::log1p(%1)
  %3: f64[3, 50] cpu = aten::tanh(%2)
  %4: f64[3, 50] cpu = aten::erf(%0)
  %5: f64[3, 50] cpu = aten::sigmoid(%4)
  %6: f64[3, 50] cpu = aten::add.Tensor(%3, %5)
  return (%6)
)");
}

TEST_CASE("cpu kernel: float16 and bfloat16 storage, float32 compute", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f16[8, 40] cpu, %y: f16[40] cpu):
  %0: f16[8, 40] cpu = aten::mul.Tensor(%x, %y)
  %1: f16[8, 40] cpu = aten::add.Tensor(%0, %x)
  %2: f32[8, 40] cpu = aten::_to_copy(%1, dtype=torch.float32)
  %3: f32[8, 40] cpu = aten::sigmoid(%2)
  %4: f16[8, 40] cpu = aten::_to_copy(%3, dtype=torch.float16)
  return (%4, %1)
)");
  check_against_aten(R"(
graph(%x: bf16[8, 40] cpu, %y: bf16[8, 40] cpu):
  %0: bf16[8, 40] cpu = aten::sub.Tensor(%x, %y)
  %1: bf16[8, 40] cpu = aten::abs(%0)
  %2: bf16[8, 40] cpu = aten::maximum(%1, %y)
  return (%2)
)");
  // Mixed: f16 with f32 promotes to f32; a conversion to bf16 rounds.
  check_against_aten(R"(
graph(%x: f16[64] cpu, %y: f32[64] cpu):
  %0: f32[64] cpu = aten::add.Tensor(%x, %y)
  %1: bf16[64] cpu = aten::_to_copy(%0, dtype=torch.bfloat16)
  %2: f32[64] cpu = aten::_to_copy(%1, dtype=torch.float32)
  %3: f32[64] cpu = aten::mul.Tensor(%2, 3.0)
  return (%3)
)");
}

TEST_CASE("cpu kernel: integers, type promotion, comparisons and bool", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%a: i32[6, 20] cpu, %b: i32[20] cpu):
  %0: i32[6, 20] cpu = aten::mul.Tensor(%a, %b)
  %1: i32[6, 20] cpu = aten::add.Tensor(%0, 7, alpha=2)
  %2: i32[6, 20] cpu = aten::abs(%1)
  %3: i32[6, 20] cpu = aten::maximum(%2, %a)
  %4: i32[6, 20] cpu = aten::neg(%3)
  return (%4)
)");
  check_against_aten(R"(
graph(%a: i64[6, 20] cpu, %x: f32[6, 20] cpu):
  %0: f32[6, 20] cpu = aten::add.Tensor(%a, %x)
  %1: f32[6, 20] cpu = aten::div.Tensor(%a, 3)
  %2: bool[6, 20] cpu = aten::gt.Scalar(%a, 2.5)
  %3: bool[6, 20] cpu = aten::le.Tensor(%x, %1)
  %4: bool[6, 20] cpu = aten::logical_and(%2, %3)
  %5: bool[6, 20] cpu = aten::logical_not(%4)
  %6: f32[6, 20] cpu = aten::where.self(%5, %0, %1)
  %7: i32[6, 20] cpu = aten::_to_copy(%6, dtype=torch.int32)
  return (%6, %5, %7)
)");
  check_against_aten(R"(
graph(%p: bool[30] cpu, %q: bool[30] cpu, %u: u8[30] cpu):
  %0: bool[30] cpu = aten::logical_or(%p, %q)
  %1: bool[30] cpu = aten::ne.Tensor(%p, %q)
  %2: u8[30] cpu = aten::mul.Tensor(%u, 3)
  %3: bool[30] cpu = aten::lt.Scalar(%2, 40)
  %4: bool[30] cpu = aten::eq.Tensor(%3, %0)
  return (%4, %1, %2)
)");
}

TEST_CASE("cpu kernel: unary math, pow and clamp", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f32[3, 37] cpu):
  %0: f32[3, 37] cpu = aten::abs(%x)
  %1: f32[3, 37] cpu = aten::sqrt(%0)
  %2: f32[3, 37] cpu = aten::rsqrt(%0)
  %3: f32[3, 37] cpu = aten::reciprocal(%x)
  %4: f32[3, 37] cpu = aten::log(%0)
  %5: f32[3, 37] cpu = aten::sin(%x)
  %6: f32[3, 37] cpu = aten::cos(%x)
  %7: f32[3, 37] cpu = aten::expm1(%x)
  %8: f32[3, 37] cpu = aten::pow.Tensor_Scalar(%x, 2)
  %9: f32[3, 37] cpu = aten::pow.Tensor_Scalar(%0, 1.7)
  %10: f32[3, 37] cpu = aten::clamp(%x, -0.5, 0.75)
  %11: f32[3, 37] cpu = aten::relu(%x)
  %12: f32[3, 37] cpu = aten::erf(%x)
  %13: f32[3, 37] cpu = aten::log(%x)
  %14: f32[3, 37] cpu = aten::minimum(%x, %0)
  return (%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14)
)");
}

TEST_CASE("cpu kernel: gelu, tanh and erf forms", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f32[2048] cpu):
  %0: f32[2048] cpu = aten::pow.Tensor_Scalar(%x, 3)
  %1: f32[2048] cpu = aten::mul.Tensor(%0, 0.044715)
  %2: f32[2048] cpu = aten::add.Tensor(%x, %1)
  %3: f32[2048] cpu = aten::mul.Tensor(%2, 0.7978845608028654)
  %4: f32[2048] cpu = aten::tanh(%3)
  %5: f32[2048] cpu = aten::add.Tensor(%4, 1)
  %6: f32[2048] cpu = aten::mul.Tensor(%x, 0.5)
  %7: f32[2048] cpu = aten::mul.Tensor(%6, %5)
  return (%7)
)");
  check_against_aten(R"(
graph(%x: f32[33, 65] cpu):
  %0: f32[33, 65] cpu = aten::mul.Tensor(%x, 0.7071067811865476)
  %1: f32[33, 65] cpu = aten::erf(%0)
  %2: f32[33, 65] cpu = aten::add.Tensor(%1, 1)
  %3: f32[33, 65] cpu = aten::mul.Tensor(%x, %2)
  %4: f32[33, 65] cpu = aten::mul.Tensor(%3, 0.5)
  return (%4)
)");
}

TEST_CASE("cpu kernel: layer_norm with mean and rstd outputs", "[codegen_cpu]") {
  auto kernel = check_against_aten(R"(
graph(%x: f32[37, 200] cpu, %r: f32[37, 200] cpu, %w: f32[200] cpu, %b: f32[200] cpu):
  %0: f32[37, 200] cpu = aten::add.Tensor(%x, %r)
  %1: f32[37, 1] cpu = aten::sum.dim_IntList(%0, [1], True)
  %2: f32[37, 1] cpu = aten::div.Tensor(%1, 200)
  %3: f32[37, 200] cpu = aten::sub.Tensor(%0, %2)
  %4: f32[37, 200] cpu = aten::mul.Tensor(%3, %3)
  %5: f32[37, 1] cpu = aten::sum.dim_IntList(%4, [1], True)
  %6: f32[37, 1] cpu = aten::mul.Tensor(%5, 0.005)
  %7: f32[37, 1] cpu = aten::add.Tensor(%6, 1e-05)
  %8: f32[37, 1] cpu = aten::rsqrt(%7)
  %9: f32[37, 200] cpu = aten::mul.Tensor(%3, %8)
  %10: f32[37, 200] cpu = aten::mul.Tensor(%9, %w)
  %11: f32[37, 200] cpu = aten::add.Tensor(%10, %b)
  return (%11, %2, %8)
)");
  std::string text = to_text(kernel->loop_kernel());
  INFO(text);
  // Two reductions per row, one loop over the row for the normalized output.
  CHECK(text.find("reduce sum for %i1 in 0..200") != std::string::npos);
  CHECK(text.find("reduce sum for %i2 in 0..200") != std::string::npos);
}

TEST_CASE("cpu kernel: reductions of several kinds and dtypes", "[codegen_cpu]") {
  // Over the last two dims, without keepdim.
  check_against_aten(R"(
graph(%x: f32[5, 6, 7] cpu):
  %0: f32[5] cpu = aten::sum.dim_IntList(%x, [1, 2], False)
  %1: f32[5] cpu = aten::amax(%x, [-1, -2], False)
  %2: f32[5] cpu = aten::amin(%x, [1, 2])
  %3: f32[5] cpu = aten::sub.Tensor(%1, %2)
  return (%0, %3)
)");
  // Integer sums give int64; max of ints keeps the type.
  check_against_aten(R"(
graph(%x: i32[9, 31] cpu):
  %0: i64[9] cpu = aten::sum.dim_IntList(%x, [1], False)
  %1: i32[9, 1] cpu = aten::amax(%x, [1], True)
  return (%0, %1)
)");
  // A full reduction to a 0-d tensor, then broadcast back.
  check_against_aten(R"(
graph(%x: f32[40, 50] cpu):
  %0: f32[] cpu = aten::sum.dim_IntList(%x, [0, 1], False)
  %1: f32[40, 50] cpu = aten::div.Tensor(%x, %0)
  return (%1, %0)
)");
  // float16 accumulates in float32; mean.
  check_against_aten(R"(
graph(%x: f16[4, 300] cpu, %y: f64[4, 3] cpu):
  %0: f16[4] cpu = aten::sum.dim_IntList(%x, [1], False)
  %1: f16[4, 1] cpu = aten::mean.dim(%x, [-1], True)
  return (%0, %1)
)");
}

TEST_CASE("cpu kernel: reductions over outer and middle dims", "[codegen_cpu]") {
  // A bias gradient: column sums.
  check_against_aten(R"(
graph(%g: f32[64, 33] cpu):
  %0: f32[33] cpu = aten::sum.dim_IntList(%g, [0], False)
  return (%0)
)");
  // batch_norm-like statistics over dims 0 and 2, then normalisation.
  check_against_aten(R"(
graph(%x: f32[4, 3, 20] cpu):
  %0: f32[1, 3, 1] cpu = aten::mean.dim(%x, [0, 2], True)
  %1: f32[4, 3, 20] cpu = aten::sub.Tensor(%x, %0)
  %2: f32[4, 3, 20] cpu = aten::mul.Tensor(%1, %1)
  %3: f32[1, 3, 1] cpu = aten::mean.dim(%2, [0, 2], True)
  %4: f32[1, 3, 1] cpu = aten::add.Tensor(%3, 1e-05)
  %5: f32[1, 3, 1] cpu = aten::rsqrt(%4)
  %6: f32[4, 3, 20] cpu = aten::mul.Tensor(%1, %5)
  %7: f32[4, 3, 20] cpu = aten::exp(%6)
  %8: f32[1, 3, 1] cpu = aten::sum.dim_IntList(%7, [0, 2], True)
  return (%6, %0, %5, %8)
)");
}

TEST_CASE("cpu kernel: reductions over outer dims accumulate whole rows", "[codegen_cpu]") {
  // Channels-last batch_norm statistics: mean, then variance around it (two passes).
  auto kernel = check_against_aten(R"(
graph(%x: f32[8, 5, 6, 32] cpu):
  %0: f32[1, 1, 1, 32] cpu = aten::mean.dim(%x, [0, 1, 2], True)
  %1: f32[8, 5, 6, 32] cpu = aten::sub.Tensor(%x, %0)
  %2: f32[8, 5, 6, 32] cpu = aten::mul.Tensor(%1, %1)
  %3: f32[32] cpu = aten::sum.dim_IntList(%2, [0, 1, 2], False)
  %4: f32[32] cpu = aten::mul.Tensor(%3, 0.004166666666666667)
  %5: f32[32] cpu = aten::add.Tensor(%4, 1e-05)
  %6: f32[32] cpu = aten::rsqrt(%5)
  return (%0, %6)
)");
  std::string text = to_text(kernel->loop_kernel());
  INFO(text);
  CHECK(text.find("@acc1: f64[32] temp") != std::string::npos);  // float32 sums in float64
  // Max, min and integer sums over dim 0, kept dims split into blocks of 1024.
  check_against_aten(R"(
graph(%x: i32[7, 2048] cpu, %y: f16[7, 2048] cpu):
  %0: i32[2048] cpu = aten::amax(%x, [0], False)
  %1: i32[2048] cpu = aten::amin(%x, [0], False)
  %2: i64[1, 2048] cpu = aten::sum.dim_IntList(%x, [0], True)
  %3: f16[2048] cpu = aten::amax(%y, [0], False)
  return (%0, %1, %2, %3)
)");
}

// Lanes folding a reduce each (the kept dims walk memory contiguously, the reduced one does
// not) once ran no iteration when the reduce had fewer than four iterations or a
// transcendental body: the remainder loop was emitted only after an unrolled one
// (torch.stack((a, b)).sum(0) and logsumexp over dim 0 gave the identity).
TEST_CASE("cpu kernel: lane reductions with few iterations or a transcendental body",
          "[codegen_cpu]") {
  for (int lanes : {0, 4, 8, 16}) {
    INFO("vector lanes " << lanes);
    CpuCompileOptions options = testing::uncached();
    options.vector_lanes = lanes;
    check_against_aten(R"(
graph(%x: f32[2, 10, 10] cpu):
  %0: f32[10, 10] cpu = aten::sum.dim_IntList(%x, [0], False)
  return (%0)
)",
                       1, options);
    check_against_aten(R"(
graph(%a: f32[10, 10] cpu):
  %0: f32[1, 10] cpu = aten::amax(%a, [0], True)
  %1: f32[10, 10] cpu = aten::sub.Tensor(%a, %0)
  %2: f32[10, 10] cpu = aten::exp(%1)
  %3: f32[10] cpu = aten::sum.dim_IntList(%2, [0], False)
  return (%3)
)",
                       1, options);
  }
}

TEST_CASE("cpu kernel: a row temporary read only by another reduction", "[codegen_cpu]") {
  // exp(x) feeds two reductions; with a transposed input the row loop walks memory
  // contiguously, yet the rows must not share the temporary.
  auto kernel = check_against_aten(R"(
graph(%x: f32[40, 24]{1, 40} cpu):
  %0: f32[40, 24]{1, 40} cpu = aten::exp(%x)
  %1: f32[40] cpu = aten::sum.dim_IntList(%0, [1], False)
  %2: f32[40, 24]{1, 40} cpu = aten::mul.Tensor(%0, %x)
  %3: f32[40] cpu = aten::amax(%2, [1], False)
  %4: f32[40] cpu = aten::div.Tensor(%3, %1)
  return (%4)
)");
  CHECK(to_text(kernel->loop_kernel()).find("temp") != std::string::npos);
}

TEST_CASE("cpu kernel: views of inputs and of computed values", "[codegen_cpu]") {
  check_against_aten(R"(
graph(%x: f32[4, 6] cpu, %y: f32[6, 4] cpu, %z: f32[2, 3, 4] cpu):
  %0: f32[6, 4]{1, 6} cpu = aten::t(%x)
  %1: f32[6, 4] cpu = aten::add.Tensor(%0, %y)
  %2: f32[24] cpu = aten::reshape(%1, [24])
  %3: f32[2, 12] cpu = aten::reshape(%2, [2, 12])
  %4: f32[2, 3, 4] cpu = aten::view(%3, [2, 3, 4])
  %5: f32[2, 3, 4] cpu = aten::mul.Tensor(%4, %z)
  %6: f32[3, 2, 4]{4, 12, 1} cpu = aten::permute(%5, [1, 0, 2])
  %7: f32[3, 2, 4] cpu = aten::exp(%6)
  return (%7)
)");
  check_against_aten(R"(
graph(%x: f32[8, 10] cpu, %v: f32[10] cpu):
  %0: f32[8, 4]{10, 2} cpu = aten::slice.Tensor(%x, 1, 1, 9, 2)
  %1: f32[1, 10] cpu = aten::unsqueeze(%v, 0)
  %2: f32[8, 10]{0, 1} cpu = aten::expand(%1, [8, 10])
  %3: f32[8] cpu = aten::select.int(%2, 1, 3)
  %4: f32[8, 1] cpu = aten::unsqueeze(%3, 1)
  %5: f32[8, 4] cpu = aten::mul.Tensor(%0, %4)
  %6: f32[4, 8] cpu = aten::transpose.int(%5, 0, 1)
  %7: f32[4, 8, 1] cpu = aten::unsqueeze(%6, 2)
  %8: f32[4, 8] cpu = aten::squeeze.dim(%7, 2)
  %9: f32[4, 8] cpu = aten::neg(%8)
  return (%9)
)");
}

TEST_CASE("cpu kernel: tiny and empty shapes", "[codegen_cpu]") {
  // Rows shorter than a vector: scalar loops only.
  check_against_aten(R"(
graph(%x: f64[3, 5] cpu):
  %0: f64[3, 1] cpu = aten::amax(%x, [-1], True)
  %1: f64[3, 5] cpu = aten::sub.Tensor(%x, %0)
  %2: f64[3, 5] cpu = aten::exp(%1)
  %3: f64[3, 1] cpu = aten::sum.dim_IntList(%2, [-1], True)
  %4: f64[3, 5] cpu = aten::div.Tensor(%2, %3)
  return (%4)
)");
  check_against_aten(R"(
graph(%x: f32[0, 5] cpu, %y: f32[5] cpu):
  %0: f32[0, 5] cpu = aten::add.Tensor(%x, %y)
  return (%0)
)");
  check_against_aten(R"(
graph(%x: f32[4, 0] cpu):
  %0: f32[4] cpu = aten::sum.dim_IntList(%x, [1], False)
  return (%0)
)");
}

TEST_CASE("cpu kernel: an operator outside the primitives is an error", "[codegen_cpu]") {
  graph::Graph group = parse(R"(
graph(%x: f32[4, 4] cpu, %y: f32[4, 4] cpu):
  %0: f32[4, 4] cpu = aten::mm(%x, %y)
  return (%0)
)");
  Expected<std::unique_ptr<CpuKernel>> kernel = CpuKernel::compile(group, testing::uncached());
  REQUIRE(!kernel);
  CHECK(kernel.error().message.find("aten::mm") != std::string::npos);
}

// ATen has no bool kernel of abs, relu, neg and clamp: the group runs through ATen, which
// raises as eager does, instead of computing a result.
TEST_CASE("cpu kernel: abs relu neg and clamp of bool are not kernel primitives", "[codegen_cpu]") {
  for (std::string op : {"aten::abs", "aten::relu", "aten::neg"}) {
    graph::Graph group =
        parse("graph(%b: bool[4, 4] cpu):\n  %0: bool[4, 4] cpu = " + op + "(%b)\n  return (%0)\n");
    Expected<std::unique_ptr<CpuKernel>> kernel = CpuKernel::compile(group, testing::uncached());
    INFO(op);
    REQUIRE(!kernel);
    CHECK(kernel.error().message.find("on bool") != std::string::npos);
  }
  // clamp of bools with bool bounds (1.13's metadata says int64 for one bound); integer
  // bounds promote to int64, which ATen has a kernel for.
  for (std::string bounds : {"None, True", "False, None", "False, True", "%b, %b"}) {
    graph::Graph group =
        parse("graph(%b: bool[4, 4] cpu):\n  %0: i64[4, 4] cpu = aten::clamp(%b, " + bounds +
              ")\n  return (%0)\n");
    INFO(bounds);
    CHECK_FALSE(CpuKernel::compile(group, testing::uncached()));
  }
  check_against_aten(R"(
graph(%b: bool[4, 4] cpu):
  %0: i64[4, 4] cpu = aten::clamp(%b, 0, 1)
  return (%0)
)");
}

TEST_CASE("cpu kernel: inputs of another layout are rejected", "[codegen_cpu]") {
  graph::Graph group = parse(R"(
graph(%x: f32[4, 4] cpu):
  %0: f32[4, 4] cpu = aten::neg(%x)
  return (%0)
)");
  auto kernel = CpuKernel::compile(group, testing::uncached());
  REQUIRE(kernel);
  CHECK_THROWS((*kernel)->run({at::randn({4, 4}).t()}));
  CHECK_THROWS((*kernel)->run({at::randn({4, 4}, at::kDouble)}));
  CHECK_NOTHROW((*kernel)->run({at::randn({4, 4})}));
  // Into caller-provided outputs.
  at::Tensor x = at::randn({4, 4});
  at::Tensor out = at::empty({4, 4});
  (*kernel)->run_into({x}, {out});
  CHECK(at::equal(out, -x));
  CHECK_THROWS((*kernel)->run_into({x}, {at::empty({4, 4}).t()}));
  CHECK_THROWS((*kernel)->run_into({x}, {}));
}

TEST_CASE("cpu kernel: the inner loop is vectorized in the LLVM IR", "[codegen_cpu]") {
  graph::Graph group = parse(R"(
graph(%x: f32[1000] cpu, %y: f32[1000] cpu):
  %0: f32[1000] cpu = aten::mul.Tensor(%x, %y)
  %1: f32[1000] cpu = aten::exp(%0)
  return (%1)
)");
  CpuCompileOptions options;
  options.keep_llvm_ir = true;
  options.use_disk_cache = false;
  options.use_memory_cache = false;
  options.vector_lanes = 8;
  auto kernel = CpuKernel::compile(group, options);
  REQUIRE(kernel);
  const std::string& ir = (*kernel)->compilation().llvm_ir;
  INFO(ir);
  CHECK(ir.find("load <8 x float>") != std::string::npos);
  CHECK(ir.find("store <8 x float>") != std::string::npos);
  // No libm call: exp is the fast vector version.
  CHECK(ir.find("@expf") == std::string::npos);
}

}  // namespace
}  // namespace dynvm::codegen
