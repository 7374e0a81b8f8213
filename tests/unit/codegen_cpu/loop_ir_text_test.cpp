// The loop IR's text format: round trips, renumbering, located parse errors, and a
// hand-written kernel compiled and run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/coalesce_loops.h"
#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/loop_ir_parser.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_ir_verify.h"

namespace dynvm::codegen {
namespace {

LoopKernel parse_ok(const std::string& text) {
  Expected<LoopKernel> kernel = parse_loop_kernel(text);
  if (!kernel) FAIL("parse error: " << kernel.error().message << "\n" << text);
  return std::move(kernel).value();
}

std::string parse_error(const std::string& text) {
  Expected<LoopKernel> kernel = parse_loop_kernel(text);
  if (kernel) FAIL("parsed, but an error was expected:\n" << text);
  return kernel.error().message;
}

const char* kRowSoftmax =
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
)";

TEST_CASE("loop IR: print(parse(text)) == text", "[codegen_cpu][loop_ir]") {
  CHECK(to_text(parse_ok(kRowSoftmax)) == kRowSoftmax);
  const char* every_kind = R"(kernel kinds(@a: bf16[10] in, @b: i64[7] in, @c: bool[70] out) {
  parallel for %i0 in 0..7 {
    %0: i64 = load @b[%i0]
    %1: f64 = const -inf
    %2: f64 = const 1e+20
    %3: f64 = const nan
    %4: i64 = const -3
    %5: i64 = add %0, %4
    %6: i64 = rem %5, %0
    %7: bool = const 1
    for %i1 in 0..10 {
      %8: bf16 = load @a[%i1]
      %9: f32 = cast %8
      %10: f64 = cast %9
      %11: bool = lt %10, %2
      %12: bool = and %11, %7
      %13: f64 = select %12, %1, %3
      %14: bool = ne %13, %13
      store @c[10*%i0 + %i1 + -2] = %14
    }
  }
}
)";
  CHECK(to_text(parse_ok(every_kind)) == every_kind);
}

TEST_CASE("loop IR: values are renumbered in definition order", "[codegen_cpu][loop_ir]") {
  LoopKernel kernel = parse_ok(R"(
kernel k(@x: f32[8] in, @y: f32[8] out) {   # comments are allowed
  parallel for %row in 0..8 {
    %zz: f32 = load @x[%row]
    %a: f32 = neg %zz
    store @y[%row] = %a
  }
})");
  CHECK(to_text(kernel) == R"(kernel k(@x: f32[8] in, @y: f32[8] out) {
  parallel for %i0 in 0..8 {
    %0: f32 = load @x[%i0]
    %1: f32 = neg %0
    store @y[%i0] = %1
  }
}
)");
}

TEST_CASE("loop IR: parse errors say where and what", "[codegen_cpu][loop_ir]") {
  CHECK(parse_error("kernal k() {}") == "1:1: expected 'kernel', found 'kernal k() {'");
  CHECK(parse_error("kernel k(@x: f33[4] in) {}") ==
        "1:14: expected a dtype (f32, i64, bool, ...), found 'f33[4] in) {'");
  CHECK(parse_error("kernel k(@x: f32[4] in) {\n  %0: f32 = neg %1\n}")
            .find("2:17: use of undefined value %1") == 0);
  CHECK(parse_error("kernel k(@x: f32[4] in) {\n  %0: f32 = frob %1\n}")
            .find("2:13: expected an operator") == 0);
  CHECK(parse_error("kernel k(@x: f32[4] in) {\n  %0: f32 = load @y[0]\n}")
            .find("unknown buffer @y") != std::string::npos);
  CHECK(
      parse_error("kernel k() {\n  %0: f32 = reduce sum for %i in 0..4 {\n  }\n}").find("yield") !=
      std::string::npos);
  CHECK(parse_error("kernel k() {\n  for %i in 1..4 {\n  }\n}").find("loops start at 0") !=
        std::string::npos);
  // Every prefix of a valid kernel is an error, never a crash.
  std::string text = kRowSoftmax;
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    Expected<LoopKernel> kernel = parse_loop_kernel(text.substr(0, n));
    INFO(n);
    CHECK(!kernel);
  }
}

