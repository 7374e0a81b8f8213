// The attention rewrite: hand-written attention matched backwards from its second bmm.
#include "dynvm/graph/attention_rewrite.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dynvm/graph/dead_code_elimination.h"
#include "dynvm/graph/node_builder.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::graph {

namespace {

bool is_one_of(const Node* node, std::initializer_list<std::string_view> ops) {
  if (node == nullptr) return false;
  for (std::string_view op : ops) {
    if (node->op() == op) return true;
  }
  return false;
}

// Whether `v` is read once (by one node, not as a graph output).
bool single_use(const Value* v) { return v->users().size() == 1 && v->num_output_uses() == 0; }

const TensorMeta* rank(const Value* v, size_t n) {
  const TensorMeta* meta = v->meta();
  return meta != nullptr && meta->sizes.size() == n ? meta : nullptr;
}

// The producer of `v` when it is one of `ops` and `v` has no other reader.
Node* only_producer(const Value* v, std::initializer_list<std::string_view> ops) {
  Node* node = v->producer();
  return is_one_of(node, ops) && single_use(v) ? node : nullptr;
}

// The producer of `v` when it is a dtype conversion alone (no change of device, layout or
// memory format) and `v` has no other reader.
Node* only_dtype_cast(const Value* v) {
  Node* node = only_producer(v, {"aten::_to_copy"});
  return node != nullptr && primitive_kind(*node) != PrimitiveKind::Extern ? node : nullptr;
}

// The 4-d value a 3-d bmm operand was flattened from, as matmul flattens batch dims:
// view(clone?(expand?(x)), [B*H, m, n]) with x [B, H, m, n]; nullptr otherwise.
Value* unflattened(Value* flat, int64_t batch, int64_t heads) {
  const TensorMeta* meta3 = rank(flat, 3);
  Node* view = only_producer(flat, {"aten::view", "aten::_unsafe_view", "aten::reshape"});
  if (meta3 == nullptr || view == nullptr || !view->arg(0).is_value()) return nullptr;
  Value* x = view->arg(0).as_value();
  if (Node* clone = only_producer(x, {"aten::clone"}); clone != nullptr)
    x = clone->arg(0).as_value();
  if (Node* expand = only_producer(x, {"aten::expand"}); expand != nullptr) {
    Value* source = expand->arg(0).as_value();
    if (source->meta() == nullptr || x->meta() == nullptr ||
        source->meta()->sizes != x->meta()->sizes) {
      return nullptr;  // a real broadcast: not matmul's no-op expand
    }
    x = source;
  }
  const TensorMeta* meta4 = rank(x, 4);
  if (meta4 == nullptr) return nullptr;
  const std::vector<int64_t>& s = meta4->sizes;
  if (s[0] != batch || s[1] != heads || s[0] * s[1] != meta3->sizes[0] || s[2] != meta3->sizes[1] ||
      s[3] != meta3->sizes[2]) {
    return nullptr;
  }
  return x;
}

// `v` when it is the 3-d result of a bmm viewed as [B, H, m, n]: that bmm.
Node* bmm_under_view(Value* v4, bool single) {
  const TensorMeta* meta = rank(v4, 4);
  Node* view = v4->producer();
  if (meta == nullptr || !is_one_of(view, {"aten::view", "aten::_unsafe_view", "aten::reshape"})) {
    return nullptr;
  }
  if (single && !single_use(v4)) return nullptr;
  Value* flat = view->arg(0).as_value();
  Node* bmm = only_producer(flat, {"aten::bmm"});
  const TensorMeta* meta3 = rank(flat, 3);
  if (bmm == nullptr || meta3 == nullptr || meta3->sizes[0] != meta->sizes[0] * meta->sizes[1]) {
    return nullptr;
  }
  return bmm;
}

// The bmm that made `v`: for 4-d attention a bmm viewed as [B, H, m, n], for 3-d the bmm
// itself or under a view to the same sizes (matmul's). With `single`, `v` must have one
// reader.
Node* bmm_of(Value* v, size_t n, bool single) {
  if (n == 4) return bmm_under_view(v, single);
  if (rank(v, 3) == nullptr || (single && !single_use(v))) return nullptr;
  Node* p = v->producer();
  if (is_one_of(p, {"aten::view", "aten::_unsafe_view", "aten::reshape"})) {
    Value* in = p->arg(0).as_value();
    if (in->meta() == nullptr || in->meta()->sizes != v->meta()->sizes || !single_use(in)) {
      return nullptr;
    }
    p = in->producer();
  }
  return is_one_of(p, {"aten::bmm"}) ? p : nullptr;
}

// A bmm operand's source with batch dims `batch`: for [B, H] what matmul flattened
// (unflattened), for [B] the operand under matmul's no-op expand/reshape/clone, if any.
Value* batched_operand(Value* flat, const std::vector<int64_t>& batch) {
  if (batch.size() == 2) return unflattened(flat, batch[0], batch[1]);
  Value* x = flat;
  while (single_use(x) &&
         is_one_of(x->producer(), {"aten::expand", "aten::view", "aten::_unsafe_view",
                                   "aten::reshape", "aten::clone"})) {
    Value* in = x->producer()->arg(0).as_value();
    if (in->meta() == nullptr || x->meta() == nullptr || in->meta()->sizes != x->meta()->sizes) {
      break;
    }
    x = in;
  }
  const TensorMeta* meta = rank(x, 3);
  return meta != nullptr && meta->sizes[0] == batch[0] ? x : nullptr;
}

// A scalar argument as a double (a Python float or int in the graph).
std::optional<double> scalar(const Argument& a) {
  if (a.kind() == Argument::Kind::Double) return a.as_double();
  if (a.kind() == Argument::Kind::Int) return static_cast<double>(a.as_int());
  return std::nullopt;
}

// Whether `mask` broadcasts to `sizes` (trailing dims equal or 1).
bool broadcasts_to(const TensorMeta& mask, const std::vector<int64_t>& sizes) {
  if (mask.sizes.size() > sizes.size()) return false;
  size_t offset = sizes.size() - mask.sizes.size();
  for (size_t d = 0; d < mask.sizes.size(); ++d) {
    if (mask.sizes[d] != 1 && mask.sizes[d] != sizes[offset + d]) return false;
  }
  return true;
}

struct Match {
  Value* q = nullptr;
  Value* k = nullptr;
  Value* v = nullptr;
  Value* bool_mask_removed = nullptr;  // masked_fill's mask: True where a score is removed
  Value* additive_mask = nullptr;
  double scale = 1.0;
};

// Matches the pattern ending in `out`: [B, H, S, Dv] (the second bmm viewed as 4-d) or
// [B, S, Dv] (the second bmm itself).
std::optional<Match> match(Value* out) {
  const TensorMeta* out_meta = out->meta();
  if (out_meta == nullptr || (out_meta->dim() != 3 && out_meta->dim() != 4)) return std::nullopt;
  const size_t n = out_meta->dim();
  Node* second = bmm_of(out, n, false);
  if (second == nullptr) return std::nullopt;
  const std::vector<int64_t> batch(out_meta->sizes.begin(), out_meta->sizes.end() - 2);
  Match m;
  Value* weights = batched_operand(second->arg(0).as_value(), batch);
  m.v = batched_operand(second->arg(1).as_value(), batch);
  if (weights == nullptr || m.v == nullptr) return std::nullopt;
  // Under autocast, or written as softmax(s.float()).to(q.dtype) or
  // softmax(s, -1, dtype=torch.float32).to(q.dtype), the softmax of 16-bit scores runs in
  // float32 and its result is cast back: what the fused kernel does inside.
  Node* cast_back = only_dtype_cast(weights);
  if (cast_back != nullptr) weights = cast_back->arg(0).as_value();
  // softmax over the last dim.
  Node* softmax = only_producer(weights, {"aten::_softmax", "aten::softmax.int"});
  if (softmax == nullptr) return std::nullopt;
  int64_t dim = softmax->arg(1).as_int();
  if (dim != -1 && dim != static_cast<int64_t>(n) - 1) return std::nullopt;
  if (softmax->op() == "aten::_softmax" && softmax->arg(2).as_bool()) return std::nullopt;
  bool softmax_casts = softmax->op() == "aten::softmax.int" && softmax->args().size() > 2 &&
                       !softmax->arg(2).is_none();
  if (softmax_casts && (cast_back == nullptr || softmax->arg(2).kind() != Argument::Kind::DType ||
                        softmax->arg(2).as_dtype() != DType::Float32)) {
    return std::nullopt;
  }
  Value* x = softmax->arg(0).as_value();
  if (cast_back != nullptr) {
    // The float32 softmax reads 16-bit scores: cast up here, or by softmax's dtype.
    if (weights->meta() == nullptr || weights->meta()->dtype != DType::Float32) return std::nullopt;
    if (!softmax_casts) {
      Node* cast_up = only_dtype_cast(x);
      if (cast_up == nullptr) return std::nullopt;
      x = cast_up->arg(0).as_value();
    }
    if (x->meta() == nullptr || x->meta()->dtype != cast_back->output()->meta()->dtype) {
      return std::nullopt;
    }
  }
  // The mask.
  if (Node* fill = only_producer(x, {"aten::masked_fill.Scalar"}); fill != nullptr) {
    std::optional<double> value = scalar(fill->arg(2));
    Value* mask = fill->arg(1).is_value() ? fill->arg(1).as_value() : nullptr;
    if (!value || !std::isinf(*value) || *value > 0 || mask == nullptr || mask->meta() == nullptr ||
        mask->meta()->dtype != DType::Bool) {
      return std::nullopt;
    }
    m.bool_mask_removed = mask;
    x = fill->arg(0).as_value();
  } else if (Node* add = only_producer(x, {"aten::add.Tensor"}); add != nullptr) {
    if (add->args().size() > 2 && scalar(add->arg(2)) != 1.0) return std::nullopt;
    if (!add->arg(0).is_value() || !add->arg(1).is_value()) return std::nullopt;
    Value* a = add->arg(0).as_value();
    Value* b = add->arg(1).as_value();
    // The scores are the operand a bmm (through a scale) produced; the other is the mask.
    auto scores_side = [](Value* s) {
      Node* p = s->producer();
      return is_one_of(
          p, {"aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar",
              "aten::view", "aten::_unsafe_view", "aten::reshape"});
    };
    if (!scores_side(a) && scores_side(b)) std::swap(a, b);
    m.additive_mask = b;
    x = a;
  }
  // The scale.
  if (Node* scale = only_producer(
          x, {"aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar"});
      scale != nullptr) {
    std::optional<double> c = scalar(scale->arg(1));
    if (!c || *c == 0 || !scale->arg(0).is_value()) return std::nullopt;
    m.scale = scale->op().starts_with("aten::mul") ? *c : 1.0 / *c;
    x = scale->arg(0).as_value();
  }
  Node* first = bmm_of(x, n, true);
  if (first == nullptr) return std::nullopt;
  m.q = batched_operand(first->arg(0).as_value(), batch);
  Value* k_t = batched_operand(first->arg(1).as_value(), batch);
  Node* transpose = k_t ? only_producer(k_t, {"aten::transpose.int"}) : nullptr;
  if (m.q == nullptr || transpose == nullptr) return std::nullopt;
  const auto last = static_cast<int64_t>(n) - 1;
  int64_t d0 = transpose->arg(1).as_int(), d1 = transpose->arg(2).as_int();
  d0 = d0 < 0 ? d0 + last + 1 : d0;
  d1 = d1 < 0 ? d1 + last + 1 : d1;
  if (std::min(d0, d1) != last - 1 || std::max(d0, d1) != last) return std::nullopt;
  m.k = transpose->arg(0).as_value();
  // Shapes, dtypes and devices agree: q [..., S, D], k [..., S2, D], v [..., S2, Dv],
  // out [..., S, Dv], `...` the batch dims.
  const TensorMeta* q = rank(m.q, n);
  const TensorMeta* k = rank(m.k, n);
  const TensorMeta* v = rank(m.v, n);
  if (q == nullptr || k == nullptr || v == nullptr) return std::nullopt;
  if (!is_floating(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype ||
      out_meta->dtype != q->dtype || k->device != q->device || v->device != q->device) {
    return std::nullopt;
  }
  auto batch_of = [&](const TensorMeta* t) {
    return std::vector<int64_t>(t->sizes.begin(), t->sizes.end() - 2);
  };
  if (batch_of(q) != batch || batch_of(k) != batch || batch_of(v) != batch ||
      k->sizes[last] != q->sizes[last] || v->sizes[last - 1] != k->sizes[last - 1] ||
      out_meta->sizes[last - 1] != q->sizes[last - 1] || out_meta->sizes[last] != v->sizes[last]) {
    return std::nullopt;
  }
  std::vector<int64_t> scores = batch;
  scores.push_back(q->sizes[last - 1]);
  scores.push_back(k->sizes[last - 1]);
  Value* mask = m.bool_mask_removed ? m.bool_mask_removed : m.additive_mask;
  if (mask != nullptr) {
    const TensorMeta* meta = mask->meta();
    if (meta == nullptr || meta->device != q->device || !broadcasts_to(*meta, scores)) {
      return std::nullopt;
    }
    if (m.additive_mask != nullptr && meta->dtype != q->dtype) return std::nullopt;
  }
  return m;
}

// Rewrites every match ending at the output of one of `ends`; how many there were.
size_t rewrite_matches(Graph& graph, const std::vector<Node*>& ends) {
  size_t rewritten = 0;
  for (Node* end : ends) {
    if (end->is_removed()) continue;
    Value* out = end->output();
    std::optional<Match> m = match(out);
    if (!m) continue;
    NodeBuilder builder(graph, end);
    Argument mask = Argument::none();
    if (m->bool_mask_removed != nullptr) {
      mask = Argument::value(builder.unary("aten::logical_not", m->bool_mask_removed));
    } else if (m->additive_mask != nullptr) {
      mask = Argument::value(m->additive_mask);
    }
    Node* attention =
        builder.node("aten::scaled_dot_product_attention",
                     {Argument::value(m->q), Argument::value(m->k), Argument::value(m->v), mask,
                      Argument::real(0.0), Argument::boolean(false)},
                     {out->type()}, {KeywordArgument{"scale", Argument::real(m->scale)}});
    graph.replace_all_uses_with(out, attention->output());
    ++rewritten;
  }
  return rewritten;
}

std::vector<Node*> nodes_of(Graph& graph, std::initializer_list<std::string_view> ops) {
  std::vector<Node*> out;
  for (Node* node : graph.nodes()) {
    if (is_one_of(node, ops)) out.push_back(node);
  }
  return out;
}

}  // namespace

void rewrite_attention(Graph& graph) {
  // 4-d attention first; dce then drops the bmm calls it replaced, which would otherwise
  // match as 3-d attention over the flattened heads.
  if (rewrite_matches(graph,
                      nodes_of(graph, {"aten::view", "aten::_unsafe_view", "aten::reshape"})) > 0) {
    dead_code_elimination(graph);
  }
  rewrite_matches(graph, nodes_of(graph, {"aten::bmm"}));
}

}  // namespace dynvm::graph
