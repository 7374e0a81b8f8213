// The primitive operator set: classification, type promotion and metadata rules.
#include "dynvm/graph/primitive_ops.h"

#include "catch.h"
#include "dynvm/graph/type_promotion.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::parse;

namespace {

using Kind = PromotionOperand::Kind;

TensorMeta meta_of(std::string_view op, const std::vector<Argument>& args,
                   const std::vector<KeywordArgument>& kwargs = {}) {
  auto meta = infer_primitive_meta(op, args, kwargs);
  INFO(op);
  if (!meta) FAIL(meta.error().message);
  return std::move(meta).value();
}

}  // namespace

TEST_CASE("promote_types follows torch.promote_types") {
  CHECK(promote_types(DType::UInt8, DType::Int8) == DType::Int16);
  CHECK(promote_types(DType::Bool, DType::Int32) == DType::Int32);
  CHECK(promote_types(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(promote_types(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promote_types(DType::Float64, DType::Complex64) == DType::Complex128);
  CHECK(promote_types(DType::Int32, DType::Int64) == DType::Int64);
}

TEST_CASE("result_type counts 0-d tensors and scalars only across categories") {
  CHECK(result_type({{Kind::Tensor, DType::Float16}, {Kind::Scalar, DType::Float64}}) ==
        DType::Float16);
  CHECK(result_type({{Kind::Tensor, DType::Int32}, {Kind::Scalar, DType::Float64}}) ==
        DType::Float32);
  CHECK(result_type({{Kind::Tensor, DType::Int32}, {Kind::Scalar, DType::Int64}}) == DType::Int32);
  CHECK(result_type({{Kind::Tensor, DType::Bool}, {Kind::Scalar, DType::Int64}}) == DType::Int64);
  CHECK(result_type({{Kind::Tensor, DType::Float32}, {Kind::ZeroDimTensor, DType::Float64}}) ==
        DType::Float32);
  CHECK(result_type({{Kind::Tensor, DType::Int32}, {Kind::ZeroDimTensor, DType::Float64}}) ==
        DType::Float64);
  CHECK(!result_type({}).has_value());
}

TEST_CASE("primitive kinds come from the one list") {
  CHECK(primitive_kind("aten::add.Tensor") == PrimitiveKind::Pointwise);
  CHECK(primitive_kind("aten::sum.dim_IntList") == PrimitiveKind::Reduction);
  CHECK(primitive_kind("aten::permute") == PrimitiveKind::View);
  CHECK(primitive_kind("aten::mm") == PrimitiveKind::Extern);
  CHECK(primitive_kind("aten::add_.Tensor") == PrimitiveKind::Extern);
  CHECK(primitive_ops().size() == 59);
  Graph g = parse(R"(
graph(%x: f32[4] cpu):
  %0: f64[4] cpu = aten::_to_copy(%x, dtype=torch.float64)
  %1: f32[4] cuda:0 = aten::_to_copy(%x, device=cuda:0)
  return (%0, %1)
)");
  CHECK(primitive_kind(*g.first_node()) == PrimitiveKind::Pointwise);
  CHECK(primitive_kind(*g.last_node()) == PrimitiveKind::Extern);
}

TEST_CASE("view metadata follows ATen") {
  Graph g;
  Value* e = g.add_input("e", ValueType::tensor(TensorMeta::contiguous(DType::Float32, {2, 3, 4})));
  CHECK(meta_of("aten::unsqueeze", {e, Argument::integer(-1)}).sizes ==
        std::vector<int64_t>{2, 3, 4, 1});
  CHECK(meta_of("aten::unsqueeze", {e, Argument::integer(1)}).strides ==
        std::vector<int64_t>{12, 12, 4, 1});
  TensorMeta p = meta_of("aten::permute", {e, Argument::int_list({2, 0, 1})});
  CHECK(p.strides == std::vector<int64_t>{1, 12, 4});
  CHECK(meta_of("aten::slice.Tensor", {e, Argument::integer(2), Argument::integer(1),
                                       Argument::integer(4), Argument::integer(2)})
            .strides == std::vector<int64_t>{12, 4, 2});
  CHECK(meta_of("aten::view", {e, Argument::int_list({6, -1})}).sizes ==
        std::vector<int64_t>{6, 4});
  CHECK(!infer_primitive_meta("aten::view", {e, Argument::int_list({5, 5})}).ok());
  CHECK(!infer_primitive_meta("aten::unsqueeze", {e, Argument::integer(4)}).ok());
}
