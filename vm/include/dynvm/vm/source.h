// Source: where a value traced by the VM came from (an argument, a global, an
// attribute or item of another source). Guards and eager reconstruction are phrased
// over sources, so a source must be re-evaluable cheaply on every call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dynvm::vm {

class Source;
using SourcePtr = std::shared_ptr<const Source>;

class Source {
 public:
  enum class Kind : uint8_t {
    Local,          // a fast local of the traced frame (an argument), by localsplus index
    Closure,        // the contents of the traced function's free variable #index
    Global,         // the frame's globals[name]
    Builtin,        // the frame's builtins[name]
    Module,         // sys.modules[name]: a module imported by traced code
    Attr,           // getattr(base, name)
    ModuleParam,    // base._parameters[name] (an nn.Module's parameter)
    ModuleBuffer,   // base._buffers[name]
    ModuleChild,    // base._modules[name]
    Key,            // base[name] with a string key
    BytesKey,       // base[name] with a bytes key (name holds its bytes: os.environ._data)
    Index,          // base[index] with an integer index
    DictValue,      // the value at position `index` of the dict base, in iteration order (a
                    // dict whose keys are not constants, frozen by a DICT_VERSION guard)
    Stack,          // an entry of the traced frame's value stack (bottom = 0), when a trace
                    // starts mid-frame after a graph break
    WeakrefTarget,  // base(): the object the weak reference base refers to (None once dead)
  };

  static SourcePtr local(std::string name, int index);
  static SourcePtr closure(std::string name, int index);
  static SourcePtr stack(int index);
  static SourcePtr global(std::string name);
  static SourcePtr builtin(std::string name);
  static SourcePtr module(std::string name);
  static SourcePtr attr(SourcePtr base, std::string name);
  static SourcePtr module_member(Kind kind, SourcePtr base, std::string name);
  static SourcePtr key(SourcePtr base, std::string key);
  static SourcePtr bytes_key(SourcePtr base, std::string bytes);
  static SourcePtr item(SourcePtr base, int64_t index);
  static SourcePtr dict_value(SourcePtr base, int64_t position);
  static SourcePtr weakref_target(SourcePtr base);
  // A member of an nn.Module tree by its dotted name ("layer1.0.conv1.weight"): the
  // submodules as ModuleChild, the last part as `last` (ModuleParam, ModuleBuffer or
  // ModuleChild). An empty name is `root` itself.
  static SourcePtr module_path(SourcePtr root, const std::string& dotted, Kind last);

  Kind kind() const { return kind_; }
  const SourcePtr& base() const { return base_; }
  const std::string& name() const { return name_; }
  int64_t index() const { return index_; }

  // Python-like text, e.g. L['self'].layers[0].weight or G['torch']; also the identity
  // of a source (two sources with the same text read the same object).
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
