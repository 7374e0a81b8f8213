// Group lowering: every graph value is emitted on demand at an index (one affine index per
// dimension), so producers inline into their consumers and reductions become reduce loops
// hoisted into the row where their index is defined.
#include "dynvm/codegen/lower_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/graph/node.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/value.h"

namespace dynvm::codegen {

namespace {

using graph::Argument;
using graph::DType;
using graph::Node;
using graph::Value;
using Index = std::vector<AffineIndex>;

// Thrown inside the lowering only; lower_group turns it into an Error.
struct Unsupported {
  std::string message;
};

[[noreturn]] void unsupported(const std::string& message) { throw Unsupported{message}; }

// --- ATen's type promotion -------------------------------------------------------------

int integer_rank(DType t) {
  switch (t) {
    case DType::Int8:
      return 1;
    case DType::Int16:
      return 2;
    case DType::Int32:
      return 3;
    case DType::Int64:
      return 4;
    default:
      return 0;
  }
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = graph::is_floating(a);
  bool fb = graph::is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
    if (a == DType::Float32 || b == DType::Float32) return DType::Float32;
    return DType::Float32;  // f16 with bf16
  }
  // Both integers.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return integer_rank(a) >= integer_rank(b) ? a : b;
}

// Operands grouped as ATen does: tensors with dimensions, 0-d tensors, wrapped scalars.
struct ResultType {
  std::optional<DType> dimensioned, zero_dim, wrapped;

  static void merge(std::optional<DType>& slot, DType t) { slot = slot ? promote(*slot, t) : t; }

  static std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
    if (!higher) return lower;
    if (!lower) return higher;
    if (graph::is_floating(*higher)) return higher;
    if (*higher == DType::Bool || graph::is_floating(*lower)) return promote(*higher, *lower);
    return higher;
  }

  void add(const Argument& a) {
    switch (a.kind()) {
      case Argument::Kind::Value: {
        const graph::TensorMeta* meta = a.as_value()->meta();
        if (!meta) unsupported("a tensor operand without metadata");
        merge(meta->dim() == 0 ? zero_dim : dimensioned, meta->dtype);
        break;
      }
      case Argument::Kind::Double:
        merge(wrapped, DType::Float32);  // the default dtype
        break;
      case Argument::Kind::Int:
        merge(wrapped, DType::Int64);
        break;
      case Argument::Kind::Bool:
        merge(wrapped, DType::Bool);
        break;
      default:
        break;
    }
  }

  DType result() const {
    std::optional<DType> t = combine(dimensioned, combine(zero_dim, wrapped));
    return t ? *t : DType::Float32;
  }
};

// --- small helpers ---------------------------------------------------------------------

bool is_bool_operand(const Argument& a) {
  if (a.kind() == Argument::Kind::Bool) return true;
  if (a.kind() != Argument::Kind::Value) return false;
  const graph::TensorMeta* meta = a.as_value()->meta();
  return meta && meta->dtype == DType::Bool;
}

