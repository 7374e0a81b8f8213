// The target list is fixed-order, explains every target that is off or unusable here, and
// a CUDA target compiles with NVRTC wherever NVRTC loads (CI has it, but no GPU).
#include "dynvm/codegen/targets.h"

#include "catch.h"
#include "dynvm/codegen/cuda_libraries.h"

using dynvm::codegen::cuda_libraries;
using dynvm::codegen::describe;
using dynvm::codegen::nvrtc_compile_to_ptx;

TEST_CASE("targets are cpu then cuda, each built and usable or explained") {
  auto targets = dynvm::codegen::targets();
  REQUIRE(targets.size() == 2);
  CHECK(targets[0].name == "cpu");
  CHECK(targets[1].name == "cuda");
  for (const auto& t : targets) {
    std::string line = describe(t);
    CHECK(line.rfind(t.name + ": ", 0) == 0);
    if (!t.built) {
      CHECK_FALSE(t.usable);
      CHECK_FALSE(t.why_not.empty());
      CHECK(line.find("not built (" + t.why_not + ")") != std::string::npos);
    } else if (t.usable) {
      CHECK_FALSE(t.toolchain.empty());
      CHECK(line.find(", usable") != std::string::npos);
    } else {
      CHECK_FALSE(t.why_unusable.empty());
      CHECK(line.find("not usable here: " + t.why_unusable) != std::string::npos);
    }
  }
  // Usable CUDA means NVRTC, a driver and a GPU were all found.
  if (targets[1].usable) {
    CHECK(cuda_libraries().nvrtc);
    CHECK(cuda_libraries().driver);
    CHECK(cuda_libraries().device_count > 0);
  }
}

#if DYNVM_TEST_EXPECT_NVRTC
// Built only where the configure step saw NVRTC beside the CUDA headers.
TEST_CASE("NVRTC loads and compiles a kernel to PTX for sm_90") {
  INFO(cuda_libraries().why_not_nvrtc);
  REQUIRE(cuda_libraries().nvrtc);
  const char* source =
      "extern \"C\" __global__ void add_one(float* x, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] += 1.0f;\n"
      "}\n";
  auto ptx = nvrtc_compile_to_ptx(source, "add_one.cu", "sm_90");
  INFO((ptx ? std::string() : ptx.error().message));
  REQUIRE(ptx);
  CHECK(ptx->find(".target sm_90") != std::string::npos);
  CHECK(ptx->find(".entry add_one") != std::string::npos);

  auto broken = nvrtc_compile_to_ptx("__global__ void f() { undeclared(); }", "broken.cu", "sm_90");
  REQUIRE_FALSE(broken);
  CHECK(broken.error().message.find("broken.cu") != std::string::npos);
  CHECK(broken.error().message.find("undeclared") != std::string::npos);  // NVRTC's log
}
#endif
