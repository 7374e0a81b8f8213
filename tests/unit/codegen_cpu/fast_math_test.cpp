// Accuracy of the CPU target's float32 exp, expm1, log, tanh, erf and sigmoid: dense sweeps
// through compiled kernels (so the vector code is what is measured) against double-precision
// std:: functions, in units in the last place of the float32 result.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/loop_ir_parser.h"

namespace dynvm::codegen {
namespace {

// Floats in order as integers: negative floats below positive ones.
int64_t ordered(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : bits;
}

float from_ordered(int64_t o) {
  int32_t bits = o < 0 ? static_cast<int32_t>((-o) | 0x80000000u) : static_cast<int32_t>(o);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Distance of `approx` from `exact` in float32 ulps at the exact value.
double ulp_error(float approx, double exact) {
  if (std::isnan(exact)) return std::isnan(approx) ? 0 : 1e9;
  if (std::isnan(approx)) return 1e9;
  float rounded = static_cast<float>(exact);
  if (std::isinf(rounded) || std::isinf(approx)) return rounded == approx ? 0 : 1e9;
  float magnitude = std::fabs(rounded);
  double ulp =
      static_cast<double>(std::nextafter(magnitude, std::numeric_limits<float>::infinity())) -
      static_cast<double>(magnitude);
  // Just below a power of two the spacing of the exact value's binade is the smaller one.
  if (std::fabs(exact) < magnitude) {
    ulp = static_cast<double>(magnitude) - static_cast<double>(std::nextafter(magnitude, 0.0f));
  }
  return std::fabs(static_cast<double>(approx) - exact) / ulp;
}

struct SweepResult {
  double max_ulp = 0;
  float worst_input = 0;
};

// Runs `op` over `count` floats spread evenly (in ordered bits) over [lo, hi].
SweepResult sweep(const std::string& op, float lo, float hi, int64_t count,
                  const std::function<double(double)>& reference) {
  std::string n = std::to_string(count);
  std::string text = "kernel sweep_" + op + "(@x: f32[" + n + "] in, @y: f32[" + n +
                     "] out) {\n  parallel for %i in 0.." + n + " {\n    %a: f32 = load @x[%i]\n" +
                     "    %b: f32 = " + op + " %a\n    store @y[%i] = %b\n  }\n}\n";
  Expected<LoopKernel> kernel = parse_loop_kernel(text);
  REQUIRE(kernel);
  CpuCompileOptions options;
  options.use_disk_cache = false;
  Expected<CpuCompiledKernel> compiled = compile_cpu_kernel(*kernel, options);
  if (!compiled) FAIL(compiled.error().message);
  std::vector<float> x(static_cast<size_t>(count));
  std::vector<float> y(static_cast<size_t>(count));
  int64_t a = ordered(lo);
  int64_t b = ordered(hi);
  for (int64_t i = 0; i < count; ++i) {
    x[static_cast<size_t>(i)] = from_ordered(a + (b - a) * i / (count - 1));
  }
  void* buffers[] = {x.data(), y.data()};
  compiled->function(buffers, nullptr, 0, count);
  SweepResult result;
  for (size_t i = 0; i < x.size(); ++i) {
    double e = ulp_error(y[i], reference(static_cast<double>(x[i])));
    if (e > result.max_ulp) {
      result.max_ulp = e;
      result.worst_input = x[i];
    }
  }
  return result;
}

constexpr int64_t kPoints = 1 << 22;

void check_sweep(const std::string& op, float lo, float hi, double bound,
                 const std::function<double(double)>& reference) {
  SweepResult r = sweep(op, lo, hi, kPoints, reference);
  INFO(op << " on [" << lo << ", " << hi << "]: max " << r.max_ulp
          << " ulp at x = " << r.worst_input);
  WARN(op << " on [" << lo << ", " << hi << "]: max " << r.max_ulp
          << " ulp at x = " << r.worst_input);
  CHECK(r.max_ulp <= bound);
}

TEST_CASE("fast math: exp within 1.5 ulp", "[codegen_cpu][fast_math]") {
  check_sweep("exp", -110.0f, 95.0f, 1.5, [](double v) { return std::exp(v); });
}

TEST_CASE("fast math: expm1 within 2 ulp", "[codegen_cpu][fast_math]") {
  check_sweep("expm1", -110.0f, 95.0f, 2.0, [](double v) { return std::expm1(v); });
}

TEST_CASE("fast math: log within 1 ulp over all positive floats", "[codegen_cpu][fast_math]") {
  check_sweep("log", std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
              1.0, [](double v) { return std::log(v); });
  check_sweep("log", 0.5f, 2.0f, 1.0, [](double v) { return std::log(v); });
}

TEST_CASE("fast math: tanh within 2 ulp", "[codegen_cpu][fast_math]") {
  check_sweep("tanh", -20.0f, 20.0f, 2.0, [](double v) { return std::tanh(v); });
}

TEST_CASE("fast math: erf within 2.5 ulp", "[codegen_cpu][fast_math]") {
  check_sweep("erf", -6.0f, 6.0f, 2.5, [](double v) { return std::erf(v); });
}

TEST_CASE("fast math: sigmoid within 3 ulp", "[codegen_cpu][fast_math]") {
  check_sweep("sigmoid", -100.0f, 100.0f, 3.0, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
}

TEST_CASE("fast math: special values", "[codegen_cpu][fast_math]") {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> inputs = {0.0f, -0.0f, inf, -inf, nan, 1.0f, -1.0f, 1e-40f, 100.0f, -100.0f};
  std::string n = std::to_string(inputs.size());
  for (const char* op : {"exp", "expm1", "log", "tanh", "erf", "sigmoid"}) {
    std::string text = std::string("kernel special(@x: f32[") + n + "] in, @y: f32[" + n +
                       "] out) {\n  parallel for %i in 0.." + n +
                       " {\n    %a: f32 = load @x[%i]\n    %b: f32 = " + op +
                       " %a\n    store @y[%i] = %b\n  }\n}\n";
    Expected<LoopKernel> kernel = parse_loop_kernel(text);
    REQUIRE(kernel);
    CpuCompileOptions options;
    options.use_disk_cache = false;
    options.vector_lanes = 1;
    Expected<CpuCompiledKernel> compiled = compile_cpu_kernel(*kernel, options);
    REQUIRE(compiled);
    std::vector<float> y(inputs.size());
    void* buffers[] = {inputs.data(), y.data()};
    compiled->function(buffers, nullptr, 0, static_cast<int64_t>(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      double x = inputs[i];
      double exact = std::string(op) == "exp"     ? std::exp(x)
                     : std::string(op) == "expm1" ? std::expm1(x)
                     : std::string(op) == "log"   ? std::log(x)
                     : std::string(op) == "tanh"  ? std::tanh(x)
                     : std::string(op) == "erf"   ? std::erf(x)
                                                  : 1.0 / (1.0 + std::exp(-x));
      INFO(op << "(" << inputs[i] << ") = " << y[i] << ", expected " << exact);
      CHECK(ulp_error(y[i], exact) <= 3.0);
      if (exact == 0.0) CHECK(std::signbit(y[i]) == std::signbit(exact));
    }
  }
}

}  // namespace
}  // namespace dynvm::codegen
