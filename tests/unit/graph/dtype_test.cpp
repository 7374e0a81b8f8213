// DType names, sizes and parsing round-trip.
#include "dynvm/graph/dtype.h"
#include "catch.h"

using dynvm::graph::DType;

TEST_CASE("dtype names round-trip through the parser") {
  for (DType t : {DType::Bool, DType::Int64, DType::Float16, DType::BFloat16, DType::Float32,
                  DType::Complex128}) {
    auto parsed = dynvm::graph::parse_dtype(dynvm::graph::dtype_name(t));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == t);
  }
  CHECK_FALSE(dynvm::graph::parse_dtype("float33").has_value());
}

TEST_CASE("dtype sizes and categories") {
  CHECK(dynvm::graph::dtype_itemsize(DType::BFloat16) == 2);
  CHECK(dynvm::graph::dtype_itemsize(DType::Complex64) == 8);
  CHECK(dynvm::graph::is_floating(DType::Float16));
  CHECK_FALSE(dynvm::graph::is_floating(DType::Int32));
  CHECK(dynvm::graph::is_integral(DType::Bool, true));
  CHECK_FALSE(dynvm::graph::is_integral(DType::Bool, false));
}
