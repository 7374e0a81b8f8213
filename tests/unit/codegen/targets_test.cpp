// The target list is fixed-order and explains every target that is off.
#include "dynvm/codegen/targets.h"
#include "catch.h"

TEST_CASE("compiled targets are cpu then cuda, each built or explained") {
  auto targets = dynvm::codegen::compiled_targets();
  REQUIRE(targets.size() == 2);
  CHECK(targets[0].name == "cpu");
  CHECK(targets[1].name == "cuda");
  for (const auto& t : targets) {
    if (t.built) {
      CHECK_FALSE(t.toolchain.empty());
    } else {
      CHECK_FALSE(t.why_not.empty());
    }
  }
}
