// Group lowering, as text: a group in, the coalesced loop kernel out.
#include <string>

#include "catch.h"
#include "dynvm/codegen/coalesce_loops.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_ir_verify.h"
#include "dynvm/codegen/lower_group.h"
#include "dynvm/graph/graph_parser.h"

namespace dynvm::codegen {
namespace {

// Float32 sums accumulate in float32 here, so that the texts show the loops' structure;
// the float64 accumulators the CPU target uses have a test of their own.
std::string lower(const std::string& group_text, const std::string& name,
                  bool double_float_sums = false) {
  Expected<graph::Graph> group = graph::parse_graph(group_text);
  if (!group) FAIL("parse error: " << group.error().message);
  LowerOptions options;
  options.double_float_sums = double_float_sums;
  Expected<LoopKernel> kernel = lower_group(*group, name, options);
  if (!kernel) FAIL("lowering error: " << kernel.error().message);
  coalesce_loops(*kernel);
  CHECK(verify_loop_kernel(*kernel).empty());
  return to_text(*kernel);
}

TEST_CASE("lower_group: softmax over the last dim: three row passes, exp saved in a row temporary",
          "[codegen_cpu][lower_group]") {
  CHECK(lower(R"(graph(%x: f32[256, 1024] cpu):
  %0: f32[256, 1024] cpu = aten::mul.Tensor(%x, 0.125)
  %1: f32[256, 1] cpu = aten::amax(%0, [-1], True)
  %2: f32[256, 1024] cpu = aten::sub.Tensor(%0, %1)
  %3: f32[256, 1024] cpu = aten::exp(%2)
  %4: f32[256, 1] cpu = aten::sum.dim_IntList(%3, [-1], True)
  %5: f32[256, 1024] cpu = aten::div.Tensor(%3, %4)
  return (%5)
)",
              "softmax") ==
        R"(kernel softmax(@x: f32[262144] in, @out0: f32[262144] out, @row0: f32[1024] temp) {
  parallel for %i0 in 0..256 {
    %0: f32 = const 0.125
    %1: f32 = reduce max for %i1 in 0..1024 {
      %2: f32 = load @x[1024*%i0 + %i1]
      %3: f32 = mul %2, %0
      yield %3
    }
    %4: f32 = reduce sum for %i2 in 0..1024 {
      %5: f32 = load @x[1024*%i0 + %i2]
      %6: f32 = mul %5, %0
      %7: f32 = sub %6, %1
      %8: f32 = exp %7
      store @row0[%i2] = %8
      yield %8
    }
    for %i3 in 0..1024 {
      %9: f32 = load @row0[%i3]
      %10: f32 = div %9, %4
      store @out0[1024*%i0 + %i3] = %10
    }
  }
}
)");
}

TEST_CASE("lower_group: layer_norm with mean and rstd outputs: the mean is computed once per row",
          "[codegen_cpu][lower_group]") {
  CHECK(
      lower(R"(graph(%x: f32[37, 200] cpu, %w: f32[200] cpu, %b: f32[200] cpu):
  %1: f32[37, 1] cpu = aten::sum.dim_IntList(%x, [1], True)
  %2: f32[37, 1] cpu = aten::div.Tensor(%1, 200)
  %3: f32[37, 200] cpu = aten::sub.Tensor(%x, %2)
  %4: f32[37, 200] cpu = aten::mul.Tensor(%3, %3)
  %5: f32[37, 1] cpu = aten::sum.dim_IntList(%4, [1], True)
  %6: f32[37, 1] cpu = aten::mul.Tensor(%5, 0.005)
  %7: f32[37, 1] cpu = aten::add.Tensor(%6, 1e-05)
  %8: f32[37, 1] cpu = aten::rsqrt(%7)
  %9: f32[37, 200] cpu = aten::mul.Tensor(%3, %8)
  %10: f32[37, 200] cpu = aten::mul.Tensor(%9, %w)
  %11: f32[37, 200] cpu = aten::add.Tensor(%10, %b)
  return (%11, %2, %8)
)",
            "layer_norm") ==
      R"(kernel layer_norm(@x: f32[7400] in, @w: f32[200] in, @b: f32[200] in, @out0: f32[7400] out, @out1: f32[37] out, @out2: f32[37] out) {
  parallel for %i0 in 0..37 {
    %0: f32 = reduce sum for %i1 in 0..200 {
      %1: f32 = load @x[200*%i0 + %i1]
      yield %1
    }
    %2: f32 = const 200.0
    %3: f32 = div %0, %2
    %4: f32 = reduce sum for %i2 in 0..200 {
      %5: f32 = load @x[200*%i0 + %i2]
      %6: f32 = sub %5, %3
      %7: f32 = mul %6, %6
      yield %7
    }
    store @out1[%i0] = %3
    %8: f32 = const 1e-05
    %9: f32 = const 0.005
    %10: f32 = mul %4, %9
    %11: f32 = add %10, %8
    %12: f32 = rsqrt %11
    store @out2[%i0] = %12
    for %i3 in 0..200 {
      %13: f32 = load @b[%i3]
      %14: f32 = load @x[200*%i0 + %i3]
      %15: f32 = sub %14, %3
      %16: f32 = mul %15, %12
      %17: f32 = load @w[%i3]
      %18: f32 = mul %16, %17
      %19: f32 = add %18, %13
      store @out0[200*%i0 + %i3] = %19
    }
  }
}
)");
}

