// promote_types, result_type and broadcasting, following ATen's rules.
#include "dynvm/graph/type_promotion.h"

#include <algorithm>

namespace dynvm::graph {

namespace {

bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }

// 0 bool, 1 integral, 2 floating, 3 complex.
int category(DType t) {
  if (t == DType::Bool) return 0;
  if (is_complex(t)) return 3;
  if (is_floating(t)) return 2;
  return 1;
}

// The complex type whose parts are at least as wide as `t`.
DType to_complex(DType t) { return t == DType::Float64 ? DType::Complex128 : DType::Complex64; }

// ATen's combine_categories: the higher-priority result wins unless the lower one belongs
// to a higher category (a float scalar with an int tensor gives a float).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) return is_floating(*higher) ? to_complex(*higher) : *lower;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

std::optional<DType> promote(std::optional<DType> a, DType b) {
  return a ? promote_types(*a, b) : b;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  int ca = category(a);
  int cb = category(b);
  if (ca != cb) {
    if (ca == 3 || cb == 3) {
      DType complex = ca == 3 ? a : b;
      DType other = ca == 3 ? b : a;
      return other == DType::Float64 ? DType::Complex128 : complex;
    }
    return ca > cb ? a : b;
  }
  if (ca == 1) {
    // u8 mixed with a signed type needs the next signed type that holds 255.
    if (a == DType::UInt8 || b == DType::UInt8) {
      DType other = a == DType::UInt8 ? b : a;
      return other == DType::Int8 ? DType::Int16 : other;
    }
    return dtype_itemsize(a) >= dtype_itemsize(b) ? a : b;
  }
  if (ca == 2) {
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (a == DType::BFloat16 && b == DType::Float16)) {
      return DType::Float32;
    }
    return dtype_itemsize(a) >= dtype_itemsize(b) ? a : b;
  }
  return dtype_itemsize(a) >= dtype_itemsize(b) ? a : b;
}

std::optional<DType> result_type(const std::vector<PromotionOperand>& operands) {
  std::optional<DType> dimensioned;
  std::optional<DType> zero_dim;
  std::optional<DType> scalar;
  for (const PromotionOperand& op : operands) {
    switch (op.kind) {
      case PromotionOperand::Kind::Tensor:
        dimensioned = promote(dimensioned, op.dtype);
        break;
      case PromotionOperand::Kind::ZeroDimTensor:
        zero_dim = promote(zero_dim, op.dtype);
        break;
      case PromotionOperand::Kind::Scalar: {
        // A Python float counts as the default dtype, a complex as its complex type.
        DType t = op.dtype;
        if (t == DType::Float64 || t == DType::Float32) t = DType::Float32;
        if (t == DType::Complex128) t = DType::Complex64;
        scalar = promote(scalar, t);
        break;
      }
    }
  }
  return combine(dimensioned, combine(zero_dim, scalar));
}

DType computation_dtype(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 ? DType::Float32 : dtype;
}

std::optional<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (sa == sb || sb == 1) {
      out[i] = sa;
    } else if (sa == 1) {
      out[i] = sb;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace dynvm::graph
