// CPU kernels against eager libtorch: gelu (tanh form) on 4M floats, softmax(x * 0.125, -1)
// on 256x1024, x + r then layer_norm on 1024x1024, and the compile time of one fused
// kernel cold and from a warm disk cache. Prints a table; never run as a test.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/graph/graph_parser.h"

namespace {

using dynvm::codegen::CpuCompileOptions;
using dynvm::codegen::CpuKernel;

// Median milliseconds of `repeats` calls after `warmup` calls.
double median_ms(const std::function<void()>& fn, int repeats = 30, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::unique_ptr<CpuKernel> compile(const std::string& text, const CpuCompileOptions& options = {}) {
  auto graph = dynvm::graph::parse_graph(text);
  if (!graph) {
    std::fprintf(stderr, "parse error: %s\n", graph.error().message.c_str());
    std::exit(1);
  }
  auto kernel = CpuKernel::compile(*graph, options);
  if (!kernel) {
    std::fprintf(stderr, "compile error: %s\n", kernel.error().message.c_str());
    std::exit(1);
  }
  return std::move(kernel).value();
}

const char* kGelu = R"(
graph(%x: f32[4194304] cpu):
  %0: f32[4194304] cpu = aten::mul.Tensor(%x, %x)
  %1: f32[4194304] cpu = aten::mul.Tensor(%0, %x)
  %2: f32[4194304] cpu = aten::mul.Tensor(%1, 0.044715)
  %3: f32[4194304] cpu = aten::add.Tensor(%x, %2)
  %4: f32[4194304] cpu = aten::mul.Tensor(%3, 0.7978845608028654)
  %5: f32[4194304] cpu = aten::tanh(%4)
  %6: f32[4194304] cpu = aten::add.Tensor(%5, 1.0)
  %7: f32[4194304] cpu = aten::mul.Tensor(%x, 0.5)
  %8: f32[4194304] cpu = aten::mul.Tensor(%7, %6)
  return (%8)
)";

const char* kSoftmax = R"(
graph(%x: f32[256, 1024] cpu):
  %0: f32[256, 1024] cpu = aten::mul.Tensor(%x, 0.125)
  %1: f32[256, 1] cpu = aten::amax(%0, [-1], True)
  %2: f32[256, 1024] cpu = aten::sub.Tensor(%0, %1)
  %3: f32[256, 1024] cpu = aten::exp(%2)
  %4: f32[256, 1] cpu = aten::sum.dim_IntList(%3, [-1], True)
  %5: f32[256, 1024] cpu = aten::div.Tensor(%3, %4)
  return (%5)
)";

const char* kAddLayerNorm = R"(
graph(%x: f32[1024, 1024] cpu, %r: f32[1024, 1024] cpu, %w: f32[1024] cpu, %b: f32[1024] cpu):
  %0: f32[1024, 1024] cpu = aten::add.Tensor(%x, %r)
  %1: f32[1024, 1] cpu = aten::sum.dim_IntList(%0, [-1], True)
  %2: f32[1024, 1] cpu = aten::mul.Tensor(%1, 0.0009765625)
  %3: f32[1024, 1024] cpu = aten::sub.Tensor(%0, %2)
  %4: f32[1024, 1024] cpu = aten::mul.Tensor(%3, %3)
  %5: f32[1024, 1] cpu = aten::sum.dim_IntList(%4, [-1], True)
  %6: f32[1024, 1] cpu = aten::mul.Tensor(%5, 0.0009765625)
  %7: f32[1024, 1] cpu = aten::add.Tensor(%6, 1e-05)
  %8: f32[1024, 1] cpu = aten::rsqrt(%7)
  %9: f32[1024, 1024] cpu = aten::mul.Tensor(%3, %8)
  %10: f32[1024, 1024] cpu = aten::mul.Tensor(%9, %w)
  %11: f32[1024, 1024] cpu = aten::add.Tensor(%10, %b)
  return (%11)
)";

void report(const char* name, double eager, double compiled, double max_diff) {
  std::printf("%-34s eager %8.3f ms   dynvm %8.3f ms   speed-up %6.2fx   max |diff| %.2e\n", name,
              eager, compiled, eager / compiled, max_diff);
}

}  // namespace

