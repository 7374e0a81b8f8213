// Source chains print as Python-like paths used by guards and explain().
#include "dynvm/vm/source.h"
#include "catch.h"

using dynvm::vm::Source;

TEST_CASE("sources print as paths") {
  auto self = Source::local("self");
  auto w = Source::attr(Source::item(Source::attr(self, "layers"), 0), "weight");
  CHECK(w->to_string() == "L['self'].layers[0].weight");
  CHECK(Source::key(Source::global("cfg"), "lr")->to_string() == "G['cfg']['lr']");
  CHECK(Source::builtin("len")->to_string() == "B['len']");
}
