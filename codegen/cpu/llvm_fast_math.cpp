// Float32 math in LLVM IR: Cody-Waite range reduction with polynomials, written so every
// step is a plain vector operation (no table lookups, no branches); special values are
// patched with selects at the end.
#ifdef DYNVM_HAVE_LLVM  // the whole file: without LLVM the CPU target is absent
#include "cpu/llvm_fast_math.h"

#include <llvm/IR/Intrinsics.h>

#include <initializer_list>
#include <limits>
#include <utility>

namespace dynvm::codegen::fast_math {

namespace {

using llvm::IRBuilder;
using llvm::Value;

constexpr double kLog2e = 1.4426950408889634;
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with few significant bits so n * kLn2Hi is exact.
constexpr double kLn2Hi = 0.693359375;
constexpr double kLn2Lo = -2.1219444005469057e-4;

Value* c(IRBuilder<>& /*b*/, Value* like, double v) {
  return llvm::ConstantFP::get(like->getType(), v);
}

llvm::Type* int_type_like(Value* x) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(x->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType())) {
    return llvm::FixedVectorType::get(i32, vt->getNumElements());
  }
  return i32;
}

Value* ci(Value* like_int, int64_t v) {
  return llvm::ConstantInt::get(like_int->getType(), static_cast<uint64_t>(v), true);
}

Value* fma(IRBuilder<>& b, Value* x, Value* y, Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner: coefficients from the highest degree down.
Value* horner(IRBuilder<>& b, Value* x, std::initializer_list<double> coefficients) {
  Value* p = nullptr;
  for (double k : coefficients) p = p ? fma(b, p, x, c(b, x, k)) : c(b, x, k);
  return p;
}

Value* is_nan(IRBuilder<>& b, Value* x) { return b.CreateFCmpUNO(x, x); }

// The reduction x = n ln2 + r, |r| <= ln2/2, for x already clamped to [-104, 88.8].
struct Reduced {
  Value* n;  // float, integral
  Value* r;
};

Reduced reduce_ln2(IRBuilder<>& b, Value* x) {
  Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(x, c(b, x, kLog2e)));
  Value* r = fma(b, n, c(b, x, -kLn2Hi), x);
  r = fma(b, n, c(b, x, -kLn2Lo), r);
  return {n, r};
}

// 2^n as two factors 2^(n/2) so that n in [-150, 128] needs no denormal or infinite factor.
std::pair<Value*, Value*> pow2_factors(IRBuilder<>& b, Value* n) {
  Value* ni = b.CreateFPToSI(n, int_type_like(n));
  Value* n1 = b.CreateAShr(ni, ci(ni, 1));
  Value* n2 = b.CreateSub(ni, n1);
  auto scale = [&](Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, ci(e, 127)), ci(e, 23)), n->getType());
  };
  return {scale(n1), scale(n2)};
}

Value* clamp_exp_argument(IRBuilder<>& b, Value* x) {
  return b.CreateMinNum(b.CreateMaxNum(x, c(b, x, -104.0)), c(b, x, 88.8));
}

// e^r - 1 for |r| <= ln2/2: Taylor to degree 8, without the leading 1.
Value* expm1_reduced(IRBuilder<>& b, Value* r) {
  Value* p =
      horner(b, r, {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0});
  return b.CreateFMul(p, r);
}

// The same to degree 7 (truncation 1.2e-7 relative): enough where the result is at least
// 2.49 and feeds a division that damps the error (tanh's upper branch).
Value* expm1_reduced_short(IRBuilder<>& b, Value* r) {
  Value* p = horner(b, r, {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0});
  return b.CreateFMul(p, r);
}

}  // namespace

