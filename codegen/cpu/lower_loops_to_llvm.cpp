// Loop IR -> LLVM IR. Innermost loops are emitted twice: a vector main loop (values are
// uniform scalars, vectors, or for i64 indices `base + lane * stride`, so contiguous
// accesses become vector loads and stores, stride 0 a scalar load, others gathers) and a
// scalar remainder loop.
#ifdef DYNVM_HAVE_LLVM  // the whole file: without LLVM the CPU target is absent
#include "cpu/lower_loops_to_llvm.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cpu/llvm_fast_math.h"

namespace dynvm::codegen {

namespace {

using graph::DType;
using llvm::Value;

bool is_unsigned(DType t) { return t == DType::UInt8 || t == DType::Bool; }
bool is_float(DType t) { return graph::is_floating(t); }

// How a value exists in the code being emitted.
struct Emitted {
  Value* value = nullptr;
  bool vector = false;  // one element per lane
  bool linear = false;  // i64: lane l holds value + l * stride (value is a scalar)
  int64_t stride = 0;
};

class LlvmEmitter {
 public:
  LlvmEmitter(const LoopKernel& kernel, llvm::LLVMContext& context, llvm::Module& module, int lanes)
      : kernel_(kernel), ctx_(context), module_(module), b_(context), lanes_(lanes) {
    // A multiply feeding an add may become one fused multiply-add (one rounding instead
    // of two), as in ATen's own kernels, which GCC compiles with FP contraction on. No
    // other fast-math freedom: NaN, infinities, signed zeros and ordering are kept.
    llvm::FastMathFlags flags;
    flags.setAllowContract(true);
    b_.setFastMathFlags(flags);
  }

  void emit(const std::string& symbol) {
    llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
    llvm::Type* i64 = b_.getInt64Ty();
    auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, symbol, module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->getArg(0)->setName("buffers");
    fn_->getArg(1)->setName("dims");
    fn_->getArg(2)->setName("begin");
    fn_->getArg(3)->setName("end");
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
      Value* slot = b_.CreateConstGEP1_64(ptr, fn_->getArg(0), i);
      buffers_.push_back(b_.CreateLoad(ptr, slot, kernel_.buffers[i].name));
    }
    values_.assign(static_cast<size_t>(kernel_.num_values), Emitted{});
    types_.assign(static_cast<size_t>(kernel_.num_values), DType::Int64);
    emit_block(kernel_.body);
    b_.CreateRetVoid();
  }

 private:
  // --- types ----------------------------------------------------------------------------

  llvm::Type* scalar_type(DType t) {
    switch (t) {
      case DType::Bool:
        return b_.getInt1Ty();
      case DType::UInt8:
      case DType::Int8:
        return b_.getInt8Ty();
      case DType::Int16:
      case DType::BFloat16:  // bits; arithmetic converts to f32
        return b_.getInt16Ty();
      case DType::Int32:
        return b_.getInt32Ty();
      case DType::Int64:
        return b_.getInt64Ty();
      case DType::Float16:
        return b_.getHalfTy();
      case DType::Float32:
        return b_.getFloatTy();
      case DType::Float64:
        return b_.getDoubleTy();
      default:
        return b_.getInt8Ty();
    }
  }

  llvm::Type* storage_type(DType t) { return t == DType::Bool ? b_.getInt8Ty() : scalar_type(t); }

  // `element` shaped like `like` (a vector of the same length, or a scalar).
  static llvm::Type* shaped(llvm::Type* element, Value* like) {
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) {
      return llvm::FixedVectorType::get(element, vt->getNumElements());
    }
    return element;
  }

  Value* splat(Value* v) { return b_.CreateVectorSplat(static_cast<unsigned>(lanes_), v); }

  Value* iota(int64_t stride) {
    std::vector<llvm::Constant*> items;
    for (int l = 0; l < lanes_; ++l)
      items.push_back(b_.getInt64(static_cast<uint64_t>(l * stride)));
    return llvm::ConstantVector::get(items);
  }

  Value* as_vector(const Emitted& e) {
    if (e.linear) return b_.CreateAdd(splat(e.value), iota(e.stride));
    return e.vector ? e.value : splat(e.value);
  }

  Value* constant(DType t, double real, int64_t integer, Value* like = nullptr) {
    llvm::Type* type = scalar_type(t);
    if (like) type = shaped(type, like);
    if (t == DType::BFloat16 || t == DType::Float16) {
      return cast(constant(DType::Float32, real, 0, like), DType::Float32, t);
    }
    if (is_float(t)) return llvm::ConstantFP::get(type, real);
    return llvm::ConstantInt::get(type, static_cast<uint64_t>(integer), !is_unsigned(t));
  }

  // --- conversions ----------------------------------------------------------------------

