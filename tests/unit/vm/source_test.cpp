// Source chains print as Python-like paths used by guards and explain().
#include <string>

#include "catch.h"
#include "dynvm/vm/source.h"

using dynvm::vm::Source;

TEST_CASE("sources print as paths") {
  auto self = Source::local("self", 0);
  auto layers = Source::module_member(Source::Kind::ModuleChild, self, "layers");
  auto w = Source::module_member(Source::Kind::ModuleParam, Source::item(layers, 0), "weight");
  CHECK(w->to_string() == "L['self'].layers[0].weight");
  CHECK(w->base()->base()->kind() == Source::Kind::ModuleChild);
  CHECK(Source::key(Source::global("cfg"), "lr")->to_string() == "G['cfg']['lr']");
  // Bytes keys (os.environ's storage) print as literals, one text per byte string.
  CHECK(Source::bytes_key(Source::global("env"), "PATH")->to_string() == "G['env'][b'PATH']");
  CHECK(Source::bytes_key(Source::global("env"), std::string("a'\\\n\0", 5))->to_string() ==
        "G['env'][b'a\\x27\\x5c\\x0a\\x00']");
  CHECK(Source::dict_value(Source::global("table"), 2)->to_string() ==
        "list(G['table'].values())[2]");
  CHECK(Source::builtin("len")->to_string() == "B['len']");
  CHECK(Source::weakref_target(Source::closure("opt_ref", 0))->to_string() == "C['opt_ref']()");
  CHECK(Source::module("torch.nn")->to_string() == "M['torch.nn']");
  CHECK(Source::attr(Source::closure("scale", 1), "value")->to_string() == "C['scale'].value");
}

TEST_CASE("module paths build ModuleChild chains ending in the member kind") {
  auto root = Source::local("self", 0);
  auto w = Source::module_path(root, "layer1.0.conv1.weight", Source::Kind::ModuleParam);
  CHECK(w->to_string() == "L['self'].layer1.0.conv1.weight");
  CHECK(w->kind() == Source::Kind::ModuleParam);
  CHECK(w->base()->kind() == Source::Kind::ModuleChild);
  CHECK(w->base()->name() == "conv1");
  CHECK(Source::module_path(root, "", Source::Kind::ModuleChild) == root);
  CHECK(Source::module_path(root, "fc", Source::Kind::ModuleChild)->to_string() == "L['self'].fc");
}