Value* exp(IRBuilder<>& b, Value* x) {
  // Fast path, taken when every lane has |x| < 87 (so no NaN): 2^n is one normal factor
  // and nothing needs clamping or patching. Otherwise the general path below.
  Value* in_range =
      b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), c(b, x, 87.0));
  Value* all_in_range = in_range->getType()->isVectorTy() ? b.CreateAndReduce(in_range) : in_range;
  llvm::BasicBlock* fast_block = b.GetInsertBlock();
  llvm::Function* function = fast_block->getParent();
  Reduced fast_red = reduce_ln2(b, x);
  Value* fast_p = b.CreateFAdd(expm1_reduced(b, fast_red.r), c(b, x, 1.0));
  Value* ni = b.CreateFPToSI(fast_red.n, int_type_like(x));
  Value* scale =
      b.CreateBitCast(b.CreateShl(b.CreateAdd(ni, ci(ni, 127)), ci(ni, 23)), x->getType());
  Value* fast = b.CreateFMul(fast_p, scale);
  fast_block = b.GetInsertBlock();
  auto* general_block = llvm::BasicBlock::Create(b.getContext(), "exp.general", function);
  auto* join = llvm::BasicBlock::Create(b.getContext(), "exp.join", function);
  b.CreateCondBr(all_in_range, join, general_block);

  b.SetInsertPoint(general_block);
  Reduced red = reduce_ln2(b, clamp_exp_argument(b, x));
  Value* p = b.CreateFAdd(expm1_reduced(b, red.r), c(b, x, 1.0));
  auto [s1, s2] = pow2_factors(b, red.n);
  Value* nan = is_nan(b, x);
  Value* scaled = b.CreateFMul(b.CreateFMul(p, s1), s2);
  Value* general = b.CreateSelect(nan, x, scaled);
  general_block = b.GetInsertBlock();
  b.CreateBr(join);

  b.SetInsertPoint(join);
  llvm::PHINode* result = b.CreatePHI(x->getType(), 2);
  result->addIncoming(fast, fast_block);
  result->addIncoming(general, general_block);
  return result;
}

Value* expm1(IRBuilder<>& b, Value* x) {
  Reduced red = reduce_ln2(b, clamp_exp_argument(b, x));
  Value* q = expm1_reduced(b, red.r);
  auto [s1, s2] = pow2_factors(b, red.n);
  // 2^n (1 + q) - 1 = 2^n q + (2^n - 1): exact cancellation for small n; for large n the
  // product form avoids inf - inf.
  Value* t = b.CreateFMul(s1, s2);
  Value* small = fma(b, t, q, b.CreateFSub(t, c(b, x, 1.0)));
  Value* large =
      b.CreateFSub(b.CreateFMul(b.CreateFMul(b.CreateFAdd(q, c(b, x, 1.0)), s1), s2), c(b, x, 1.0));
  Value* result = b.CreateSelect(b.CreateFCmpOGT(red.n, c(b, x, 24.0)), large, small);
  // expm1(-0) = -0; NaN stays NaN.
  result = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, x, 0.0)), x, result);
  return b.CreateSelect(is_nan(b, x), x, result);
}

Value* log(IRBuilder<>& b, Value* x) {
  // Denormals are scaled into the normal range first.
  Value* tiny = b.CreateFCmpOLT(x, c(b, x, 1.1754943508222875e-38));
  Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, c(b, x, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, int_type_like(x));
  Value* e = b.CreateSub(b.CreateLShr(bits, ci(bits, 23)), ci(bits, 127));
  Value* m = b.CreateBitCast(
      b.CreateOr(b.CreateAnd(bits, ci(bits, 0x7fffff)), ci(bits, 0x3f800000)), x->getType());
  // m in [sqrt(1/2), sqrt(2)).
  Value* big = b.CreateFCmpOGT(m, c(b, x, 1.4142135623730951));
  m = b.CreateSelect(big, b.CreateFMul(m, c(b, x, 0.5)), m);
  Value* ef = b.CreateSIToFP(e, x->getType());
  ef = b.CreateFAdd(ef, b.CreateSelect(big, c(b, x, 1.0), c(b, x, 0.0)));
  ef = b.CreateFSub(ef, b.CreateSelect(tiny, c(b, x, 23.0), c(b, x, 0.0)));
  // log(1 + f) = f - s (f - R), s = f / (2 + f), R = 2 s^2 / 3 + 2 s^4 / 5 + ...
  Value* f = b.CreateFSub(m, c(b, x, 1.0));
  Value* s = b.CreateFDiv(f, b.CreateFAdd(f, c(b, x, 2.0)));
  Value* z = b.CreateFMul(s, s);
  Value* r = b.CreateFMul(z, horner(b, z, {2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3}));
  Value* log_m = b.CreateFSub(f, b.CreateFMul(s, b.CreateFSub(f, r)));
  Value* result = fma(b, ef, c(b, x, kLn2Hi), fma(b, ef, c(b, x, kLn2Lo), log_m));
  // Special values: log(0) = -inf, log(x < 0) = nan, log(inf) = inf, nan stays nan.
  double inf = std::numeric_limits<double>::infinity();
  result = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, x, inf)), x, result);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, x, 0.0)), c(b, x, -inf), result);
  result = b.CreateSelect(b.CreateFCmpOLT(x, c(b, x, 0.0)),
                          c(b, x, std::numeric_limits<double>::quiet_NaN()), result);
  return b.CreateSelect(is_nan(b, x), x, result);
}