TEST_CASE(
    "lower_group: a reshape of a computed transposed value splits the index with div/rem only "
    "where needed",
    "[codegen_cpu][lower_group]") {
  CHECK(lower(R"(graph(%x: f16[6, 4]{1, 6} cpu, %y: f32[2, 12] cpu):
  %0: f16[6, 4] cpu = aten::neg(%x)
  %1: f16[2, 12] cpu = aten::reshape(%0, [2, 12])
  %2: f32[2, 12] cpu = aten::add.Tensor(%1, %y)
  %3: bool[2, 12] cpu = aten::gt.Scalar(%2, 0)
  return (%2, %3)
)",
              "reshape") ==
        R"(kernel reshape(@x: f16[24] in, @y: f32[24] in, @out0: f32[24] out, @out1: bool[24] out) {
  parallel for %i0 in 0..2 {
    %0: i64 = const 4
    %1: f32 = const 0.0
    for %i1 in 0..12 {
      %2: f32 = load @y[12*%i0 + %i1]
      %3: i64 = div %i1, %0
      %4: i64 = rem %i1, %0
      %5: f16 = load @x[3*%i0 + %3 + 6*%4]
      %6: f32 = cast %5
      %7: f32 = neg %6
      %8: f32 = add %7, %2
      store @out0[12*%i0 + %i1] = %8
      %9: bool = gt %8, %1
      store @out1[12*%i0 + %i1] = %9
    }
  }
}
)");
}

TEST_CASE("lower_group: reductions of different shapes are an error",
          "[codegen_cpu][lower_group]") {
  Expected<graph::Graph> group = graph::parse_graph(R"(
graph(%x: f32[4, 5] cpu):
  %0: f32[5] cpu = aten::sum.dim_IntList(%x, [0], False)
  %1: f32[4] cpu = aten::sum.dim_IntList(%x, [1], False)
  return (%0, %1)
)");
  REQUIRE(group);
  Expected<LoopKernel> kernel = lower_group(*group, "k");
  REQUIRE(!kernel);
  CHECK(kernel.error().message ==
        "cannot lower the group to a CPU kernel: reductions of different shapes in one group");
}

TEST_CASE("lower_group: a reduction over an outer dim loops over columns",
          "[codegen_cpu][lower_group]") {
  CHECK(lower(R"(
graph(%x: f32[4, 5] cpu):
  %0: f32[5] cpu = aten::sum.dim_IntList(%x, [0], False)
  return (%0)
)",
              "columns") == R"(kernel columns(@x: f32[20] in, @out0: f32[5] out) {
  parallel for %i0 in 0..5 {
    %0: f32 = reduce sum for %i1 in 0..4 {
      %1: f32 = load @x[5*%i1 + %i0]
      yield %1
    }
    store @out0[%i0] = %0
  }
}
)");
}

