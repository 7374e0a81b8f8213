// Construction and printing of Source chains.
#include "dynvm/vm/source.h"

#include <utility>

namespace dynvm::vm {

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }
}  // namespace

SourcePtr Source::local(std::string name) {
  return SourcePtr(new Source(Kind::Local, nullptr, std::move(name), 0));
}
SourcePtr Source::global(std::string name) {
  return SourcePtr(new Source(Kind::Global, nullptr, std::move(name), 0));
}
SourcePtr Source::builtin(std::string name) {
  return SourcePtr(new Source(Kind::Builtin, nullptr, std::move(name), 0));
}
SourcePtr Source::attr(SourcePtr base, std::string name) {
  return SourcePtr(new Source(Kind::Attr, std::move(base), std::move(name), 0));
}
SourcePtr Source::item(SourcePtr base, int64_t index) {
  return SourcePtr(new Source(Kind::ConstantIndex, std::move(base), "", index));
}
SourcePtr Source::key(SourcePtr base, std::string key) {
  return SourcePtr(new Source(Kind::Item, std::move(base), std::move(key), 0));
}

std::string Source::to_string() const {
  switch (kind_) {
    case Kind::Local:
      return "L[" + quoted(name_) + "]";
    case Kind::Global:
      return "G[" + quoted(name_) + "]";
    case Kind::Builtin:
      return "B[" + quoted(name_) + "]";
    case Kind::Attr:
      return base_->to_string() + "." + name_;
    case Kind::Item:
      return base_->to_string() + "[" + quoted(name_) + "]";
    case Kind::ConstantIndex:
      return base_->to_string() + "[" + std::to_string(index_) + "]";
  }
  return "?";
}

}  // namespace dynvm::vm
