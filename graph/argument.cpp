// Construction, checked access and equality of Argument.
#include "dynvm/graph/argument.h"

#include <cstring>

#include "dynvm/graph/check.h"

namespace dynvm::graph {

namespace {

template <typename T, typename Storage>
const T& get_checked(const Storage& storage, const char* what) {
  const T* v = std::get_if<T>(&storage);
  DYNVM_GRAPH_CHECK(v != nullptr, std::string("argument is not ") + what);
  return *v;
}

}  // namespace

Argument Argument::int_list(const std::vector<int64_t>& items) {
  std::vector<Argument> list;
  list.reserve(items.size());
  for (int64_t i : items) list.push_back(integer(i));
  return Argument::list(std::move(list));
}

Argument Argument::sym_int(SymExpr v) {
  if (std::optional<int64_t> fixed = v.constant_value()) return integer(*fixed);
  return make<SymExpr>(std::move(v));
}

Argument Argument::double_list(const std::vector<double>& items) {
  std::vector<Argument> list;
  list.reserve(items.size());
  for (double d : items) list.push_back(real(d));
  return Argument::list(std::move(list));
}

Argument Argument::value_list(const std::vector<Value*>& items) {
  std::vector<Argument> list;
  list.reserve(items.size());
  for (Value* v : items) list.push_back(v != nullptr ? Argument(v) : none());
  return Argument::list(std::move(list));
}

bool Argument::as_bool() const { return get_checked<bool>(storage_, "a bool"); }
int64_t Argument::as_int() const { return get_checked<int64_t>(storage_, "an int"); }
double Argument::as_double() const { return get_checked<double>(storage_, "a double"); }
const std::string& Argument::as_string() const {
  return get_checked<std::string>(storage_, "a string");
}
DType Argument::as_dtype() const { return get_checked<DType>(storage_, "a dtype"); }
Device Argument::as_device() const { return get_checked<Device>(storage_, "a device"); }
MemoryFormat Argument::as_memory_format() const {
  return get_checked<MemoryFormat>(storage_, "a memory format");
}
Layout Argument::as_layout() const { return get_checked<Layout>(storage_, "a layout"); }
Value* Argument::as_value() const { return get_checked<Value*>(storage_, "a value"); }
const std::vector<Argument>& Argument::as_list() const {
  return get_checked<std::vector<Argument>>(storage_, "a list");
}

const SymExpr& Argument::as_sym_int() const {
  return get_checked<SymExpr>(storage_, "a symbolic int");
}

bool Argument::contains_values() const {
  bool found = false;
  for_each_value([&](Value*) { found = true; });
  return found;
}

bool operator==(const Argument& a, const Argument& b) {
  if (a.kind() != b.kind()) return false;
  if (a.kind() == Argument::Kind::Double) {
    double x = a.as_double();
    double y = b.as_double();
    return std::memcmp(&x, &y, sizeof(double)) == 0;
  }
  if (a.kind() == Argument::Kind::List) {
    const auto& xs = a.as_list();
    const auto& ys = b.as_list();
    if (xs.size() != ys.size()) return false;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i] != ys[i]) return false;
    }
    return true;
  }
  return a.storage_ == b.storage_;
}

size_t Argument::replace_value(Value* from, Value* to) {
  if (auto* v = std::get_if<Value*>(&storage_)) {
    if (*v != from) return 0;
    *v = to;
    return 1;
  }
  size_t replaced = 0;
  if (auto* items = std::get_if<std::vector<Argument>>(&storage_)) {
    for (Argument& item : *items) replaced += item.replace_value(from, to);
  }
  return replaced;
}

}  // namespace dynvm::graph