TEST_CASE("lower_group: column sums run in up to 16 parallel blocks of columns",
          "[codegen_cpu][lower_group]") {
  // A bias gradient over 1024 columns with its full-size output: 16 blocks of 64 columns
  // (the parallel loop), each streaming every row; 1000 columns: 8 blocks of 125.
  std::string text = lower(R"(
graph(%g: f32[512, 1024] cpu, %w: f32[1024] cpu):
  %0: f32[1024] cpu = aten::sum.dim_IntList(%g, [0], False)
  %1: f32[512, 1024] cpu = aten::mul.Tensor(%g, %w)
  return (%0, %1)
)",
                           "bias");
  INFO(text);
  CHECK(text.find("parallel for %i0 in 0..16 {") != std::string::npos);
  CHECK(text.find("for %i1 in 0..64 {") != std::string::npos);
  std::string odd = lower(R"(
graph(%g: f32[7, 1000] cpu):
  %0: f32[1000] cpu = aten::sum.dim_IntList(%g, [0], False)
  return (%0)
)",
                          "odd");
  INFO(odd);
  CHECK(odd.find("parallel for %i0 in 0..8 {") != std::string::npos);
}

TEST_CASE("lower_group: float32 sums accumulate in float64 where the target asks",
          "[codegen_cpu][lower_group]") {
  // A mean: summed in float64, divided there, rounded to float32 once. Max stays float32.
  CHECK(lower(R"(
graph(%x: f32[4, 5] cpu):
  %0: f32[4] cpu = aten::mean.dim(%x, [1], False)
  %1: f32[4] cpu = aten::amax(%x, [1], False)
  return (%0, %1)
)",
              "wide", /*double_float_sums=*/true) ==
        R"(kernel wide(@x: f32[20] in, @out0: f32[4] out, @out1: f32[4] out) {
  parallel for %i0 in 0..4 {
    %0: f64 = reduce sum for %i1 in 0..5 {
      %1: f32 = load @x[5*%i0 + %i1]
      %2: f64 = cast %1
      yield %2
    }
    %3: f64 = const 5.0
    %4: f64 = div %0, %3
    %5: f32 = cast %4
    %6: f32 = reduce max for %i2 in 0..5 {
      %7: f32 = load @x[5*%i0 + %i2]
      yield %7
    }
    store @out0[%i0] = %5
    store @out1[%i0] = %6
  }
}
)");
}

TEST_CASE("lower_group: statistics over outer dims accumulate whole rows in passes",
          "[codegen_cpu][lower_group]") {
  CHECK(
      lower(R"(graph(%x: f32[8, 5, 6, 32] cpu):
  %0: f32[1, 1, 1, 32] cpu = aten::mean.dim(%x, [0, 1, 2], True)
  %1: f32[8, 5, 6, 32] cpu = aten::sub.Tensor(%x, %0)
  %2: f32[8, 5, 6, 32] cpu = aten::mul.Tensor(%1, %1)
  %3: f32[32] cpu = aten::sum.dim_IntList(%2, [0, 1, 2], False)
  %6: f32[32] cpu = aten::rsqrt(%3)
  return (%0, %6)
)",
            "bn") ==
      R"(kernel bn(@x: f32[7680] in, @out0: f32[32] out, @out1: f32[32] out, @acc0: f32[32] temp, @acc1: f32[32] temp) {
  parallel for %i0 in 0..1 {
    %0: f32 = const 0.0
    for %i1 in 0..32 {
      store @acc0[%i1] = %0
      store @acc1[%i1] = %0
    }
    for %i2 in 0..240 {
      for %i3 in 0..32 {
        %1: f32 = load @x[32*%i2 + %i3]
        %2: f32 = load @acc0[%i3]
        %3: f32 = add %2, %1
        store @acc0[%i3] = %3
      }
    }
    %4: f32 = const 240.0
    for %i4 in 0..240 {
      for %i5 in 0..32 {
        %5: f32 = load @acc0[%i5]
        %6: f32 = div %5, %4
        %7: f32 = load @x[32*%i4 + %i5]
        %8: f32 = sub %7, %6
        %9: f32 = mul %8, %8
        %10: f32 = load @acc1[%i5]
        %11: f32 = add %10, %9
        store @acc1[%i5] = %11
      }
    }
    for %i6 in 0..32 {
      %12: f32 = load @acc0[%i6]
      %13: f32 = div %12, %4
      %14: f32 = load @acc1[%i6]
      store @out0[%i6] = %13
      %15: f32 = rsqrt %14
      store @out1[%i6] = %15
    }
  }
}
)");
}

}  // namespace
}  // namespace dynvm::codegen