int main() {
  // Keep freed memory in the process: otherwise glibc hands the 16 MB temporaries of the
  // eager expression back to the kernel and every call pays page faults again, which
  // makes eager look several times slower than it is from Python.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Kernels compiled here go to a private cache so the cold/warm figures are honest.
  std::string cache = std::filesystem::temp_directory_path().string() + "/dynvm_kernel_bench_" +
                      std::to_string(::getpid());
  CpuCompileOptions options;
  options.cache_dir = cache;
  std::printf("threads: %d, target: %.60s...\n", at::get_num_threads(),
              dynvm::codegen::cpu_jit_target().c_str());

  {
    at::manual_seed(0);
    at::Tensor x = at::randn({4194304});
    auto kernel = compile(kGelu, options);
    std::printf("first compile in the process (gelu, LLVM and JIT start-up included): %.1f ms\n",
                kernel->compile_milliseconds());
    auto eager = [&] {
      return x * 0.5 * (1 + at::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    };
    double diff = (kernel->run({x})[0] - eager()).abs().max().item<double>();
    double t_eager = median_ms([&] { eager(); });
    double t_kernel = median_ms([&] { kernel->run({x}); });
    report("gelu (tanh form), 4M f32", t_eager, t_kernel, diff);
    // The kernel alone on a preallocated output (no allocation, one thread).
    at::Tensor out = at::empty({4194304});
    void* buffers[] = {x.data_ptr(), out.data_ptr()};
    auto function = kernel->compilation().function;
    double t_raw = median_ms([&] { function(buffers, nullptr, 0, 4194304); });
    std::printf("%-34s %8.3f ms (%.2f ns per element)\n", "  kernel function only", t_raw,
                t_raw * 1e6 / 4194304);
  }
  {
    at::Tensor x = at::randn({256, 1024});
    auto kernel = compile(kSoftmax, options);
    auto eager = [&] { return at::softmax(x * 0.125, -1); };
    double diff = (kernel->run({x})[0] - eager()).abs().max().item<double>();
    double t_eager = median_ms([&] { eager(); }, 200, 20);
    double t_kernel = median_ms([&] { kernel->run({x}); }, 200, 20);
    report("softmax(x*0.125, -1), 256x1024", t_eager, t_kernel, diff);
  }
  {
    at::Tensor x = at::randn({1024, 1024});
    at::Tensor r = at::randn({1024, 1024});
    at::Tensor w = at::randn({1024});
    at::Tensor b = at::randn({1024});
    auto kernel = compile(kAddLayerNorm, options);
    auto eager = [&] { return at::layer_norm(x + r, {1024}, w, b, 1e-5); };
    double diff = (kernel->run({x, r, w, b})[0] - eager()).abs().max().item<double>();
    double t_eager = median_ms([&] { eager(); }, 100, 10);
    double t_kernel = median_ms([&] { kernel->run({x, r, w, b}); }, 100, 10);
    report("x + r, layer_norm, 1024x1024", t_eager, t_kernel, diff);
  }
  {
    // Column sums (a bias gradient): the reduction runs over the outer dim.
    at::Tensor g = at::randn({1024, 1024});
    auto kernel = compile(R"(
graph(%g: f32[1024, 1024] cpu):
  %0: f32[1024] cpu = aten::sum.dim_IntList(%g, [0], False)
  return (%0)
)",
                          options);
    auto eager = [&] { return g.sum(0); };
    double diff = (kernel->run({g})[0] - eager()).abs().max().item<double>();
    double t_eager = median_ms([&] { eager(); }, 100, 10);
    double t_kernel = median_ms([&] { kernel->run({g}); }, 100, 10);
    report("sum(g, 0), 1024x1024", t_eager, t_kernel, diff);
  }
  {
    // Cold: a fresh cache directory, nothing in memory. Warm: the same kernel from disk.
    std::string cold_dir = cache + "_cold";
    CpuCompileOptions cold;
    cold.cache_dir = cold_dir;
    cold.use_memory_cache = false;
    std::vector<double> cold_ms;
    std::vector<double> warm_ms;
    int64_t compiled_in_warm = 0;
    for (int i = 0; i < 5; ++i) {
      std::filesystem::remove_all(cold_dir);
      auto a = compile(kSoftmax, cold);
      cold_ms.push_back(a->compile_milliseconds());
      int64_t before = dynvm::codegen::cpu_jit_compilation_count();
      auto c = compile(kSoftmax, cold);
      compiled_in_warm += dynvm::codegen::cpu_jit_compilation_count() - before;
      warm_ms.push_back(c->compile_milliseconds());
    }
    std::sort(cold_ms.begin(), cold_ms.end());
    std::sort(warm_ms.begin(), warm_ms.end());
    std::printf(
        "compile softmax kernel: cold %.1f ms (median of 5), warm disk cache %.2f ms, "
        "LLVM compilations on warm cache: %lld\n",
        cold_ms[2], warm_ms[2], static_cast<long long>(compiled_in_warm));
    auto g = compile(kGelu, cold);
    std::printf("compile gelu kernel (after the cache above): %.1f ms, compiled: %s\n",
                g->compile_milliseconds(), g->compilation().compiled ? "yes" : "no (cached)");
    std::filesystem::remove_all(cold_dir);
  }
  std::filesystem::remove_all(cache);
  return 0;
}
