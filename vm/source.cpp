// Construction and printing of Source chains.
#include "dynvm/vm/source.h"

#include <utility>

namespace dynvm::vm {

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }

// b'...' with every byte that is not printable ASCII, a quote or a backslash as \xNN: one
// text per byte string.
std::string bytes_literal(const std::string& bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string text = "b'";
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\'' && byte != '\\') {
      text += c;
    } else {
      text += "\\x";
      text += kHex[byte >> 4];
      text += kHex[byte & 0xf];
    }
  }
  return text + "'";
}
}  // namespace

SourcePtr Source::local(std::string name, int index) {
  return SourcePtr(new Source(Kind::Local, nullptr, std::move(name), index));
}
SourcePtr Source::closure(std::string name, int index) {
  return SourcePtr(new Source(Kind::Closure, nullptr, std::move(name), index));
}
SourcePtr Source::stack(int index) {
  return SourcePtr(new Source(Kind::Stack, nullptr, "", index));
}
SourcePtr Source::global(std::string name) {
  return SourcePtr(new Source(Kind::Global, nullptr, std::move(name), 0));
}
SourcePtr Source::builtin(std::string name) {
  return SourcePtr(new Source(Kind::Builtin, nullptr, std::move(name), 0));
}
SourcePtr Source::module(std::string name) {
  return SourcePtr(new Source(Kind::Module, nullptr, std::move(name), 0));
}
SourcePtr Source::attr(SourcePtr base, std::string name) {
  return SourcePtr(new Source(Kind::Attr, std::move(base), std::move(name), 0));
}
SourcePtr Source::module_member(Kind kind, SourcePtr base, std::string name) {
  return SourcePtr(new Source(kind, std::move(base), std::move(name), 0));
}
SourcePtr Source::key(SourcePtr base, std::string key) {
  return SourcePtr(new Source(Kind::Key, std::move(base), std::move(key), 0));
}
SourcePtr Source::bytes_key(SourcePtr base, std::string bytes) {
  return SourcePtr(new Source(Kind::BytesKey, std::move(base), std::move(bytes), 0));
}
SourcePtr Source::weakref_target(SourcePtr base) {
  return SourcePtr(new Source(Kind::WeakrefTarget, std::move(base), "", 0));
}
SourcePtr Source::dict_value(SourcePtr base, int64_t position) {
  return SourcePtr(new Source(Kind::DictValue, std::move(base), "", position));
}
SourcePtr Source::item(SourcePtr base, int64_t index) {
  return SourcePtr(new Source(Kind::Index, std::move(base), "", index));
}

SourcePtr Source::module_path(SourcePtr root, const std::string& dotted, Kind last) {
  if (dotted.empty()) return root;
  SourcePtr src = std::move(root);
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    if (dot == std::string::npos) break;
    src = module_member(Kind::ModuleChild, src, dotted.substr(start, dot - start));
    start = dot + 1;
  }
  return module_member(last, src, dotted.substr(start));
}

std::string Source::to_string() const {
  switch (kind_) {
    case Kind::Local:
      return "L[" + quoted(name_) + "]";
    case Kind::Closure:
      return "C[" + quoted(name_) + "]";
    case Kind::Stack:
      return "S[" + std::to_string(index_) + "]";
    case Kind::Global:
      return "G[" + quoted(name_) + "]";
    case Kind::Builtin:
      return "B[" + quoted(name_) + "]";
    case Kind::Module:
      return "M[" + quoted(name_) + "]";
    case Kind::Attr:
    case Kind::ModuleParam:
    case Kind::ModuleBuffer:
    case Kind::ModuleChild:
      return base_->to_string() + "." + name_;
    case Kind::Key:
      return base_->to_string() + "[" + quoted(name_) + "]";
    case Kind::BytesKey:
      return base_->to_string() + "[" + bytes_literal(name_) + "]";
    case Kind::Index:
      return base_->to_string() + "[" + std::to_string(index_) + "]";
    case Kind::DictValue:
      return "list(" + base_->to_string() + ".values())[" + std::to_string(index_) + "]";
    case Kind::WeakrefTarget:
      return base_->to_string() + "()";
  }
  return "?";
}

}  // namespace dynvm::vm