std::vector<int64_t> row_major(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t normalize_dim(int64_t dim, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  int64_t d = dim < 0 ? dim + std::max<int64_t>(r, 1) : dim;
  if (d < 0 || d >= std::max<int64_t>(r, 1)) unsupported("dimension out of range");
  return d;
}

const graph::TensorMeta& meta_of(const Value* v) {
  if (!v->meta()) unsupported("a tensor without metadata");
  return *v->meta();
}

// Positional argument `pos`, else keyword `name`, else nullptr.
const Argument* find_arg(const Node& node, size_t pos, const char* name) {
  if (pos < node.args().size()) return &node.args()[pos];
  return node.kwarg(name);
}

double literal_number(const Argument& a) {
  switch (a.kind()) {
    case Argument::Kind::Double:
      return a.as_double();
    case Argument::Kind::Int:
      return static_cast<double>(a.as_int());
    case Argument::Kind::Bool:
      return a.as_bool() ? 1.0 : 0.0;
    default:
      unsupported("expected a number literal");
  }
}

std::vector<int64_t> int_list(const Argument* a) {
  std::vector<int64_t> out;
  if (!a || a->is_none()) return out;
  if (a->kind() == Argument::Kind::Int) return {a->as_int()};
  if (!a->is_list()) unsupported("expected a list of ints");
  for (const Argument& item : a->as_list()) {
    if (item.kind() != Argument::Kind::Int) unsupported("expected a list of ints");
    out.push_back(item.as_int());
  }
  return out;
}

void add_term(AffineIndex& index, ValueId value, int64_t coefficient) {
  if (coefficient == 0) return;
  for (AffineIndex::Term& t : index.terms) {
    if (t.value == value) {
      t.coefficient += coefficient;
      if (t.coefficient == 0) {
        index.terms.erase(index.terms.begin() + (&t - index.terms.data()));
      }
      return;
    }
  }
  index.terms.push_back({value, coefficient});
}

AffineIndex constant_index(int64_t c) {
  AffineIndex index;
  index.offset = c;
  return index;
}

AffineIndex scaled(const AffineIndex& a, int64_t factor) {
  AffineIndex out;
  if (factor == 0) return out;
  for (const AffineIndex::Term& t : a.terms) out.terms.push_back({t.value, t.coefficient * factor});
  out.offset = a.offset * factor;
  return out;
}

void add_into(AffineIndex& into, const AffineIndex& a) {
  for (const AffineIndex::Term& t : a.terms) add_term(into, t.value, t.coefficient);
  into.offset += a.offset;
}

std::string index_key(const Index& index) {
  std::string key;
  for (const AffineIndex& a : index) {
    key += '(';
    for (const AffineIndex::Term& t : a.terms) {
      key += std::to_string(t.coefficient) + "*" + std::to_string(t.value) + "+";
    }
    key += std::to_string(a.offset) + ')';
  }
  return key;
}

// A block of statements being built; values are visible in it and in nested blocks.
struct Block {
  LoopBlock* stmts = nullptr;
  Block* parent = nullptr;
  int depth = 0;
  std::map<std::string, ValueId> memo;
  // While a loop opened in this block is being filled, statements hoisted here go before
  // it, at insert_at.
  bool child_open = false;
  size_t insert_at = 0;
};

// Appends `stmt` to `block`, before the loop still being filled there if there is one.
void insert(Block* block, std::unique_ptr<LoopStmt> stmt) {
  if (block->child_open) {
    block->stmts->insert(block->stmts->begin() + static_cast<std::ptrdiff_t>(block->insert_at++),
                         std::move(stmt));
  } else {
    block->stmts->push_back(std::move(stmt));
  }
}

class GroupLowering {
 public:
  GroupLowering(const graph::Graph& group, const std::string& name, const LowerOptions& options)
      : group_(group), options_(options) {
    kernel_.name = name;
  }

  LoopKernel run() {
    declare_buffers();
    plan_iteration_space();
    if (int64_t block = options_.column_blocks ? column_block() : 0; block > 0) {
      build_column_loops(block);
    } else {
      build_loops();
    }
    return std::move(kernel_);
  }

 private:
  // --- buffers and iteration space ----------------------------------------------------

  void declare_buffers() {
    std::set<std::string> names;
    for (const Value* input : group_.inputs()) {
      if (input->kind() != graph::ValueKind::Tensor) unsupported("a non-tensor group input");
      const graph::TensorMeta& meta = meta_of(input);
      check_dtype(meta.dtype);
      int64_t extent = 1;
      for (size_t d = 0; d < meta.dim(); ++d) {
        if (meta.sizes[d] == 0) extent = 0;
      }
      int64_t span = 0;
      for (size_t d = 0; d < meta.dim(); ++d) span += (meta.sizes[d] - 1) * meta.strides[d];
      input_buffer_[input] = static_cast<int32_t>(kernel_.buffers.size());
      kernel_.buffers.push_back(
          {input->name(), meta.dtype, BufferRole::Input, extent == 0 ? 0 : span + 1});
      names.insert(input->name());
    }
    for (size_t i = 0; i < group_.outputs().size(); ++i) {
      const Value* out = group_.outputs()[i];
      const graph::TensorMeta& meta = meta_of(out);
      check_dtype(meta.dtype);
      std::string name = "out" + std::to_string(i);
      while (names.count(name)) name += "_";
      names.insert(name);
      int64_t span = 0;
      bool empty = false;
      for (size_t d = 0; d < meta.dim(); ++d) {
        if (meta.sizes[d] == 0) empty = true;
        if (meta.strides[d] == 0 && meta.sizes[d] > 1) unsupported("an output with stride 0");
        span += (meta.sizes[d] - 1) * meta.strides[d];
      }
      kernel_.buffers.push_back({name, meta.dtype, BufferRole::Output, empty ? 0 : span + 1});
    }
  }

  static void check_dtype(DType t) {
    if (t == DType::Complex64 || t == DType::Complex128) unsupported("complex tensors");
  }

  static bool is_reduction(const std::string& op) {
    return op == "aten::sum.dim_IntList" || op == "aten::sum" || op == "aten::amax" ||
           op == "aten::amin" || op == "aten::mean.dim";
  }

  // The dims a reduction node reduces, normalized and sorted.
  static std::vector<int64_t> reduced_dims(const Node& node) {
    const graph::TensorMeta& in = meta_of(node.arg(0).as_value());
    std::vector<int64_t> dims;
    if (node.op() != "aten::sum") dims = int_list(find_arg(node, 1, "dim"));
    if (dims.empty()) {
      for (size_t d = 0; d < in.dim(); ++d) dims.push_back(static_cast<int64_t>(d));
    }
    for (int64_t& d : dims) d = normalize_dim(d, in.dim());
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    if (in.dim() == 0) dims.clear();
    return dims;
  }

  void plan_iteration_space() {
    bool have_reduction = false;
    for (const Node* node : group_.nodes()) {
      if (!is_reduction(node->op())) continue;
      const graph::TensorMeta& in = meta_of(node->arg(0).as_value());
      std::vector<int64_t> dims = reduced_dims(*node);
      if (!have_reduction) {
        full_sizes_ = in.sizes;
        reduced_ = dims;
        have_reduction = true;
      } else if (full_sizes_ != in.sizes || reduced_ != dims) {
        unsupported("reductions of different shapes in one group");
      }
    }
    if (group_.outputs().empty()) unsupported("a group without outputs");
    if (!have_reduction) full_sizes_ = meta_of(group_.outputs()[0]).sizes;
    // Rows are the kept dims, in order; the reduced dims are looped over inside a row.
    for (size_t d = 0; d < full_sizes_.size(); ++d) {
      bool reduced = std::binary_search(reduced_.begin(), reduced_.end(), static_cast<int64_t>(d));
      (reduced ? inner_dims_ : row_dims_).push_back(d);
    }
    std::vector<int64_t> row;
    for (size_t d : row_dims_) row.push_back(full_sizes_[d]);
    int64_t full_numel = 1;
    for (int64_t s : full_sizes_) full_numel *= s;
    for (const Value* out : group_.outputs()) {
      const std::vector<int64_t>& sizes = meta_of(out).sizes;
      int64_t numel = 1;
      for (int64_t s : sizes) numel *= s;
      if (sizes == full_sizes_) {
        output_is_row_.push_back(false);
      } else if (have_reduction && squeeze_ones(sizes) == squeeze_ones(row)) {
        output_is_row_.push_back(true);
      } else if (numel == full_numel && squeeze_ones(sizes) != squeeze_ones(row)) {
        // The whole iteration space under another shape (a view of it): stored at the
        // index reshaped to its sizes (store_output).
        output_is_row_.push_back(false);
      } else {
        unsupported("outputs of different shapes in a pointwise group");
      }
    }
  }

  static std::vector<int64_t> squeeze_ones(const std::vector<int64_t>& sizes) {
    std::vector<int64_t> out;
    for (int64_t s : sizes) {
      if (s != 1) out.push_back(s);
    }
    return out;
  }

  // Opens `for var in 0..extent` inside `current_` and moves into its body; returns the
  // variable. The first loop opened is the parallel one and its body the root block.
  ValueId open_loop(int64_t extent) {
    auto loop = std::make_unique<LoopStmt>();
    loop->kind = LoopStmtKind::For;
    loop->parallel = root_ == nullptr;
    loop->extents = {extent};
    LoopStmt* raw = loop.get();
    blocks_.push_back(std::make_unique<Block>());
    Block* body = blocks_.back().get();
    body->stmts = &raw->body;
    body->parent = current_;
    body->depth = current_->depth + 1;
    ValueId var = define_value(body);
    loop->vars = {var};
    value_max_[var] = std::max<int64_t>(extent - 1, 0);
    current_->stmts->push_back(std::move(loop));
    current_->insert_at = current_->stmts->size() - 1;
    current_->child_open = true;
    current_ = body;
    if (!root_) root_ = body;
    return var;
  }

  void build_loops() {
    blocks_.push_back(std::make_unique<Block>());
    Block* top = blocks_.back().get();
    top->stmts = &kernel_.body;
    current_ = top;
    // The first row loop of size > 1 is the parallel loop; without one, a loop of extent 1.
    Index row_index(row_dims_.size());
    for (size_t k : row_loop_order()) {
      int64_t size = full_sizes_[row_dims_[k]];
      if (size == 1) {
        row_index[k] = constant_index(0);
        continue;
      }
      row_index[k].terms.push_back({open_loop(size), 1});
    }
    if (!root_) open_loop(1);
    Block* row_block = current_;
    // Reductions first, in program order, so that the row temporaries they fill exist
    // before the full-shape loop reads them.
    for (const Node* node : group_.nodes()) {
      if (is_reduction(node->op()))
        emit(node->output(0), row_value_index(node->output(0), row_index));
    }
    for (size_t i = 0; i < group_.outputs().size(); ++i) {
      if (!output_is_row_[i]) continue;
      store_output(i, row_value_index(group_.outputs()[i], row_index));
    }
    bool any_full =
        std::find(output_is_row_.begin(), output_is_row_.end(), false) != output_is_row_.end();
    if (!any_full) return;
    current_ = row_block;
    Index full_index(full_sizes_.size());
    for (size_t k = 0; k < row_dims_.size(); ++k) full_index[row_dims_[k]] = row_index[k];
    for (size_t d : inner_dims_) {
      if (full_sizes_[d] == 1) {
        full_index[d] = constant_index(0);
        continue;
      }
      full_index[d].terms.push_back({open_loop(full_sizes_[d]), 1});
    }
    for (size_t i = 0; i < group_.outputs().size(); ++i) {
      if (!output_is_row_[i]) store_output(i, full_index);
    }
  }

  // The order the row loops open in (positions in row_dims_): the dims' own order, or for
  // a pointwise group the order of its first full-size output's strides, outermost first,
  // so that an output laid out otherwise (channels-last) is written in memory order.
  std::vector<size_t> row_loop_order() const {
    std::vector<size_t> order(row_dims_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    if (!reduced_.empty()) return order;
    for (size_t i = 0; i < group_.outputs().size(); ++i) {
      const graph::TensorMeta& meta = meta_of(group_.outputs()[i]);
      if (output_is_row_[i] || meta.sizes != full_sizes_) continue;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return meta.strides[row_dims_[a]] > meta.strides[row_dims_[b]];
      });
      break;
    }
    return order;
  }

  // --- column schedule ------------------------------------------------------------------
  // When the reductions run over outer dims and the kept dims end with the innermost one
  // (column sums, batch_norm statistics of channels-last data), reducing row by row would
  // stride through memory. Instead the kept elements are split into blocks of `block`
  // contiguous ones; each block accumulates whole rows into a temporary per reduction
  // (one pass per wave of dependent reductions), then computes the outputs. Full-size
  // outputs that use no reduction (a bias or layer-norm gradient's other outputs) are
  // stored in the first pass, which walks the full-size space anyway.

  // The block size, or 0 when the column schedule does not apply.
  int64_t column_block() const {
    if (reduced_.empty() || full_sizes_.empty() || row_dims_.empty()) return 0;
    if (row_dims_.back() != full_sizes_.size() - 1 || full_sizes_.back() < 16) return 0;
    for (size_t i = 0; i < output_is_row_.size(); ++i) {
      if (!output_is_row_[i] && !uses_no_reduction(group_.outputs()[i])) return 0;
    }
    int64_t kept = 1;
    for (size_t d : row_dims_) kept *= full_sizes_[d];
    if (kept <= 64) return kept;
    // The parallel loop runs over the blocks: up to 16 of them (blocks of at least 64
    // columns, as large as that allows), fewer where the columns do not divide so.
    for (int64_t want = std::min<int64_t>(16, kept / 64); want >= 1; want /= 2) {
      for (int64_t b = std::min<int64_t>(1024, kept / want); b >= 64; --b) {
        if (kept % b == 0) return b;
      }
    }
    return kept <= 1024 ? kept : 0;
  }

  bool uses_no_reduction(const Value* v) const {
    std::set<const Node*> found;
    std::set<const Value*> seen;
    upstream_reductions(v, found, seen);
    return found.empty();
  }

  // The reductions upstream of `v` (through pointwise and view nodes).
  void upstream_reductions(const Value* v, std::set<const Node*>& found,
                           std::set<const Value*>& seen) const {
    if (v->is_input() || !seen.insert(v).second) return;
    const Node* node = v->producer();
    if (is_reduction(node->op())) {
      found.insert(node);
      return;
    }
    node->for_each_input([&](const Value* in) { upstream_reductions(in, found, seen); });
  }

  // The identity of a reduction: 0, or the lowest / highest value of the type.
  ValueId reduce_init(ReduceKind kind, DType t) {
    if (kind == ReduceKind::Sum) return constant(t, 0.0);
    bool is_max = kind == ReduceKind::Max;
    if (graph::is_floating(t)) {
      double inf = std::numeric_limits<double>::infinity();
      return constant(t, is_max ? -inf : inf);
    }
    int64_t value = 0;
    switch (t) {
      case DType::Bool:
        value = is_max ? 0 : 1;
        break;
      case DType::UInt8:
        value = is_max ? 0 : 255;
        break;
      case DType::Int8:
        value = is_max ? -128 : 127;
        break;
      case DType::Int16:
        value = is_max ? -32768 : 32767;
        break;
      case DType::Int32:
        value = is_max ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
        break;
      default:
        value = is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
        break;
    }
    auto stmt = make_const(define_value(root_), t, 0.0);
    stmt->integer = value;
    return append(root_, std::move(stmt));
  }

  void close_loop(Block* parent) {
    parent->child_open = false;
    current_ = parent;
  }

  void build_column_loops(int64_t block) {
    blocks_.push_back(std::make_unique<Block>());
    Block* top = blocks_.back().get();
    top->stmts = &kernel_.body;
    current_ = top;
    int64_t kept = 1;
    for (size_t d : row_dims_) kept *= full_sizes_[d];
    ValueId c = open_loop(kept / block);
    Block* column_block = current_;

    // Reductions in waves: a reduction runs in the pass after those it reads.
    struct Accumulator {
      const Node* node;
      int wave;
      int32_t buffer;
      ReduceKind kind;
      DType type;
      int64_t count;
    };
    std::vector<Accumulator> accumulators;
    std::map<const Node*, size_t> position;
    for (const Node* node : group_.nodes()) {
      if (!is_reduction(node->op())) continue;
      std::set<const Node*> before;
      std::set<const Value*> seen;
      upstream_reductions(node->arg(0).as_value(), before, seen);
      int wave = 0;
      for (const Node* b : before) wave = std::max(wave, accumulators[position.at(b)].wave + 1);
      const std::string& op = node->op();
      ReduceKind kind = op == "aten::amax"   ? ReduceKind::Max
                        : op == "aten::amin" ? ReduceKind::Min
                                             : ReduceKind::Sum;
      DType acc = accumulator_type(kind, compute_type(meta_of(node->output(0)).dtype));
      int64_t count = 1;
      for (int64_t d : reduced_) count *= full_sizes_[static_cast<size_t>(d)];
      int32_t buffer = static_cast<int32_t>(kernel_.buffers.size());
      kernel_.buffers.push_back(
          {"acc" + std::to_string(accumulators.size()), acc, BufferRole::Temp, block});
      position[node] = accumulators.size();
      accumulators.push_back({node, wave, buffer, kind, acc, count});
    }
    int waves = 0;
    for (const Accumulator& a : accumulators) waves = std::max(waves, a.wave + 1);

    // The kept index of element j of the block: kept flat index c * block + j, split.
    auto kept_index = [&](ValueId j) {
      AffineIndex flat;
      flat.terms.push_back({c, block});
      flat.terms.push_back({j, 1});
      if (kept / block == 1) flat.terms.erase(flat.terms.begin());
      Index row(row_dims_.size());
      int64_t stride = kept;
      for (size_t k = 0; k < row_dims_.size(); ++k) {
        int64_t size = full_sizes_[row_dims_[k]];
        stride /= size;
        if (size == 1) {
          row[k] = constant_index(0);
          continue;
        }
        auto [q, r] = div_rem(flat, stride);
        row[k] = q;
        flat = r;
      }
      return row;
    };
    // Makes the results of the reductions of waves below `wave` visible in this block.
    auto load_results = [&](int wave, ValueId j, const Index& row) {
      for (const Accumulator& a : accumulators) {
        if (a.wave >= wave) continue;
        AffineIndex at;
        at.terms.push_back({j, 1});
        ValueId value = append(current_, make_load(define_value(current_), a.type, a.buffer, at));
        if (a.node->op() == "aten::mean.dim") {
          value =
              instr(a.type, LoopOp::Div, {value, constant(a.type, static_cast<double>(a.count))});
        }
        const Value* out = a.node->output(0);
        value = cast(value, compute_type(meta_of(out).dtype));
        current_->memo["v" + std::to_string(out->id()) + index_key(row_value_index(out, row))] =
            value;
      }
    };

    // Initial values.
    {
      ValueId j = open_loop(block);
      AffineIndex at;
      at.terms.push_back({j, 1});
      for (const Accumulator& a : accumulators) {
        insert(current_, make_store(a.buffer, at, reduce_init(a.kind, a.type)));
      }
      close_loop(column_block);
    }
    for (int wave = 0; wave < waves; ++wave) {
      Index full(full_sizes_.size());
      for (int64_t d : reduced_) {
        size_t dim = static_cast<size_t>(d);
        if (full_sizes_[dim] == 1) {
          full[dim] = constant_index(0);
          continue;
        }
        full[dim].terms.push_back({open_loop(full_sizes_[dim]), 1});
      }
      ValueId j = open_loop(block);
      Index row = kept_index(j);
      for (size_t k = 0; k < row_dims_.size(); ++k) full[row_dims_[k]] = row[k];
      load_results(wave, j, row);
      AffineIndex at;
      at.terms.push_back({j, 1});
      for (const Accumulator& a : accumulators) {
        if (a.wave != wave) continue;
        ValueId element = cast(emit(a.node->arg(0).as_value(), full), a.type);
        ValueId old = append(current_, make_load(define_value(current_), a.type, a.buffer, at));
        LoopOp combine = a.kind == ReduceKind::Sum
                             ? (a.type == DType::Bool ? LoopOp::Or : LoopOp::Add)
                         : a.kind == ReduceKind::Max ? LoopOp::Max
                                                     : LoopOp::Min;
        insert(current_, make_store(a.buffer, at, instr(a.type, combine, {old, element})));
      }
      for (size_t i = 0; wave == 0 && i < group_.outputs().size(); ++i) {
        if (!output_is_row_[i]) store_output(i, full);
      }
      close_loop(column_block);
    }
    // The outputs.
    ValueId j = open_loop(block);
    Index row = kept_index(j);
    load_results(waves, j, row);
    for (size_t i = 0; i < group_.outputs().size(); ++i) {
      if (output_is_row_[i]) store_output(i, row_value_index(group_.outputs()[i], row));
    }
    close_loop(column_block);
  }

  // The index of a row-shaped value (the row dims, with or without kept size-1 dims).
  Index row_value_index(const Value* v, const Index& row_index) const {
    Index index;
    size_t next_row_dim = 0;
    for (int64_t s : meta_of(v).sizes) {
      if (s == 1) {
        index.push_back(constant_index(0));
        continue;
      }
      while (next_row_dim < row_dims_.size() && full_sizes_[row_dims_[next_row_dim]] == 1) {
        ++next_row_dim;
      }
      if (next_row_dim >= row_dims_.size()) {
        unsupported("a reduction result that is not row-shaped");
      }
      index.push_back(row_index.at(next_row_dim++));
    }
    return index;
  }

  void store_output(size_t i, const Index& given) {
    const Value* out = group_.outputs()[i];
    const graph::TensorMeta& meta = meta_of(out);
    // A full-size output of another shape (plan_iteration_space) reads the full index
    // reshaped to its own sizes.
    Index index =
        given.size() == full_sizes_.size() && meta.sizes != full_sizes_ && !output_is_row_[i]
            ? reshape_index(given, full_sizes_, meta.sizes)
            : given;
    ValueId value = emit(out, index);
    value = cast(value, meta.dtype);
    AffineIndex address;
    for (size_t d = 0; d < meta.dim(); ++d) add_into(address, scaled(index[d], meta.strides[d]));
    int32_t buffer = static_cast<int32_t>(group_.inputs().size() + i);
    insert(current_, make_store(buffer, std::move(address), value));
  }

  // --- values and statements ------------------------------------------------------------

  ValueId define_value(Block* block) {
    ValueId id = kernel_.new_value();
    def_block_.resize(static_cast<size_t>(kernel_.num_values), nullptr);
    value_type_.resize(static_cast<size_t>(kernel_.num_values), DType::Int64);
    def_block_[static_cast<size_t>(id)] = block;
    return id;
  }

  ValueId append(Block* block, std::unique_ptr<LoopStmt> stmt) {
    value_type_[static_cast<size_t>(stmt->result)] = stmt->type;
    ValueId result = stmt->result;
    insert(block, std::move(stmt));
    return result;
  }

  DType type_of(ValueId v) const { return value_type_[static_cast<size_t>(v)]; }

  ValueId constant(DType type, double value) {
    std::string key = "c" + std::string(graph::dtype_short_name(type)) + ":";
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    key += std::to_string(bits);
    auto it = root_->memo.find(key);
    if (it != root_->memo.end()) return it->second;
    ValueId id = append(root_, make_const(define_value(root_), type, value));
    root_->memo[key] = id;
    return id;
  }

  ValueId instr(DType type, LoopOp op, std::vector<ValueId> operands) {
    // Deduplicated per block: pure instructions with equal operands give one value.
    std::string key =
        "i" + std::string(graph::dtype_short_name(type)) + ":" + std::string(loop_op_name(op));
    for (ValueId v : operands) key += "," + std::to_string(v);
    for (Block* b = current_; b; b = b->parent) {
      auto it = b->memo.find(key);
      if (it != b->memo.end()) return it->second;
    }
    ValueId id =
        append(current_, make_instr(define_value(current_), type, op, std::move(operands)));
    current_->memo[key] = id;
    return id;
  }

  ValueId cast(ValueId v, DType to) {
    if (type_of(v) == to) return v;
    return instr(to, LoopOp::Cast, {v});
  }

  // --- index arithmetic (for views of computed values) ---------------------------------

  int64_t max_of(const AffineIndex& a) const {
    int64_t m = a.offset;
    for (const AffineIndex::Term& t : a.terms) {
      auto it = value_max_.find(t.value);
      int64_t vmax = it == value_max_.end() ? -1 : it->second;
      if (vmax < 0 || t.coefficient < 0) return -1;  // unknown
      m += t.coefficient * vmax;
    }
    return m;
  }

  ValueId materialize(const AffineIndex& a) {
    ValueId sum = -1;
    for (const AffineIndex::Term& t : a.terms) {
      ValueId term =
          t.coefficient == 1
              ? t.value
              : instr(DType::Int64, LoopOp::Mul,
                      {t.value, constant(DType::Int64, static_cast<double>(t.coefficient))});
      sum = sum < 0 ? term : instr(DType::Int64, LoopOp::Add, {sum, term});
    }
    if (sum < 0) return constant(DType::Int64, static_cast<double>(a.offset));
    if (a.offset == 0) return sum;
    return instr(DType::Int64, LoopOp::Add,
                 {sum, constant(DType::Int64, static_cast<double>(a.offset))});
  }

  // a / d and a % d for a >= 0, exact where the terms split cleanly, else computed.
  std::pair<AffineIndex, AffineIndex> div_rem(const AffineIndex& a, int64_t d) {
    if (d == 1) return {a, constant_index(0)};
    AffineIndex quotient;
    AffineIndex rest;
    quotient.offset = a.offset / d;
    rest.offset = a.offset % d;
    for (const AffineIndex::Term& t : a.terms) {
      if (t.coefficient % d == 0) {
        quotient.terms.push_back({t.value, t.coefficient / d});
      } else {
        rest.terms.push_back(t);
      }
    }
    int64_t rest_max = max_of(rest);
    if (a.offset >= 0 && rest_max >= 0 && rest_max < d) return {quotient, rest};
    // (d A + B) / d = A + B / d for B >= 0: only the part that does not split is computed.
    bool nonnegative = a.offset >= 0 && rest_max >= 0;
    const AffineIndex& part = nonnegative ? rest : a;
    ValueId whole = materialize(part);
    ValueId divisor = constant(DType::Int64, static_cast<double>(d));
    ValueId q = instr(DType::Int64, LoopOp::Div, {whole, divisor});
    ValueId r = instr(DType::Int64, LoopOp::Rem, {whole, divisor});
    int64_t part_max = max_of(part);
    value_max_[q] = part_max >= 0 ? part_max / d : -1;
    value_max_[r] = d - 1;
    AffineIndex qi = nonnegative ? quotient : AffineIndex{};
    add_term(qi, q, 1);
    AffineIndex ri;
    ri.terms.push_back({r, 1});
    return {qi, ri};
  }

  // The index into a tensor of `in_sizes` read by a reshape to `out_sizes` at `index`.
  Index reshape_index(const Index& index, const std::vector<int64_t>& out_sizes,
                      const std::vector<int64_t>& in_sizes) {
    std::vector<int64_t> out_strides = row_major(out_sizes);
    AffineIndex linear;
    for (size_t d = 0; d < out_sizes.size(); ++d) {
      if (out_sizes[d] != 1) add_into(linear, scaled(index[d], out_strides[d]));
    }
    std::vector<int64_t> in_strides = row_major(in_sizes);
    Index result(in_sizes.size());
    AffineIndex remaining = linear;
    for (size_t d = 0; d < in_sizes.size(); ++d) {
      if (in_sizes[d] == 1) {
        result[d] = constant_index(0);
        continue;
      }
      auto [q, r] = div_rem(remaining, in_strides[d]);
      result[d] = q;
      remaining = r;
    }
    return result;
  }

  // --- emission of graph values ---------------------------------------------------------

  // The deepest block defining a value used by `index` (the outermost one when none).
  Block* host_of(const Index& index) const {
    Block* host = root_;
    for (const AffineIndex& a : index) {
      for (const AffineIndex::Term& t : a.terms) {
        Block* b = def_block_[static_cast<size_t>(t.value)];
        if (b && b->depth > host->depth) host = b;
      }
    }
    return host;
  }

  static Index broadcast(const Index& index, const std::vector<int64_t>& out_sizes,
                         const std::vector<int64_t>& in_sizes) {
    if (in_sizes.size() > out_sizes.size()) unsupported("broadcast to fewer dims");
    size_t shift = out_sizes.size() - in_sizes.size();
    Index result(in_sizes.size());
    for (size_t k = 0; k < in_sizes.size(); ++k) {
      result[k] = in_sizes[k] == 1 ? constant_index(0) : index[k + shift];
    }
    return result;
  }

  // Emits an operand of a node whose output has `out_sizes`, converted to `type`.
  ValueId operand(const Argument& a, const Index& index, const std::vector<int64_t>& out_sizes,
                  DType type) {
    if (a.is_value()) {
      const Value* v = a.as_value();
      ValueId x = emit(v, broadcast(index, out_sizes, meta_of(v).sizes));
      return cast(x, type);
    }
    return constant(type, literal_number(a));
  }

  ValueId emit(const Value* v, const Index& index) {
    std::string key = "v" + std::to_string(v->id()) + index_key(index);
    for (Block* b = current_; b; b = b->parent) {
      auto it = b->memo.find(key);
      if (it != b->memo.end()) return it->second;
    }
    // Emitted in the outermost block where its index is defined: a row-invariant value is
    // computed once per row, not in every loop that reads it.
    Block* caller = current_;
    Block* host = host_of(index);
    if (host->depth < current_->depth) current_ = host;
    std::optional<ValueId> saved = load_row_temp(v, index);
    ValueId result = saved           ? *saved
                     : v->is_input() ? emit_load(v, index)
                                     : emit_node(*v->producer(), v, index);
    // Reductions memoize themselves in their host block.
    if (v->is_input() || !is_reduction(v->producer()->op())) current_->memo[key] = result;
    current_ = caller;
    return result;
  }

  ValueId emit_load(const Value* input, const Index& index) {
    const graph::TensorMeta& meta = meta_of(input);
    AffineIndex address;
    for (size_t d = 0; d < meta.dim(); ++d) {
      if (meta.sizes[d] != 1) add_into(address, scaled(index[d], meta.strides[d]));
    }
    ValueId raw = append(current_, make_load(define_value(current_), meta.dtype,
                                             input_buffer_.at(input), std::move(address)));
    return cast(raw, compute_type(meta.dtype));
  }

  ValueId emit_node(const Node& node, const Value* v, const Index& index) {
    const std::string& op = node.op();
    const graph::TensorMeta& out = meta_of(v);
    DType type = compute_type(out.dtype);
    auto x = [&](size_t i, DType t) { return operand(node.arg(i), index, out.sizes, t); };
    auto unary = [&](LoopOp o) { return instr(type, o, {x(0, type)}); };
    auto binary = [&](LoopOp o) { return instr(type, o, {x(0, type), x(1, type)}); };

    static const std::map<std::string, LoopOp> kUnary = {
        {"aten::neg", LoopOp::Neg},     {"aten::exp", LoopOp::Exp},
        {"aten::log", LoopOp::Log},     {"aten::tanh", LoopOp::Tanh},
        {"aten::erf", LoopOp::Erf},     {"aten::sigmoid", LoopOp::Sigmoid},
        {"aten::sqrt", LoopOp::Sqrt},   {"aten::rsqrt", LoopOp::Rsqrt},
        {"aten::abs", LoopOp::Abs},     {"aten::reciprocal", LoopOp::Reciprocal},
        {"aten::sin", LoopOp::Sin},     {"aten::cos", LoopOp::Cos},
        {"aten::log1p", LoopOp::Log1p}, {"aten::expm1", LoopOp::Expm1},
    };
    if (auto it = kUnary.find(op); it != kUnary.end()) {
      if (graph::is_integral(type, true) && it->second != LoopOp::Neg &&
          it->second != LoopOp::Abs) {
        unsupported(op + " on integers");
      }
      // ATen has no bool kernel: the group runs through ATen, which raises as eager does.
      if (type == DType::Bool) unsupported(op + " on bool");
      return unary(it->second);
    }
    static const std::map<std::string, LoopOp> kBinary = {
        {"aten::mul.Tensor", LoopOp::Mul}, {"aten::mul.Scalar", LoopOp::Mul},
        {"aten::div.Tensor", LoopOp::Div}, {"aten::div.Scalar", LoopOp::Div},
        {"aten::maximum", LoopOp::Max},    {"aten::minimum", LoopOp::Min},
    };
    if (auto it = kBinary.find(op); it != kBinary.end()) {
      if (node.kwarg("rounding_mode") && !node.kwarg("rounding_mode")->is_none()) {
        unsupported("div with a rounding mode");
      }
      if (type == DType::Bool && it->second == LoopOp::Mul) {
        return instr(type, LoopOp::And, {x(0, type), x(1, type)});
      }
      return binary(it->second);
    }
    if (op == "aten::add.Tensor" || op == "aten::add.Scalar" || op == "aten::sub.Tensor" ||
        op == "aten::sub.Scalar") {
      bool is_add = op.compare(0, 9, "aten::add") == 0;
      // ATen refuses to subtract with a bool on either side, whatever the result type (a
      // bool minus a float): the group runs through ATen, which raises as eager does.
      // Metadata of some torch versions accepts it, so the result type cannot tell.
      if (!is_add && (is_bool_operand(node.arg(0)) || is_bool_operand(node.arg(1)))) {
        unsupported(op + " with a bool operand");
      }
      ValueId b = x(1, type);
      const Argument* alpha = find_arg(node, 2, "alpha");
      if (alpha && !alpha->is_none() && literal_number(*alpha) != 1.0) {
        b = instr(type, LoopOp::Mul, {b, constant(type, literal_number(*alpha))});
      }
      if (type == DType::Bool && is_add) return instr(type, LoopOp::Or, {x(0, type), b});
      return instr(type, is_add ? LoopOp::Add : LoopOp::Sub, {x(0, type), b});
    }
    if (op == "aten::relu") {
      if (type == DType::Bool) unsupported("relu on bool");  // ATen refuses it
      return instr(type, LoopOp::Max, {x(0, type), constant(type, 0.0)});
    }
    if (op == "aten::pow.Tensor_Scalar") return emit_pow(node, index, out.sizes, type);
    if (op == "aten::pow.Scalar") {
      // A Python number raised to a tensor (Adam's bias correction, beta ** step).
      if (!graph::is_floating(type)) unsupported("integer pow of a number");
      ValueId exponent = operand(node.arg(1), index, out.sizes, type);
      return instr(type, LoopOp::Pow, {constant(type, literal_number(node.arg(0))), exponent});
    }
    static const std::map<std::string, LoopOp> kCompare = {
        {"aten::eq", LoopOp::Eq}, {"aten::ne", LoopOp::Ne}, {"aten::lt", LoopOp::Lt},
        {"aten::le", LoopOp::Le}, {"aten::gt", LoopOp::Gt}, {"aten::ge", LoopOp::Ge},
    };
    std::string base = op.substr(0, op.find('.'));
    if (auto it = kCompare.find(base); it != kCompare.end()) {
      ResultType rt;
      rt.add(node.arg(0));
      rt.add(node.arg(1));
      DType common = compute_type(rt.result());
      return instr(DType::Bool, it->second, {x(0, common), x(1, common)});
    }
    if (op == "aten::logical_and" || op == "aten::logical_or") {
      return instr(DType::Bool, op == "aten::logical_and" ? LoopOp::And : LoopOp::Or,
                   {x(0, DType::Bool), x(1, DType::Bool)});
    }
    if (op == "aten::logical_not") return instr(DType::Bool, LoopOp::Not, {x(0, DType::Bool)});
    if (op == "aten::where.self") {
      return instr(type, LoopOp::Select, {x(0, DType::Bool), x(1, type), x(2, type)});
    }
    if (op == "aten::clamp" || op == "aten::clamp_min" || op == "aten::clamp_max") {
      ValueId r = x(0, type);
      const Argument* lo = op == "aten::clamp_max" ? nullptr : find_arg(node, 1, "min");
      const Argument* hi = op == "aten::clamp_min"   ? nullptr
                           : op == "aten::clamp_max" ? find_arg(node, 1, "max")
                                                     : find_arg(node, 2, "max");
      // ATen has no bool kernel: bool operands with bool bounds make eager raise (the
      // metadata may claim int64), so the group runs through ATen, which raises too.
      ResultType operands;
      operands.add(node.arg(0));
      if (lo && !lo->is_none()) operands.add(*lo);
      if (hi && !hi->is_none()) operands.add(*hi);
      if (operands.result() == DType::Bool) unsupported(op + " of bool");
      if (lo && !lo->is_none())
        r = instr(type, LoopOp::Max, {r, operand(*lo, index, out.sizes, type)});
      if (hi && !hi->is_none())
        r = instr(type, LoopOp::Min, {r, operand(*hi, index, out.sizes, type)});
      return r;
    }
    if (op == "aten::_to_copy" || op == "aten::clone" || op == "aten::alias" ||
        op == "aten::detach" || op == "aten::contiguous") {
      // A conversion to a storage-only type rounds, as the eager copy would.
      const Value* src = node.arg(0).as_value();
      ValueId s = emit(src, broadcast(index, out.sizes, meta_of(src).sizes));
      if (is_storage_only(out.dtype) && out.dtype != meta_of(src).dtype) {
        s = cast(cast(s, out.dtype), type);
      }
      return cast(s, type);
    }
    if (op == "aten::max_pool2d") return emit_max_pool(node, index, type);
    if (is_reduction(op)) return emit_reduction(node, v, index);
    if (std::optional<Index> source_index = view_source_index(node, index)) {
      return emit(node.arg(0).as_value(), *source_index);
    }
    unsupported("operator " + op + " is not a kernel primitive");
  }

  // max_pool2d (graph::max_pool_window): the maximum over the window's elements, a padded
  // position reading the input element nearest to it, which the window also holds.
  ValueId emit_max_pool(const Node& node, const Index& index, DType type) {
    std::optional<graph::PoolWindow> window = graph::max_pool_window(node.args(), node.kwargs());
    if (!window) unsupported("a max_pool2d that is not a kernel primitive");
    const Value* src = node.arg(0).as_value();
    const std::vector<int64_t>& in = meta_of(src).sizes;
    size_t h = in.size() - 2;
    ValueId result = -1;
    for (int64_t kh = 0; kh < window->kernel[0]; ++kh) {
      for (int64_t kw = 0; kw < window->kernel[1]; ++kw) {
        Index tap = index;
        tap[h] = window_tap(index[h], window->stride[0], kh - window->padding[0], in[h]);
        tap[h + 1] =
            window_tap(index[h + 1], window->stride[1], kw - window->padding[1], in[h + 1]);
        ValueId x = emit(src, tap);
        result = result < 0 ? x : instr(type, LoopOp::Max, {result, x});
      }
    }
    return result;
  }

  // The input position `out * stride + shift` of an output position, clamped into
  // [0, size) where it can leave it.
  AffineIndex window_tap(const AffineIndex& out, int64_t stride, int64_t shift, int64_t size) {
    AffineIndex at = scaled(out, stride);
    at.offset += shift;
    int64_t highest = max_of(at);
    bool below = at.offset < 0;
    for (const AffineIndex::Term& t : at.terms) below = below || t.coefficient < 0;
    bool above = highest < 0 || highest >= size;
    if (!below && !above) return at;
    ValueId v = materialize(at);
    if (below) v = instr(DType::Int64, LoopOp::Max, {v, constant(DType::Int64, 0.0)});
    if (above) {
      v = instr(DType::Int64, LoopOp::Min,
                {v, constant(DType::Int64, static_cast<double>(size - 1))});
    }
    value_max_[v] = size - 1;
    AffineIndex clamped;
    add_term(clamped, v, 1);
    return clamped;
  }

  ValueId emit_pow(const Node& node, const Index& index, const std::vector<int64_t>& sizes,
                   DType type) {
    ValueId base = operand(node.arg(0), index, sizes, type);
    double e = literal_number(node.arg(1));
    if (e == 1.0) return base;
    if (e == 2.0) return instr(type, LoopOp::Mul, {base, base});
    if (e == 3.0) return instr(type, LoopOp::Mul, {instr(type, LoopOp::Mul, {base, base}), base});
    if (graph::is_floating(type)) {
      if (e == 0.5) return instr(type, LoopOp::Sqrt, {base});
      if (e == -0.5) return instr(type, LoopOp::Rsqrt, {base});
      if (e == -1.0) return instr(type, LoopOp::Reciprocal, {base});
      return instr(type, LoopOp::Pow, {base, constant(type, e)});
    }
    if (e == 0.0) return constant(type, 1.0);
    unsupported("integer pow with this exponent");
  }

  // The type a reduction of `kind` accumulates values of compute type `t` in: integer
  // and bool sums in int64, float32 sums in float64 where the target asks for it.
  DType accumulator_type(ReduceKind kind, DType t) const {
    if (kind != ReduceKind::Sum) return t;
    if (graph::is_integral(t, true)) return DType::Int64;
    if (t == DType::Float32 && options_.double_float_sums) return DType::Float64;
    return t;
  }

  ValueId emit_reduction(const Node& node, const Value* v, const Index& index) {
    const std::string& op = node.op();
    const Value* input = node.arg(0).as_value();
    const graph::TensorMeta& in = meta_of(input);
    const graph::TensorMeta& out = meta_of(v);
    std::vector<int64_t> dims = reduced_dims(node);
    const Argument* keep = op == "aten::sum" ? nullptr : find_arg(node, 2, "keepdim");
    bool keepdim = keep && keep->kind() == Argument::Kind::Bool && keep->as_bool();
    ReduceKind kind = op == "aten::amax"   ? ReduceKind::Max
                      : op == "aten::amin" ? ReduceKind::Min
                                           : ReduceKind::Sum;
    DType acc = accumulator_type(kind, compute_type(out.dtype));

    Block* host = host_of(index);
    std::string key = "r" + std::to_string(v->id()) + index_key(index);
    if (auto it = host->memo.find(key); it != host->memo.end()) return it->second;

    Block* saved = current_;
    auto reduce = std::make_unique<LoopStmt>();
    reduce->kind = LoopStmtKind::Reduce;
    reduce->reduce = kind;
    reduce->type = acc;
    // Index of the input: kept dims from `index`, reduced dims from new loop variables.
    Index in_index(in.dim());
    size_t next = 0;
    blocks_.push_back(std::make_unique<Block>());
    Block* body = blocks_.back().get();
    body->stmts = &reduce->body;
    body->parent = host;
    body->depth = host->depth + 1;
    int64_t count = 1;
    for (size_t d = 0; d < in.dim(); ++d) {
      bool reduced = std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d));
      if (!reduced) {
        in_index[d] = index.at(next++);
        continue;
      }
      count *= in.sizes[d];
      if (keepdim) ++next;
      if (in.sizes[d] == 1) {
        in_index[d] = constant_index(0);
        continue;
      }
      ValueId var = define_value(body);
      value_max_[var] = std::max<int64_t>(in.sizes[d] - 1, 0);
      reduce->vars.push_back(var);
      reduce->extents.push_back(in.sizes[d]);
      in_index[d].terms.push_back({var, 1});
    }
    current_ = body;
    ValueId computed = emit(input, in_index);
    if (!reduce->vars.empty() && worth_saving(input, dims)) {
      save_row_temp(input, in_index, computed, host);
    }
    ValueId element = cast(computed, acc);
    current_ = saved;
    ValueId result;
    if (reduce->vars.empty()) {
      // Nothing to loop over: the body's statements move into the host as they are.
      for (auto& stmt : reduce->body) {
        def_block_[static_cast<size_t>(stmt->result)] = host;
        insert(host, std::move(stmt));
      }
      result = element;
    } else {
      reduce->yield = element;
      reduce->result = define_value(host);
      result = append(host, std::move(reduce));
    }
    if (op == "aten::mean.dim") {
      Block* before = current_;
      current_ = host;
      result = instr(acc, LoopOp::Div, {result, constant(acc, static_cast<double>(count))});
      current_ = before;
    }
    Block* before = current_;
    current_ = host;
    result = cast(result, compute_type(out.dtype));
    current_ = before;
    host->memo[key] = result;
    return result;
  }

  // --- row temporaries ------------------------------------------------------------------
  // A value a reduction consumes over a whole row and that other nodes read again (softmax's
  // exp) is stored into a row-sized temporary while reducing; later reads in the same row
  // load it instead of recomputing it.

  static bool is_expensive(const Value* v, int depth = 0) {
    if (v->is_input() || depth > 32) return false;
    const std::string& op = v->producer()->op();
    if (is_reduction(op)) return false;
    static const std::set<std::string> kExpensive = {"aten::exp",        "aten::log",
                                                     "aten::tanh",       "aten::erf",
                                                     "aten::sigmoid",    "aten::sin",
                                                     "aten::cos",        "aten::log1p",
                                                     "aten::expm1",      "aten::pow.Tensor_Scalar",
                                                     "aten::pow.Scalar", "aten::div.Tensor",
                                                     "aten::div.Scalar"};
    if (kExpensive.count(op)) return true;
    bool any = false;
    v->producer()->for_each_input(
        [&](const Value* in) { any = any || is_expensive(in, depth + 1); });
    return any;
  }

  bool worth_saving(const Value* v, const std::vector<int64_t>& dims) const {
    if (v->is_input() || row_temps_.count(v)) return false;
    // Only whole rows: the reduced dims are exactly the inner dims of the iteration space.
    if (meta_of(v).sizes != full_sizes_ || dims != reduced_) return false;
    return (v->users().size() > 1 || v->num_output_uses() > 0) && is_expensive(v);
  }

  std::vector<int64_t> inner_sizes() const {
    std::vector<int64_t> inner;
    for (size_t d : inner_dims_) inner.push_back(full_sizes_[d]);
    return inner;
  }

  // The row part of a full-shape index (its kept dims).
  Index row_part(const Index& index) const {
    Index row;
    for (size_t d : row_dims_) row.push_back(index.at(d));
    return row;
  }

  AffineIndex inner_offset(const Index& index) const {
    std::vector<int64_t> inner = inner_sizes();
    std::vector<int64_t> strides = row_major(inner);
    AffineIndex offset;
    for (size_t k = 0; k < inner.size(); ++k) {
      if (inner[k] != 1) add_into(offset, scaled(index.at(inner_dims_[k]), strides[k]));
    }
    return offset;
  }

  void save_row_temp(const Value* v, const Index& index, ValueId value, Block* host) {
    std::vector<int64_t> inner = inner_sizes();
    int32_t buffer = static_cast<int32_t>(kernel_.buffers.size());
    int64_t count = 1;
    for (int64_t s : inner) count *= s;
    std::string name = "row" + std::to_string(row_temps_.size());
    for (const LoopBuffer& b : kernel_.buffers) {
      if (b.name == name) name += "_";
    }
    kernel_.buffers.push_back({name, type_of(value), BufferRole::Temp, count});
    insert(current_, make_store(buffer, inner_offset(index), value));
    row_temps_[v] = RowTemp{buffer, host, index_key(row_part(index))};
  }

  std::optional<ValueId> load_row_temp(const Value* v, const Index& index) {
    auto it = row_temps_.find(v);
    if (it == row_temps_.end() || index.size() != full_sizes_.size()) return std::nullopt;
    if (index_key(row_part(index)) != it->second.row_key) return std::nullopt;
    bool visible = false;
    for (Block* b = current_; b; b = b->parent) visible = visible || b == it->second.host;
    if (!visible) return std::nullopt;
    DType type = kernel_.buffers[static_cast<size_t>(it->second.buffer)].dtype;
    return append(current_,
                  make_load(define_value(current_), type, it->second.buffer, inner_offset(index)));
  }

  struct RowTemp {
    int32_t buffer = -1;
    Block* host = nullptr;  // the row block the temporary is valid in
    std::string row_key;    // index_key of the row part of the index it was saved at
  };
  std::map<const Value*, RowTemp> row_temps_;

  // For view operators: the index into the viewed tensor; nullopt for other operators.
  std::optional<Index> view_source_index(const Node& node, const Index& index) {
    const std::string& op = node.op();
    const Value* src = node.arg(0).as_value();
    const std::vector<int64_t>& in = meta_of(src).sizes;
    const std::vector<int64_t>& out = meta_of(node.output(0)).sizes;
    if (op == "aten::view" || op == "aten::reshape" || op == "aten::_unsafe_view") {
      return reshape_index(index, out, in);
    }
    if (op == "aten::expand") return broadcast(index, out, in);
    if (op == "aten::unsqueeze") {
      Index r = index;
      r.erase(r.begin() + normalize_dim(node.arg(1).as_int(), out.size()));
      return r;
    }
    if (op == "aten::squeeze.dim" || op == "aten::squeeze") {
      // Rebuild the source index: size-1 source dims that vanished read index 0.
      Index r;
      size_t next = 0;
      std::optional<int64_t> only;
      if (op == "aten::squeeze.dim") only = normalize_dim(node.arg(1).as_int(), in.size());
      for (size_t d = 0; d < in.size(); ++d) {
        bool dropped = in[d] == 1 && (!only || *only == static_cast<int64_t>(d));
        r.push_back(dropped ? constant_index(0) : index.at(next++));
      }
      return r;
    }
    if (op == "aten::permute") {
      std::vector<int64_t> dims = int_list(&node.arg(1));
      Index r(in.size());
      for (size_t k = 0; k < dims.size(); ++k) {
        r[static_cast<size_t>(normalize_dim(dims[k], in.size()))] = index[k];
      }
      return r;
    }
    if (op == "aten::t" || op == "aten::transpose.int") {
      Index r = index;
      if (r.size() < 2) return r;
      int64_t a = op == "aten::t" ? 0 : normalize_dim(node.arg(1).as_int(), in.size());
      int64_t b = op == "aten::t" ? 1 : normalize_dim(node.arg(2).as_int(), in.size());
      std::swap(r[static_cast<size_t>(a)], r[static_cast<size_t>(b)]);
      return r;
    }
    if (op == "aten::slice.Tensor") {
      size_t dim = static_cast<size_t>(normalize_dim(
          find_arg(node, 1, "dim") ? find_arg(node, 1, "dim")->as_int() : 0, in.size()));
      const Argument* start_arg = find_arg(node, 2, "start");
      const Argument* step_arg = find_arg(node, 4, "step");
      int64_t start = start_arg && !start_arg->is_none() ? start_arg->as_int() : 0;
      int64_t step = step_arg && !step_arg->is_none() ? step_arg->as_int() : 1;
      if (start < 0) start += in[dim];
      start = std::clamp<int64_t>(start, 0, in[dim]);
      Index r = index;
      r[dim] = scaled(index[dim], step);
      r[dim].offset += start;
      return r;
    }
    if (op == "aten::select.int") {
      size_t dim = static_cast<size_t>(normalize_dim(node.arg(1).as_int(), in.size()));
      int64_t i = node.arg(2).as_int();
      if (i < 0) i += in[dim];
      Index r = index;
      r.insert(r.begin() + static_cast<std::ptrdiff_t>(dim), constant_index(i));
      return r;
    }
    return std::nullopt;
  }

  const graph::Graph& group_;
  LowerOptions options_;
  LoopKernel kernel_;
  std::map<const Value*, int32_t> input_buffer_;
  std::vector<int64_t> full_sizes_;
  std::vector<int64_t> reduced_;    // the dims every reduction reduces (sorted)
  std::vector<size_t> row_dims_;    // kept dims: the row loops
  std::vector<size_t> inner_dims_;  // reduced dims: the loops inside a row
  std::vector<bool> output_is_row_;
  std::vector<std::unique_ptr<Block>> blocks_;
  Block* current_ = nullptr;
  Block* root_ = nullptr;
  std::vector<Block*> def_block_;
  std::vector<DType> value_type_;
  std::map<ValueId, int64_t> value_max_;
};

}  // namespace

Expected<LoopKernel> lower_group(const graph::Graph& group, const std::string& kernel_name,
                                 const LowerOptions& options) {
  try {
    return GroupLowering(group, kernel_name, options).run();
  } catch (const Unsupported& e) {
    return make_error("cannot lower the group to a CPU kernel: " + e.message);
  } catch (const std::exception& e) {
    return make_error(std::string("cannot lower the group to a CPU kernel: ") + e.what());
  }
}

}  // namespace dynvm::codegen
