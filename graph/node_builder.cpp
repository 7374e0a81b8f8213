// NodeBuilder: primitive nodes with inferred metadata, inserted at a fixed position.
#include "dynvm/graph/node_builder.h"

#include <cmath>

#include "dynvm/graph/check.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::graph {

Value* NodeBuilder::primitive(std::string op, std::vector<Argument> args,
                              std::vector<KeywordArgument> kwargs) {
  Expected<TensorMeta> meta = infer_primitive_meta(op, args, kwargs);
  DYNVM_GRAPH_CHECK(meta.ok(), meta.ok() ? std::string() : meta.error().message);
  return node(std::move(op), std::move(args), {ValueType::tensor(std::move(meta).value())},
              std::move(kwargs))
      ->output();
}

Node* NodeBuilder::node(std::string op, std::vector<Argument> args,
                        std::vector<ValueType> output_types, std::vector<KeywordArgument> kwargs) {
  if (position_ == nullptr) {
    return graph_->append(std::move(op), std::move(args), std::move(output_types),
                          std::move(kwargs));
  }
  return graph_->insert_before(position_, std::move(op), std::move(args), std::move(output_types),
                               std::move(kwargs));
}

Value* NodeBuilder::convert(Value* x, DType dtype) {
  DYNVM_GRAPH_CHECK(x->meta() != nullptr, "convert needs tensor metadata");
  if (x->meta()->dtype == dtype) return x;
  return primitive("aten::_to_copy", {x}, {{"dtype", Argument::dtype(dtype)}});
}

Value* NodeBuilder::reshape(Value* x, const std::vector<int64_t>& sizes) {
  DYNVM_GRAPH_CHECK(x->meta() != nullptr, "reshape needs tensor metadata");
  if (x->meta()->sizes == sizes) return x;
  return primitive("aten::reshape", {x, Argument::int_list(sizes)});
}

Value* NodeBuilder::sum(Value* x, const std::vector<int64_t>& dims, bool keepdim) {
  return primitive("aten::sum.dim_IntList",
                   {x, Argument::int_list(dims), Argument::boolean(keepdim)});
}

Value* NodeBuilder::zeros_like(Value* like, DType dtype) {
  return convert(binary("aten::gt.Scalar", like, Argument::real(INFINITY)), dtype);
}

Value* NodeBuilder::amax(Value* x, const std::vector<int64_t>& dims, bool keepdim) {
  return primitive("aten::amax", {x, Argument::int_list(dims), Argument::boolean(keepdim)});
}

}  // namespace dynvm::graph