  Value* bf16_to_f32(Value* bits) {
    Value* wide = b_.CreateZExt(bits, shaped(b_.getInt32Ty(), bits));
    wide = b_.CreateShl(wide, 16);
    return b_.CreateBitCast(wide, shaped(b_.getFloatTy(), bits));
  }

  // Round to nearest even; NaN stays a (quiet) NaN.
  Value* f32_to_bf16(Value* f) {
    Value* bits = b_.CreateBitCast(f, shaped(b_.getInt32Ty(), f));
    Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), llvm::ConstantInt::get(bits->getType(), 1));
    Value* rounded =
        b_.CreateAdd(bits, b_.CreateAdd(lsb, llvm::ConstantInt::get(bits->getType(), 0x7fff)));
    Value* nan = b_.CreateFCmpUNO(f, f);
    Value* result =
        b_.CreateSelect(nan, llvm::ConstantInt::get(bits->getType(), 0x7fc00000), rounded);
    return b_.CreateTrunc(b_.CreateLShr(result, 16), shaped(b_.getInt16Ty(), f));
  }

  Value* cast(Value* v, DType from, DType to) {
    if (from == to) return v;
    if (from == DType::BFloat16) return cast(bf16_to_f32(v), DType::Float32, to);
    if (to == DType::BFloat16) return f32_to_bf16(cast(v, from, DType::Float32));
    if (from == DType::Float16 && to != DType::Float32) {
      return cast(b_.CreateFPExt(v, shaped(b_.getFloatTy(), v)), DType::Float32, to);
    }
    if (to == DType::Float16 && from != DType::Float32) {
      return cast(cast(v, from, DType::Float32), DType::Float32, to);
    }
    llvm::Type* target = shaped(scalar_type(to), v);
    if (to == DType::Bool) {
      if (is_float(from)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
      return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (from == DType::Bool) {
      return is_float(to) ? b_.CreateUIToFP(v, target) : b_.CreateZExt(v, target);
    }
    if (is_float(from) && is_float(to)) {
      return to == DType::Float64 || (to == DType::Float32 && from == DType::Float16)
                 ? b_.CreateFPExt(v, target)
                 : b_.CreateFPTrunc(v, target);
    }
    if (is_float(from)) {
      // Through i64 (i32 for narrow types) and truncation, as C++ casts behave on x86.
      if (to == DType::Int64) return b_.CreateFPToSI(v, target);
      Value* wide = b_.CreateFPToSI(v, shaped(b_.getInt32Ty(), v));
      return to == DType::Int32 ? wide : b_.CreateTrunc(wide, target);
    }
    if (is_float(to)) {
      return is_unsigned(from) ? b_.CreateUIToFP(v, target) : b_.CreateSIToFP(v, target);
    }
    unsigned from_bits = v->getType()->getScalarSizeInBits();
    unsigned to_bits = target->getScalarSizeInBits();
    if (to_bits < from_bits) return b_.CreateTrunc(v, target);
    if (to_bits == from_bits) return v;
    return is_unsigned(from) ? b_.CreateZExt(v, target) : b_.CreateSExt(v, target);
  }

  // --- scalar operations (on scalars or vectors alike) ---------------------------------

  Value* libm(const char* f32_name, const char* f64_name, DType t, std::vector<Value*> args) {
    llvm::Type* element = scalar_type(t);
    std::vector<llvm::Type*> params(args.size(), element);
    llvm::FunctionCallee callee = module_.getOrInsertFunction(
        t == DType::Float64 ? f64_name : f32_name, llvm::FunctionType::get(element, params, false));
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(args[0]->getType());
    if (!vt) return b_.CreateCall(callee, args);
    Value* result = llvm::UndefValue::get(vt);
    for (unsigned l = 0; l < vt->getNumElements(); ++l) {
      std::vector<Value*> lane_args;
      for (Value* a : args) lane_args.push_back(b_.CreateExtractElement(a, l));
      result = b_.CreateInsertElement(result, b_.CreateCall(callee, lane_args), l);
    }
    return result;
  }

  Value* max_min(bool is_max, DType t, Value* a, Value* c) {
    if (is_float(t)) {
      // NaN propagates from either side, as torch's maximum/amax do.
      Value* pick = is_max ? b_.CreateFCmpOGT(a, c) : b_.CreateFCmpOLT(a, c);
      Value* r = b_.CreateSelect(pick, a, c);
      return b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, r);
    }
    Value* pick = is_unsigned(t) ? (is_max ? b_.CreateICmpUGT(a, c) : b_.CreateICmpULT(a, c))
                                 : (is_max ? b_.CreateICmpSGT(a, c) : b_.CreateICmpSLT(a, c));
    return b_.CreateSelect(pick, a, c);
  }

  Value* one(DType t, Value* like) { return constant(t, 1.0, 1, like); }

  // `type`: the result's type; `operand`: the operands' type (they differ for compares).
  Value* apply(LoopOp op, DType type, DType operand, std::vector<Value*> a) {
    if (is_storage_only(operand) && op != LoopOp::Cast && op != LoopOp::Select) {
      for (Value*& v : a) v = cast(v, operand, DType::Float32);
      Value* r = apply(op, is_storage_only(type) ? DType::Float32 : type, DType::Float32, a);
      return is_storage_only(type) ? cast(r, DType::Float32, type) : r;
    }
    bool f = is_float(operand);
    bool f32 = operand == DType::Float32;
    switch (op) {
      case LoopOp::Cast:
        return cast(a[0], operand, type);
      case LoopOp::Neg:
        return f ? b_.CreateFNeg(a[0]) : b_.CreateNeg(a[0]);
      case LoopOp::Abs:
        if (f) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a[0]);
        if (is_unsigned(operand)) return a[0];
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a[0], b_.getFalse());
      case LoopOp::Reciprocal:
        return b_.CreateFDiv(one(operand, a[0]), a[0]);
      case LoopOp::Sqrt:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a[0]);
      case LoopOp::Rsqrt:
        return b_.CreateFDiv(one(operand, a[0]),
                             b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a[0]));
      case LoopOp::Exp:
        return f32 ? fast_math::exp(b_, a[0]) : libm("expf", "exp", operand, a);
      case LoopOp::Expm1:
        return f32 ? fast_math::expm1(b_, a[0]) : libm("expm1f", "expm1", operand, a);
      case LoopOp::Log:
        return f32 ? fast_math::log(b_, a[0]) : libm("logf", "log", operand, a);
      case LoopOp::Log1p:
        return libm("log1pf", "log1p", operand, a);
      case LoopOp::Tanh:
        return f32 ? fast_math::tanh(b_, a[0]) : libm("tanhf", "tanh", operand, a);
      case LoopOp::Erf:
        return f32 ? fast_math::erf(b_, a[0]) : libm("erff", "erf", operand, a);
      case LoopOp::Sigmoid: {
        if (f32) return fast_math::sigmoid(b_, a[0]);
        Value* e = libm("expf", "exp", operand, {b_.CreateFNeg(a[0])});
        return b_.CreateFDiv(one(operand, a[0]), b_.CreateFAdd(one(operand, a[0]), e));
      }
      case LoopOp::Sin:
        return libm("sinf", "sin", operand, a);
      case LoopOp::Cos:
        return libm("cosf", "cos", operand, a);
      case LoopOp::Pow:
        return libm("powf", "pow", operand, a);
      case LoopOp::Not:
        return b_.CreateNot(a[0]);
      case LoopOp::Add:
        return f ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
      case LoopOp::Sub:
        return f ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
      case LoopOp::Mul:
        return f ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
      case LoopOp::Div:
        if (f) return b_.CreateFDiv(a[0], a[1]);
        return is_unsigned(operand) ? b_.CreateUDiv(a[0], a[1]) : b_.CreateSDiv(a[0], a[1]);
      case LoopOp::Rem:
        if (f) return b_.CreateFRem(a[0], a[1]);
        return is_unsigned(operand) ? b_.CreateURem(a[0], a[1]) : b_.CreateSRem(a[0], a[1]);
      case LoopOp::Max:
        return max_min(true, operand, a[0], a[1]);
      case LoopOp::Min:
        return max_min(false, operand, a[0], a[1]);
      case LoopOp::And:
        return b_.CreateAnd(a[0], a[1]);
      case LoopOp::Or:
        return b_.CreateOr(a[0], a[1]);
      case LoopOp::Eq:
        return f ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
      case LoopOp::Ne:
        return f ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
      case LoopOp::Lt:
        return f                      ? b_.CreateFCmpOLT(a[0], a[1])
               : is_unsigned(operand) ? b_.CreateICmpULT(a[0], a[1])
                                      : b_.CreateICmpSLT(a[0], a[1]);
      case LoopOp::Le:
        return f                      ? b_.CreateFCmpOLE(a[0], a[1])
               : is_unsigned(operand) ? b_.CreateICmpULE(a[0], a[1])
                                      : b_.CreateICmpSLE(a[0], a[1]);
      case LoopOp::Gt:
        return f                      ? b_.CreateFCmpOGT(a[0], a[1])
               : is_unsigned(operand) ? b_.CreateICmpUGT(a[0], a[1])
                                      : b_.CreateICmpSGT(a[0], a[1]);
      case LoopOp::Ge:
        return f                      ? b_.CreateFCmpOGE(a[0], a[1])
               : is_unsigned(operand) ? b_.CreateICmpUGE(a[0], a[1])
                                      : b_.CreateICmpSGE(a[0], a[1]);
      case LoopOp::Select:
        return b_.CreateSelect(a[0], a[1], a[2]);
      case LoopOp::Const:
      case LoopOp::Load:
        break;
    }
    return nullptr;
  }

  // --- statements -----------------------------------------------------------------------

  static bool has_transcendental(const LoopBlock& block) {
    for (const auto& st : block) {
      switch (st->op) {
        case LoopOp::Exp:
        case LoopOp::Expm1:
        case LoopOp::Log:
        case LoopOp::Log1p:
        case LoopOp::Tanh:
        case LoopOp::Erf:
        case LoopOp::Sigmoid:
        case LoopOp::Sin:
        case LoopOp::Cos:
        case LoopOp::Pow:
          if (st->kind == LoopStmtKind::Instr) return true;
          break;
        default:
          break;
      }
    }
    return false;
  }

  static bool has_loops(const LoopBlock& block) {
    for (const auto& s : block) {
      if (s->kind == LoopStmtKind::For || s->kind == LoopStmtKind::Reduce) return true;
    }
    return false;
  }

  void emit_block(const LoopBlock& block) {
    for (const auto& stmt : block) {
      switch (stmt->kind) {
        case LoopStmtKind::Instr:
          emit_instr(*stmt);
          break;
        case LoopStmtKind::Store:
          emit_store(*stmt);
          break;
        case LoopStmtKind::For:
          emit_for(*stmt);
          break;
        case LoopStmtKind::Reduce:
          emit_reduce(*stmt);
          break;
      }
    }
  }

  void set(ValueId id, Emitted e, DType type) {
    values_.at(static_cast<size_t>(id)) = e;
    types_.at(static_cast<size_t>(id)) = type;
  }
  const Emitted& get(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  DType type_of(ValueId id) const { return types_.at(static_cast<size_t>(id)); }

  void emit_instr(const LoopStmt& s) {
    if (s.op == LoopOp::Const) {
      set(s.result, {constant(s.type, s.real, s.integer), false, false, 0}, s.type);
      return;
    }
    if (s.op == LoopOp::Load) {
      emit_load(s);
      return;
    }
    DType operand = s.op == LoopOp::Select ? type_of(s.operands.at(1)) : type_of(s.operands.at(0));
    std::vector<const Emitted*> in;
    bool uniform = true;
    for (ValueId v : s.operands) {
      in.push_back(&get(v));
      if (in.back()->vector || in.back()->linear) uniform = false;
    }
    // i64 index arithmetic keeps the `base + lane * stride` form where it can.
    if (!uniform && s.type == DType::Int64 && (s.op == LoopOp::Add || s.op == LoopOp::Mul) &&
        !in[0]->vector && !in[1]->vector) {
      const Emitted& x = *in[0];
      const Emitted& y = *in[1];
      if (s.op == LoopOp::Add) {
        set(s.result, {b_.CreateAdd(x.value, y.value), false, true, x.stride + y.stride}, s.type);
        return;
      }
      const Emitted& lin = x.linear ? x : y;
      const Emitted& other = x.linear ? y : x;
      if (!other.linear) {
        if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(other.value)) {
          set(s.result,
              {b_.CreateMul(lin.value, other.value), false, true, lin.stride * k->getSExtValue()},
              s.type);
          return;
        }
      }
    }
    if (!uniform && s.op == LoopOp::Div && is_float(operand) && !is_storage_only(operand) &&
        !in[1]->vector && !in[1]->linear) {
      // Division by a loop-invariant value: one scalar reciprocal, then multiplications
      // (within 1 ulp of the division; ATen's softmax scales the same way).
      Value* reciprocal = b_.CreateFDiv(one(operand, nullptr), in[1]->value);
      Value* numerator = as_vector(*in[0]);
      Value* factor = splat(reciprocal);
      set(s.result, {b_.CreateFMul(numerator, factor), true, false, 0}, s.type);
      return;
    }
    std::vector<Value*> args;
    for (const Emitted* e : in) args.push_back(uniform ? e->value : as_vector(*e));
    set(s.result, {apply(s.op, s.type, operand, args), !uniform, false, 0}, s.type);
  }

  // An address: base + lane * stride (element units), or per-lane indices when general.
  struct Address {
    Value* base = nullptr;
    int64_t stride = 0;
    Value* lanes = nullptr;  // <W x i64>, set for general (gathered) addresses
  };

  Address address(const AffineIndex& index) {
    Address a;
    a.base = b_.getInt64(static_cast<uint64_t>(index.offset));
    Value* general = nullptr;
    for (const AffineIndex::Term& t : index.terms) {
      const Emitted& e = get(t.value);
      Value* k = b_.getInt64(static_cast<uint64_t>(t.coefficient));
      if (e.vector) {
        Value* term = b_.CreateMul(e.value, splat(k));
        general = general ? b_.CreateAdd(general, term) : term;
        continue;
      }
      a.base = b_.CreateAdd(a.base, b_.CreateMul(e.value, k));
      if (e.linear) a.stride += e.stride * t.coefficient;
    }
    if (general) {
      Value* based = b_.CreateAdd(general, splat(a.base));
      Value* lanes = iota(a.stride);
      a.lanes = b_.CreateAdd(based, lanes);
    }
    return a;
  }

  Value* lane_pointers(int32_t buffer, llvm::Type* element, const Address& a) {
    Value* lanes = a.lanes ? a.lanes : b_.CreateAdd(splat(a.base), iota(a.stride));
    return b_.CreateGEP(element, buffers_.at(static_cast<size_t>(buffer)), lanes);
  }

  llvm::Align align_of(llvm::Type* element) {
    return llvm::Align(std::max<uint64_t>(1, element->getScalarSizeInBits() / 8));
  }

  void emit_load(const LoopStmt& s) {
    DType dtype = kernel_.buffers.at(static_cast<size_t>(s.buffer)).dtype;
    llvm::Type* element = storage_type(dtype);
    Address a = address(s.index);
    Value* raw;
    bool vector = false;
    if (!a.lanes && (cur_lanes_ == 1 || a.stride == 0)) {
      Value* p = b_.CreateGEP(element, buffers_.at(static_cast<size_t>(s.buffer)), a.base);
      raw = b_.CreateAlignedLoad(element, p, align_of(element));
    } else if (!a.lanes && a.stride == 1) {
      Value* p = b_.CreateGEP(element, buffers_.at(static_cast<size_t>(s.buffer)), a.base);
      llvm::Type* vt = llvm::FixedVectorType::get(element, static_cast<unsigned>(lanes_));
      raw = b_.CreateAlignedLoad(vt, p, align_of(element));
      vector = true;
    } else {
      llvm::Type* vt = llvm::FixedVectorType::get(element, static_cast<unsigned>(lanes_));
      raw = b_.CreateMaskedGather(vt, lane_pointers(s.buffer, element, a), align_of(element));
      vector = true;
    }
    if (dtype == DType::Bool) raw = b_.CreateICmpNE(raw, llvm::ConstantInt::get(raw->getType(), 0));
    set(s.result, {raw, vector, false, 0}, dtype);
    if (s.type != dtype) {
      values_[static_cast<size_t>(s.result)].value = cast(raw, dtype, s.type);
      types_[static_cast<size_t>(s.result)] = s.type;
    }
  }

  void emit_store(const LoopStmt& s) {
    DType dtype = kernel_.buffers.at(static_cast<size_t>(s.buffer)).dtype;
    llvm::Type* element = storage_type(dtype);
    const Emitted& e = get(s.operands.at(0));
    DType from = type_of(s.operands.at(0));
    Address a = address(s.index);
    Value* buffer = buffers_.at(static_cast<size_t>(s.buffer));
    auto to_storage = [&](Value* v) {
      v = cast(v, from, dtype);
      return dtype == DType::Bool ? b_.CreateZExt(v, shaped(element, v)) : v;
    };
    if (!a.lanes && (cur_lanes_ == 1 || a.stride == 0)) {
      // One address for all lanes: the last lane's value is the one that stays.
      Value* v = e.vector || e.linear
                     ? b_.CreateExtractElement(as_vector(e), static_cast<uint64_t>(lanes_ - 1))
                     : e.value;
      // One statement per emitted instruction: the order of a call's arguments is
      // unspecified, and the IR must not depend on the C++ compiler.
      Value* stored = to_storage(v);
      Value* pointer = b_.CreateGEP(element, buffer, a.base);
      b_.CreateAlignedStore(stored, pointer, align_of(element));
    } else if (!a.lanes && a.stride == 1) {
      Value* stored = to_storage(as_vector(e));
      Value* pointer = b_.CreateGEP(element, buffer, a.base);
      b_.CreateAlignedStore(stored, pointer, align_of(element));
    } else {
      Value* mask = splat(b_.getTrue());
      Value* stored = to_storage(as_vector(e));
      Value* pointers = lane_pointers(s.buffer, element, a);
      b_.CreateMaskedScatter(stored, pointers, align_of(element), mask);
    }
  }

  // for (iv = start; iv + step <= end; iv += step) body(iv); returns iv at exit.
  Value* loop(Value* start, Value* end, int64_t step, const std::function<void(Value*)>& body,
              bool scalar_only) {
    llvm::BasicBlock* before = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* inside = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    iv->addIncoming(start, before);
    Value* next = b_.CreateAdd(iv, b_.getInt64(static_cast<uint64_t>(step)));
    b_.CreateCondBr(b_.CreateICmpSLE(next, end), inside, exit);
    b_.SetInsertPoint(inside);
    body(iv);
    Value* advanced = b_.CreateAdd(iv, b_.getInt64(static_cast<uint64_t>(step)));
    llvm::BranchInst* latch = b_.CreateBr(header);
    iv->addIncoming(advanced, b_.GetInsertBlock());
    if (scalar_only) {
      // The remainder of an explicitly vectorized loop: not worth vectorizing again.
      llvm::MDNode* disable =
          llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                                   llvm::ConstantAsMetadata::get(b_.getFalse())});
      auto temp = llvm::MDNode::getTemporary(ctx_, {});
      llvm::MDNode* self = llvm::MDNode::get(ctx_, {temp.get(), disable});
      self->replaceOperandWith(0, self);
      latch->setMetadata(llvm::LLVMContext::MD_loop, self);
    }
    b_.SetInsertPoint(exit);
    return iv;
  }

  bool vectorizable(const LoopBlock& body, bool dynamic, int64_t extent) const {
    return lanes_ > 1 && cur_lanes_ == 1 && !has_loops(body) && (dynamic || extent >= lanes_);
  }

  void emit_for(const LoopStmt& s) {
    ValueId var = s.vars.at(0);
    int64_t extent = s.extents.at(0);
    Value* start = s.parallel ? static_cast<Value*>(fn_->getArg(2)) : b_.getInt64(0);
    Value* end = s.parallel ? static_cast<Value*>(fn_->getArg(3))
                            : b_.getInt64(static_cast<uint64_t>(extent));
    auto scalar_body = [&](Value* iv) {
      set(var, {iv, false, false, 0}, DType::Int64);
      emit_block(s.body);
    };
    if (!vectorizable(s.body, s.parallel, extent) &&
        !outer_vectorizable(s.body, var, s.parallel, extent)) {
      loop(start, end, 1, scalar_body, false);
      return;
    }
    Value* rest = loop(
        start, end, lanes_,
        [&](Value* iv) {
          cur_lanes_ = lanes_;
          set(var, {iv, false, true, 1}, DType::Int64);
          emit_block(s.body);
          cur_lanes_ = 1;
        },
        false);
    if (s.parallel || extent % lanes_ != 0) loop(rest, end, 1, scalar_body, true);
  }

  Value* reduce_init(ReduceKind kind, DType t, Value* like) {
    double inf = std::numeric_limits<double>::infinity();
    switch (kind) {
      case ReduceKind::Sum:
        return constant(t, 0.0, 0, like);
      case ReduceKind::Max:
        if (is_float(t)) return constant(t, -inf, 0, like);
        if (is_unsigned(t)) return constant(t, 0, 0, like);
        return llvm::ConstantInt::get(
            shaped(scalar_type(t), like ? like : b_.getInt1(false)),
            llvm::APInt::getSignedMinValue(scalar_type(t)->getScalarSizeInBits()));
      case ReduceKind::Min:
        if (is_float(t)) return constant(t, inf, 0, like);
        if (is_unsigned(t))
          return llvm::Constant::getAllOnesValue(
              shaped(scalar_type(t), like ? like : b_.getInt1(false)));
        return llvm::ConstantInt::get(
            shaped(scalar_type(t), like ? like : b_.getInt1(false)),
            llvm::APInt::getSignedMaxValue(scalar_type(t)->getScalarSizeInBits()));
    }
    return nullptr;
  }

  Value* combine(ReduceKind kind, DType t, Value* acc, Value* x) {
    switch (kind) {
      case ReduceKind::Sum:
        if (t == DType::Bool) return b_.CreateOr(acc, x);
        return is_float(t) ? b_.CreateFAdd(acc, x) : b_.CreateAdd(acc, x);
      case ReduceKind::Max:
        return max_min(true, t, acc, x);
      case ReduceKind::Min:
        return max_min(false, t, acc, x);
    }
    return nullptr;
  }

  Value* horizontal(ReduceKind kind, DType t, Value* v) {
    unsigned n = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements();
    while (n > 1) {
      unsigned half = n / 2;
      std::vector<int> lo;
      std::vector<int> hi;
      for (unsigned i = 0; i < half; ++i) {
        lo.push_back(static_cast<int>(i));
        hi.push_back(static_cast<int>(i + half));
      }
      Value* low = b_.CreateShuffleVector(v, lo);   // one statement each: argument order
      Value* high = b_.CreateShuffleVector(v, hi);  // is unspecified in C++
      v = combine(kind, t, low, high);
      n = half;
    }
    return b_.CreateExtractElement(v, uint64_t{0});
  }

  llvm::AllocaInst* entry_alloca(llvm::Type* type) {
    llvm::IRBuilder<> at(entry_, entry_->begin());
    return at.CreateAlloca(type);
  }

  // Counts loads in `block` (reduce bodies included) whose index has coefficient 1 for
  // `var`, and those with coefficient 1 for a reduce variable.
  static void count_unit_strides(const LoopBlock& block, ValueId var, int& along_var,
                                 int& along_reduce, const std::vector<ValueId>& reduce_vars) {
    for (const auto& st : block) {
      if (st->kind == LoopStmtKind::Instr && st->op == LoopOp::Load) {
        if (st->index.coefficient_of(var) == 1) ++along_var;
        for (ValueId r : reduce_vars) {
          if (st->index.coefficient_of(r) == 1) ++along_reduce;
        }
      }
      if (st->kind == LoopStmtKind::Reduce) {
        std::vector<ValueId> vars = reduce_vars;
        vars.insert(vars.end(), st->vars.begin(), st->vars.end());
        count_unit_strides(st->body, var, along_var, along_reduce, vars);
      }
    }
  }

  // A For anywhere, or a Store inside a reduce (a row temporary: one address per row, which
  // lanes running different rows would share).
  static bool has_for_or_inner_store(const LoopBlock& block, bool in_reduce) {
    for (const auto& st : block) {
      if (st->kind == LoopStmtKind::For) return true;
      if (st->kind == LoopStmtKind::Store && in_reduce) return true;
      if (st->kind == LoopStmtKind::Reduce && has_for_or_inner_store(st->body, true)) return true;
    }
    return false;
  }

  // Outer-loop vectorisation: a loop whose body holds reductions (and no loop of its own)
  // runs its lanes through the reductions together when its variable, not the reduced
  // one, walks memory contiguously (column sums: one vector of columns per row read).
  bool outer_vectorizable(const LoopBlock& body, ValueId var, bool dynamic, int64_t extent) const {
    if (lanes_ == 1 || cur_lanes_ != 1 || has_for_or_inner_store(body, false) || !has_loops(body)) {
      return false;
    }
    if (!dynamic && extent < lanes_) return false;
    int along_var = 0;
    int along_reduce = 0;
    count_unit_strides(body, var, along_var, along_reduce, {});
    return along_var > along_reduce;
  }

  // A reduce inside a vectorised loop: every lane folds its own values; the reduce's own
  // loops are scalar and the result is a vector.
  void emit_lane_reduce(const LoopStmt& s) {
    DType t = s.type;
    llvm::Type* vtype = llvm::FixedVectorType::get(scalar_type(t), static_cast<unsigned>(lanes_));
    // Cheap bodies fold into 4 accumulators in turn, hiding the combine's latency.
    int64_t inner = s.extents.back();
    int unroll = inner >= 4 && !has_transcendental(s.body) ? 4 : 1;
    std::vector<llvm::AllocaInst*> accs;
    for (int u = 0; u < unroll; ++u) {
      accs.push_back(entry_alloca(vtype));
      b_.CreateStore(reduce_init(s.reduce, t, llvm::UndefValue::get(vtype)), accs.back());
    }
    auto fold = [&](ValueId var, Value* iv, llvm::AllocaInst* acc) {
      set(var, {iv, false, false, 0}, DType::Int64);
      emit_block(s.body);
      Value* y = as_vector(get(s.yield));
      b_.CreateStore(combine(s.reduce, t, b_.CreateLoad(vtype, acc), y), acc);
    };
    std::function<void(size_t)> level = [&](size_t k) {
      Value* extent = b_.getInt64(static_cast<uint64_t>(s.extents[k]));
      if (k + 1 < s.vars.size()) {
        loop(
            b_.getInt64(0), extent, 1,
            [&](Value* iv) {
              set(s.vars[k], {iv, false, false, 0}, DType::Int64);
              level(k + 1);
            },
            false);
        return;
      }
      Value* rest = b_.getInt64(0);
      if (unroll > 1) {
        rest = loop(
            rest, extent, unroll,
            [&](Value* iv) {
              for (int u = 0; u < unroll; ++u) {
                Value* at = u == 0 ? iv : b_.CreateAdd(iv, b_.getInt64(static_cast<uint64_t>(u)));
                fold(s.vars[k], at, accs[static_cast<size_t>(u)]);
              }
            },
            false);
      }
      // Without unrolling this is the whole loop; with it, the iterations left over.
      if (unroll == 1 || s.extents[k] % unroll != 0) {
        loop(
            rest, extent, 1, [&](Value* iv) { fold(s.vars[k], iv, accs[0]); }, unroll > 1);
      }
    };
    level(0);
    Value* result = b_.CreateLoad(vtype, accs[0]);
    for (size_t u = 1; u < accs.size(); ++u) {
      result = combine(s.reduce, t, result, b_.CreateLoad(vtype, accs[u]));
    }
    set(s.result, {result, true, false, 0}, t);
  }

  void emit_reduce(const LoopStmt& s) {
    if (cur_lanes_ > 1) {
      emit_lane_reduce(s);
      return;
    }
    DType t = s.type;
    llvm::Type* type = scalar_type(t);
    llvm::AllocaInst* acc = entry_alloca(type);
    b_.CreateStore(reduce_init(s.reduce, t, nullptr), acc);
    int64_t inner = s.extents.back();
    bool vector = vectorizable(s.body, false, inner);
    llvm::Type* vtype = llvm::FixedVectorType::get(type, static_cast<unsigned>(lanes_));
    // Independent vector accumulators break the dependency chain of the combine.
    // Only cheap bodies are latency-bound by the accumulator; a transcendental body has
    // enough independent work and would just grow the code (and the compile time).
    int unroll = vector && inner >= 4 * lanes_ && !has_transcendental(s.body) ? 4 : 1;
    std::vector<llvm::AllocaInst*> vaccs;
    for (int u = 0; vector && u < unroll; ++u) {
      vaccs.push_back(entry_alloca(vtype));
      b_.CreateStore(reduce_init(s.reduce, t, llvm::UndefValue::get(vtype)), vaccs.back());
    }

    auto accumulate = [&](llvm::AllocaInst* into, llvm::Type* ty) {
      const Emitted& y = get(s.yield);
      Value* value = ty == vtype ? as_vector(y) : y.value;
      if (ty != vtype && (y.vector || y.linear))
        value = b_.CreateExtractElement(as_vector(y), uint64_t{0});
      b_.CreateStore(combine(s.reduce, t, b_.CreateLoad(ty, into), value), into);
    };
    auto vector_body = [&](ValueId var, Value* iv, int copies) {
      cur_lanes_ = lanes_;
      for (int u = 0; u < copies; ++u) {
        Value* base =
            u == 0 ? iv : b_.CreateAdd(iv, b_.getInt64(static_cast<uint64_t>(u * lanes_)));
        set(var, {base, false, true, 1}, DType::Int64);
        emit_block(s.body);
        accumulate(vaccs[static_cast<size_t>(u)], vtype);
      }
      cur_lanes_ = 1;
    };
    std::function<void(size_t)> level = [&](size_t k) {
      ValueId var = s.vars[k];
      int64_t n = s.extents[k];
      Value* extent = b_.getInt64(static_cast<uint64_t>(n));
      auto scalar_body = [&](Value* iv) {
        set(var, {iv, false, false, 0}, DType::Int64);
        if (k + 1 < s.vars.size()) {
          level(k + 1);
        } else {
          emit_block(s.body);
          accumulate(acc, type);
        }
      };
      if (k + 1 < s.vars.size() || !vector) {
        loop(b_.getInt64(0), extent, 1, scalar_body, false);
        return;
      }
      int64_t step = static_cast<int64_t>(unroll) * lanes_;
      Value* rest = loop(
          b_.getInt64(0), extent, step, [&](Value* iv) { vector_body(var, iv, unroll); }, false);
      if (unroll > 1 && (n % step) >= lanes_) {
        rest = loop(
            rest, extent, lanes_, [&](Value* iv) { vector_body(var, iv, 1); }, true);
      }
      if (n % lanes_ != 0) loop(rest, extent, 1, scalar_body, true);
    };
    level(0);
    Value* result = b_.CreateLoad(type, acc);
    if (vector) {
      Value* lanes = b_.CreateLoad(vtype, vaccs[0]);
      for (size_t u = 1; u < vaccs.size(); ++u) {
        lanes = combine(s.reduce, t, lanes, b_.CreateLoad(vtype, vaccs[u]));
      }
      result = combine(s.reduce, t, horizontal(s.reduce, t, lanes), result);
    }
    set(s.result, {result, false, false, 0}, t);
  }

  const LoopKernel& kernel_;
  llvm::LLVMContext& ctx_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  int lanes_;
  int cur_lanes_ = 1;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<Value*> buffers_;
  std::vector<Emitted> values_;
  std::vector<DType> types_;
};

}  // namespace

std::unique_ptr<llvm::Module> lower_loops_to_llvm(const LoopKernel& kernel,
                                                  llvm::LLVMContext& context,
                                                  const std::string& symbol, int lanes) {
  auto module = std::make_unique<llvm::Module>(kernel.name, context);
  LlvmEmitter(kernel, context, *module, lanes).emit(symbol);
  return module;
}

}  // namespace dynvm::codegen

#endif  // DYNVM_HAVE_LLVM
