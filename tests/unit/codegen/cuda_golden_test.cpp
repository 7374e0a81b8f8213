// Golden files for the CUDA target: group -> loop IR -> launch shape and CUDA C++
// (tests/data/codegen_cuda), and NVRTC compiling every golden kernel for sm_90.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/cuda_libraries.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_pass_runner.h"
#include "dynvm/codegen/lower_group.h"
#include "dynvm/codegen/lower_loops_to_cuda.h"
#include "dynvm/graph/graph_parser.h"
#include "text_sections.h"

namespace dynvm::codegen {
namespace {

using dynvm::testing::read_file;
using dynvm::testing::section;

struct Golden {
  std::filesystem::path file;
  std::string text;
  CudaKernelSource cuda;
  std::string loop_ir;
};

std::vector<Golden> lower_goldens() {
  std::vector<std::filesystem::path> files = dynvm::testing::text_files("codegen_cuda");
  REQUIRE(files.size() >= 5);
  std::vector<Golden> goldens;
  for (const auto& file : files) {
    INFO(file.string());
    Golden g{file, read_file(file), {}, {}};
    Expected<graph::Graph> group = graph::parse_graph(section(g.text, "# group"));
    REQUIRE(group);
    Expected<LoopKernel> kernel = lower_group(*group, file.stem().string(), cuda_lower_options());
    REQUIRE(kernel);
    REQUIRE(run_loop_passes(*kernel, cuda_loop_passes()));
    g.loop_ir = to_text(*kernel);
    Expected<CudaKernelSource> cuda =
        lower_loops_to_cuda(*kernel, {}, CudaBufferUse{cuda_value_buffers(*group), {}});
    REQUIRE(cuda);
    g.cuda = std::move(*cuda);
    goldens.push_back(std::move(g));
  }
  return goldens;
}

TEST_CASE("CUDA golden files in tests/data/codegen_cuda", "[codegen][cuda][golden]") {
  bool update = std::getenv("DYNVM_UPDATE_GOLDENS") != nullptr;
  std::string_view prelude = cuda_prelude();
  for (const Golden& g : lower_goldens()) {
    INFO(g.file.string());
    REQUIRE(g.cuda.source.compare(0, prelude.size(), prelude) == 0);
    std::string body = g.cuda.source.substr(prelude.size());
    std::string launch = describe(g.cuda.launch) + "\n";
    if (update) {
      std::string head = g.text.substr(0, g.text.find("# loop IR\n"));
      std::ofstream(g.file) << head << "# loop IR\n"
                            << g.loop_ir << "# launch\n"
                            << launch << "# CUDA\n"
                            << body;
      continue;
    }
    CHECK(g.loop_ir == section(g.text, "# loop IR"));
    CHECK(launch == section(g.text, "# launch"));
    CHECK(body == section(g.text, "# CUDA"));
  }
}

TEST_CASE("CUDA lowering refuses what it cannot express", "[codegen][cuda]") {
  LoopKernel kernel;
  kernel.name = "no_parallel_loop";
  kernel.buffers.push_back({"out0", graph::DType::Float32, BufferRole::Output, 1});
  ValueId v = kernel.new_value();
  kernel.body.push_back(make_const(v, graph::DType::Float32, 1.0));
  kernel.body.push_back(make_store(0, AffineIndex{}, v));
  Expected<CudaKernelSource> cuda = lower_loops_to_cuda(kernel);
  REQUIRE_FALSE(cuda);
  CHECK(cuda.error().message.find("no_parallel_loop") != std::string::npos);
}

// The loop kernel of golden file `stem`, ready for lower_loops_to_cuda.
LoopKernel golden_kernel(const std::string& stem) {
  for (const auto& file : dynvm::testing::text_files("codegen_cuda")) {
    if (file.stem() != stem) continue;
    Expected<graph::Graph> group = graph::parse_graph(section(read_file(file), "# group"));
    REQUIRE(group);
    Expected<LoopKernel> kernel = lower_group(*group, stem, cuda_lower_options());
    REQUIRE(kernel);
    REQUIRE(run_loop_passes(*kernel, cuda_loop_passes()));
    return std::move(*kernel);
  }
  FAIL("no golden file " + stem);
  return {};
}

TEST_CASE("CUDA schedules: the block a tuner asks for, and the candidates", "[codegen][cuda]") {
  LoopKernel kernel = golden_kernel("bf16_rms_norm_vector_rows");  // rows of 2048
  Expected<CudaKernelSource> own = lower_loops_to_cuda(kernel);
  REQUIRE(own);
  CHECK(own->launch.block_threads == 256);
  CHECK(own->launch.vector_lanes == 4);
  std::vector<CudaSchedule> candidates = cuda_schedule_candidates(own->launch);
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0].block_threads == 128);
  CHECK(candidates[1].block_threads == 512);
  for (const CudaSchedule& schedule : candidates) {
    Expected<CudaKernelSource> other = lower_loops_to_cuda(kernel, schedule);
    REQUIRE(other);
    CHECK(other->launch.block_threads == schedule.block_threads);
    CHECK(other->source.find("__launch_bounds__(" + std::to_string(schedule.block_threads) + ")") !=
          std::string::npos);
    CHECK(other->source != own->source);
  }
  // 512 threads: a row of 2048 is one group of four per thread, still vectorized; 1024
  // would leave half the threads without a group, so the vector variant is dropped.
  Expected<CudaKernelSource> wide = lower_loops_to_cuda(kernel, CudaSchedule{1024});
  REQUIRE(wide);
  CHECK(wide->launch.vector_lanes == 0);
  Expected<CudaKernelSource> odd = lower_loops_to_cuda(kernel, CudaSchedule{100});
  REQUIRE_FALSE(odd);
  CHECK(odd.error().message.find("a block of 100 threads") != std::string::npos);
  // A flat kernel of 1000 iterations: 256 threads by itself, 128 and 512 to try.
  LoopKernel flat = golden_kernel("gelu_tanh");
  Expected<CudaKernelSource> gelu = lower_loops_to_cuda(flat);
  REQUIRE(gelu);
  for (const CudaSchedule& schedule : cuda_schedule_candidates(gelu->launch)) {
    CHECK(schedule.block_threads != gelu->launch.block_threads);
    CHECK(schedule.block_threads >= 32);
  }
}