TEST_CASE("loop IR: the verifier reports ill-formed kernels", "[codegen_cpu][loop_ir]") {
  CHECK(verify_loop_kernel(parse_ok(kRowSoftmax)).empty());
  auto problems = [](const std::string& text) {
    std::vector<std::string> found = verify_loop_kernel(parse_ok(text));
    std::string all;
    for (const std::string& p : found) all += p + "\n";
    return all;
  };
  // Operand types must agree with the result.
  CHECK(problems(R"(kernel k(@x: f32[4] in, @y: f64[4] out) {
  parallel for %i in 0..4 {
    %a: f32 = load @x[%i]
    %b: f64 = neg %a
    store @y[%i] = %b
  }
})") == "neg: value 1 is f32, the result f64\n");
  // A value of a loop body is not visible after the loop.
  CHECK(problems(R"(kernel k(@x: f32[4] in, @y: f32[4] out) {
  parallel for %i in 0..4 {
    for %j in 0..4 {
      %a: f32 = load @x[%j]
    }
    store @y[%i] = %a
  }
})") == "store uses value 2 where it is not defined\n");
  // Indices are i64; parallel loops only at the top.
  CHECK(problems(R"(kernel k(@x: f32[4] in, @y: f32[4] out) {
  for %i in 0..4 {
    %a: f32 = load @x[%i]
    parallel for %j in 0..1 {
      store @y[%a] = %a
    }
  }
})") == "a parallel loop is not at the top level\nstore: index term value 1 is not i64\n");
  // Math functions want floats.
  CHECK(problems(R"(kernel k(@x: i32[4] in, @y: i32[4] out) {
  parallel for %i in 0..4 {
    %a: i32 = load @x[%i]
    %b: i32 = exp %a
    store @y[%i] = %b
  }
})") == "exp takes floating-point operands, not i32\n");
  // compile_cpu_kernel refuses what the verifier rejects.
  LoopKernel bad = parse_ok(R"(kernel k(@x: f32[4] in, @y: f64[4] out) {
  parallel for %i in 0..4 {
    %a: f32 = load @x[%i]
    %b: f64 = neg %a
    store @y[%i] = %b
  }
})");
  CpuCompileOptions options;
  options.use_disk_cache = false;
  Expected<CpuCompiledKernel> compiled = compile_cpu_kernel(bad, options);
  REQUIRE(!compiled);
  CHECK(compiled.error().message.find("invalid loop IR") != std::string::npos);
}

TEST_CASE("loop IR: coalescing merges contiguous nests only", "[codegen_cpu][loop_ir]") {
  LoopKernel kernel = parse_ok(R"(kernel k(@x: f32[24] in, @b: f32[4] in, @y: f32[24] out) {
  parallel for %i0 in 0..4 {
    for %i1 in 0..6 {
      %0: f32 = load @x[6*%i0 + %i1]
      store @y[6*%i0 + %i1] = %0
    }
  }
}
)");
  coalesce_loops(kernel);
  CHECK(to_text(kernel) == R"(kernel k(@x: f32[24] in, @b: f32[4] in, @y: f32[24] out) {
  parallel for %i0 in 0..24 {
    %0: f32 = load @x[%i0]
    store @y[%i0] = %0
  }
}
)");
  // A broadcast operand (stride 0 along %i1) keeps the nest.
  const char* broadcast = R"(kernel k(@x: f32[24] in, @b: f32[4] in, @y: f32[24] out) {
  parallel for %i0 in 0..4 {
    for %i1 in 0..6 {
      %0: f32 = load @x[6*%i0 + %i1]
      %1: f32 = load @b[%i0]
      %2: f32 = add %0, %1
      store @y[6*%i0 + %i1] = %2
    }
  }
}
)";
  LoopKernel kept = parse_ok(broadcast);
  coalesce_loops(kept);
  CHECK(to_text(kept) == broadcast);
}

TEST_CASE("loop IR: a hand-written kernel compiles and runs", "[codegen_cpu][loop_ir]") {
  // Row sums of a 3 x 37 matrix, plus the row maximum of |x|.
  LoopKernel kernel = parse_ok(R"(kernel rows(@x: f32[111] in, @sum: f32[3] out, @max: f32[3] out) {
  parallel for %r in 0..3 {
    %s: f32 = reduce sum for %c in 0..37 {
      %v: f32 = load @x[37*%r + %c]
      yield %v
    }
    %m: f32 = reduce max for %d in 0..37 {
      %w: f32 = load @x[37*%r + %d]
      %a: f32 = abs %w
      yield %a
    }
    store @sum[%r] = %s
    store @max[%r] = %m
  }
})");
  CpuCompileOptions options;
  options.use_disk_cache = false;
  Expected<CpuCompiledKernel> compiled = compile_cpu_kernel(kernel, options);
  REQUIRE(compiled);
  std::vector<float> x(111);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 23) - 11.0f;
  std::vector<float> sum(3);
  std::vector<float> max(3);
  void* buffers[] = {x.data(), sum.data(), max.data()};
  compiled->function(buffers, nullptr, 0, 3);
  for (int r = 0; r < 3; ++r) {
    float s = 0;
    float m = 0;
    for (int c = 0; c < 37; ++c) {
      s += x[static_cast<size_t>(37 * r + c)];
      m = std::max(m, std::fabs(x[static_cast<size_t>(37 * r + c)]));
    }
    CHECK(sum[static_cast<size_t>(r)] == Approx(s));
    CHECK(max[static_cast<size_t>(r)] == m);
  }
}

}  // namespace
}  // namespace dynvm::codegen