Value* tanh(IRBuilder<>& b, Value* x) {
  // |x| < 0.625: x + x^3 Q(x^2), Q fitted on Chebyshev nodes (relative error 6e-9).
  // Otherwise tanh(a) = e / (e + 2) with e = expm1(2a); from |x| = 10 on, tanh rounds to 1.
  Value* abs_x = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* s = b.CreateFMul(x, x);
  Value* poly = horner(b, s,
                       {0.0023136651143431664, -0.008365336805582047, 0.021776719018816948,
                        -0.05396046116948128, 0.13333310186862946, -0.3333333432674408});
  Value* near = fma(b, b.CreateFMul(x, s), poly, x);
  Value* a = b.CreateMinNum(abs_x, c(b, x, 10.0));
  // expm1(2a) for 2a in [0, 20]: 2^n needs one factor and neither overflow nor NaN care.
  Reduced red = reduce_ln2(b, b.CreateFAdd(a, a));
  Value* q = expm1_reduced_short(b, red.r);
  Value* ni = b.CreateFPToSI(red.n, int_type_like(x));
  Value* pow2 =
      b.CreateBitCast(b.CreateShl(b.CreateAdd(ni, ci(ni, 127)), ci(ni, 23)), x->getType());
  Value* e = fma(b, pow2, q, b.CreateFSub(pow2, c(b, x, 1.0)));
  Value* t = b.CreateFDiv(e, b.CreateFAdd(e, c(b, x, 2.0)));
  // NaN takes the polynomial branch (unordered compare), which propagates it.
  Value* result =
      b.CreateCopySign(b.CreateSelect(b.CreateFCmpULT(abs_x, c(b, x, 0.625)), near, t), x);
  return result;
}

Value* erf(IRBuilder<>& b, Value* x) {
  Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // |x| < 0.875: erf(x) = x P(x^2), P fitted on Chebyshev nodes (relative error 6e-8).
  Value* a2 = b.CreateFMul(a, a);
  Value* near =
      b.CreateFMul(a, horner(b, a2,
                             {8.714052091818303e-05, -0.0008220516028814018, 0.005207621492445469,
                              -0.026861969381570816, 0.11283741146326065, -0.37612637877464294,
                              1.128379225730896}));
  // Otherwise erf(x) = 1 - exp(-x^2 + S(x)), S = log(erfc(x)) + x^2 fitted in
  // u = x - 2.4375 on [0.875, 4] (absolute error 3.4e-8); erf rounds to 1 beyond 4.
  Value* a4 = b.CreateMinNum(a, c(b, x, 4.0));
  Value* u = b.CreateFSub(a4, c(b, x, 2.4375));
  Value* s = horner(
      b, u,
      {-2.1600472521754455e-08, 1.6054320894909324e-06, -1.3990461411594879e-05,
       8.342988439835608e-05, -0.00045052485074847937, 0.002301059663295746, -0.011416430585086346,
       0.05819413810968399, -0.35982340574264526, -1.5345509052276611});
  Value* far = b.CreateFSub(c(b, x, 1.0), exp(b, fma(b, b.CreateFNeg(a4), a4, s)));
  // NaN takes the polynomial branch (unordered compare), which propagates it.
  Value* result = b.CreateSelect(b.CreateFCmpULT(a, c(b, x, 0.875)), near, far);
  return b.CreateCopySign(result, x);
}

Value* sigmoid(IRBuilder<>& b, Value* x) {
  // With t = e^-|x|: 1 / (1 + t) for x >= 0, t / (1 + t) below, both without cancellation.
  Value* t = exp(b, b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  Value* s = b.CreateFDiv(c(b, x, 1.0), b.CreateFAdd(t, c(b, x, 1.0)));
  // NaN: t and s are NaN already.
  Value* non_negative = b.CreateFCmpOGE(x, c(b, x, 0.0));
  Value* product = b.CreateFMul(t, s);
  return b.CreateSelect(non_negative, s, product);
}

}  // namespace dynvm::codegen::fast_math

#endif  // DYNVM_HAVE_LLVM