// The parallel loop's extent (a batch or sequence dimension) is a kernel parameter: a
// kernel lowered again for another extent has the same source, so one compile serves
// both, and only the launch differs. An inner extent is still part of the source.
TEST_CASE("CUDA sources leave the parallel loop's extent to run time", "[codegen][cuda]") {
  auto with_parallel_extent = [](LoopKernel kernel, int64_t extent) {
    for (auto& stmt : kernel.body) {
      if (stmt->kind == LoopStmtKind::For && stmt->parallel) stmt->extents[0] = extent;
    }
    return kernel;
  };
  for (const char* stem : {"gelu_tanh", "layer_norm", "softmax", "column_sum"}) {
    INFO(stem);
    LoopKernel kernel = golden_kernel(stem);
    const int64_t extent = kernel.parallel_extent();
    Expected<CudaKernelSource> own = lower_loops_to_cuda(kernel);
    Expected<CudaKernelSource> more =
        lower_loops_to_cuda(with_parallel_extent(golden_kernel(stem), extent * 3 / 2));
    REQUIRE(own);
    REQUIRE(more);
    CHECK(more->source == own->source);
    CHECK(more->launch.iterations == own->launch.iterations * 3 / 2);
    CHECK(own->source.find("const long long dv_n)") != std::string::npos);
  }
  // layer_norm's rows of 768: rows of 700 are another kernel.
  LoopKernel rows = golden_kernel("layer_norm");
  Expected<CudaKernelSource> own = lower_loops_to_cuda(rows);
  std::function<void(LoopBlock&)> shorten = [&](LoopBlock& block) {
    for (auto& stmt : block) {
      if (!stmt->parallel) {
        for (int64_t& e : stmt->extents) e = 700;
      }
      shorten(stmt->body);
    }
  };
  shorten(rows.body);
  Expected<CudaKernelSource> shorter = lower_loops_to_cuda(rows);
  REQUIRE(own);
  REQUIRE(shorter);
  CHECK(shorter->source != own->source);
  CHECK(shorter->launch.iterations == own->launch.iterations);
}

#ifdef DYNVM_TEST_EXPECT_NVRTC
// An output written in place into an input (graph/in_place_outputs.h): both pointers may
// alias, so neither is __restrict__; the other buffers keep it. A buffer passed by value
// must be a one-element input.
TEST_CASE("CUDA buffers that may alias are not restrict", "[codegen][cuda]") {
  LoopKernel kernel = golden_kernel("cpu_scalar_by_value");  // p, g, s, out0
  Expected<CudaKernelSource> cuda = lower_loops_to_cuda(kernel, {}, CudaBufferUse{{2}, {0, 3}});
  REQUIRE(cuda);
  INFO(cuda->source);
  CHECK(cuda->source.find("(const float* p, const float* __restrict__ g, const float s_value, "
                          "float* out0, const long long dv_n)") != std::string::npos);
  CHECK_FALSE(lower_loops_to_cuda(kernel, {}, CudaBufferUse{{0}, {}}));  // p has 4096
  CHECK_FALSE(lower_loops_to_cuda(kernel, {}, CudaBufferUse{{3}, {}}));  // an output
}

// CI has the toolkit but no GPU: NVRTC compiling each golden kernel for the H200's
// architecture is what shows the generated C++ is valid CUDA.
TEST_CASE("CUDA golden kernels compile with NVRTC for sm_90", "[codegen][cuda][nvrtc]") {
  for (const Golden& g : lower_goldens()) {
    INFO(g.file.string());
    Expected<std::string> cubin =
        nvrtc_compile_to_cubin(g.cuda.source, g.cuda.name + ".cu", "sm_90");
    INFO((cubin ? std::string() : cubin.error().message));
    REQUIRE(cubin);
    CHECK(cubin->size() > 100);
    // The schedules max-autotune would time compile too.
    LoopKernel kernel = golden_kernel(g.file.stem().string());
    for (const CudaSchedule& schedule : cuda_schedule_candidates(g.cuda.launch)) {
      Expected<CudaKernelSource> other = lower_loops_to_cuda(kernel, schedule);
      REQUIRE(other);
      INFO(schedule.block_threads << " threads");
      Expected<std::string> candidate =
          nvrtc_compile_to_cubin(other->source, other->name + ".cu", "sm_90");
      INFO((candidate ? std::string() : candidate.error().message));
      CHECK(candidate);
    }
  }
}
#endif

}  // namespace
}  // namespace dynvm::codegen
