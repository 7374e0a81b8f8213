// Source: where a value traced by the VM came from (an argument, a global, an
// attribute or item of another source). Guards and eager reconstruction are phrased
// over sources.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dynvm::vm {

class Source;
using SourcePtr = std::shared_ptr<const Source>;

class Source {
 public:
  enum class Kind : uint8_t { Local, Global, Builtin, Attr, Item, ConstantIndex };

  static SourcePtr local(std::string name);
  static SourcePtr global(std::string name);
  static SourcePtr builtin(std::string name);
  static SourcePtr attr(SourcePtr base, std::string name);
  static SourcePtr item(SourcePtr base, int64_t index);
  static SourcePtr key(SourcePtr base, std::string key);

  Kind kind() const { return kind_; }
  const SourcePtr& base() const { return base_; }
  const std::string& name() const { return name_; }
  int64_t index() const { return index_; }

  // Python-like text, e.g. L['self'].layers[0].weight or G['torch'].
  std::string to_string() const;

 private:
  Source(Kind kind, SourcePtr base, std::string name, int64_t index)
      : kind_(kind), base_(std::move(base)), name_(std::move(name)), index_(index) {}
  Kind kind_;
  SourcePtr base_;
  std::string name_;
  int64_t index_ = 0;
};

}  // namespace dynvm::vm
