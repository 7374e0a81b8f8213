// Iterators whose items are made when they are asked for (lazy_items.h).
#include "lazy_items.h"

#include <set>
#include <string>
#include <utility>

#include "dynvm/graph/graph.h"
#include "dynvm/graph/op_properties.h"
#include "inline_frame.h"
#include "torch_bridge.h"
#include "trace_context.h"

namespace dynvm::vm {

namespace {

// Draining an iterator that never ends (`while True: yield`) stops here.
constexpr size_t kMaxDrainedItems = 100000;

ValuePtr int_value(long long v) {
  return TracedValue::constant(PyRef::steal(PyLong_FromLongLong(v)));
}

// A generator stepped while its consumer drains it wrote no tensor that existed before it
// (an in-place op on an input or on a tensor computed earlier): the drain runs steps that
// eager may interleave with its consumer's reads, or not run at all (any(), `in`).
void check_drained_generator_writes_no_tensor(TraceContext& ctx, size_t nodes_before) {
  // The step's own nodes: the last ones, walked back (not the whole graph at every step).
  std::set<const graph::Node*> made;
  size_t count = ctx.bridge->node_count();
  for (const graph::Node* node = ctx.bridge->graph().last_node();
       node != nullptr && count > nodes_before; node = node->prev(), --count) {
    made.insert(node);
  }
  for (const graph::Node* node : made) {
    if (!graph::op_properties(node->op()).mutates) continue;
    bool earlier = false;
    node->for_each_input([&](const graph::Value* in) {
      earlier = earlier || in->is_input() || made.count(in->producer()) == 0;
    });
    if (earlier) {
      unsupported("an in-place " + node->op() + " inside a generator run ahead, on a tensor " +
                  "made before it (eager runs the generator step by step, between the reads " +
                  "of its consumer)");
    }
  }
}

class GeneratorSteps final : public LazyItems {
 public:
  GeneratorSteps(std::unique_ptr<InlineFrame> frame, uint64_t start_serial)
      : frame_(std::move(frame)), start_serial_(start_serial) {}

  ValuePtr produce(TraceContext& ctx) override {
    if (!frame_) return nullptr;
    if (running_) unsupported("a generator asked for its next item while it runs");
    struct Step {
      GeneratorSteps& self;
      TraceContext& c;
      bool ahead;
      uint64_t outer_start;
      Step(GeneratorSteps& s, TraceContext& context)
          : self(s),
            c(context),
            ahead(context.draining > 0),
            outer_start(context.generator_start_serial) {
        self.running_ = true;
        ++c.inline_depth;
        if (ahead) {
          ++c.generator_depth;
          c.generator_start_serial = self.start_serial_;
        }
      }
      ~Step() {
        self.running_ = false;
        --c.inline_depth;
        if (ahead) {
          --c.generator_depth;
          c.generator_start_serial = outer_start;
        }
      }
    } step{*this, ctx};
    const size_t nodes_before = ctx.bridge->node_count();
    ValuePtr result;
    try {
      result = frame_->run();
    } catch (...) {
      frame_.reset();  // a generator that raised is finished
      throw;
    }
    if (step.ahead) check_drained_generator_writes_no_tensor(ctx, nodes_before);
    ValuePtr item = frame_->take_yielded();
    if (!item) {  // it returned
      returned_ = std::move(result);
      frame_.reset();
    }
    return item;
  }
  bool pending() const override { return frame_ != nullptr; }
  bool pure() const override { return false; }
  ValuePtr returned() const override { return returned_; }

 private:
  std::unique_ptr<InlineFrame> frame_;
  ValuePtr returned_;
  uint64_t start_serial_;
  bool running_ = false;
};

// map(function, *sources) and filter(predicate, source).
class MapItems final : public LazyItems {
 public:
  MapItems(ValuePtr function, std::vector<ValuePtr> sources, bool filter)
      : function_(std::move(function)), sources_(std::move(sources)), filter_(filter) {}

  ValuePtr produce(TraceContext& ctx) override {
    while (!done_) {
      std::vector<ValuePtr> args;
      for (const ValuePtr& source : sources_) {
        ValuePtr item = next_item(ctx, source);
        if (!item) {
          done_ = true;
          return nullptr;
        }
        args.push_back(std::move(item));
      }
      if (!filter_) return call_value(ctx, function_, std::move(args), {});
      bool keep =
          function_ ? truthiness(call_value(ctx, function_, {args[0]}, {})) : truthiness(args[0]);
      if (keep) return args[0];
    }
    return nullptr;
  }
  bool pending() const override { return !done_; }
  bool pure() const override { return false; }

 private:
  ValuePtr function_;  // filter: null for filter(None, ...)
  std::vector<ValuePtr> sources_;
  bool filter_;
  bool done_ = false;
};

// enumerate, zip and itertools.chain: items of their sources, regrouped.
class RegroupedItems final : public LazyItems {
 public:
  enum class Kind { Enumerate, Zip, Chain };
  RegroupedItems(Kind kind, std::vector<ValuePtr> sources, long long start)
      : kind_(kind), sources_(std::move(sources)), count_(start) {}

  ValuePtr produce(TraceContext& ctx) override {
    if (done_) return nullptr;
    switch (kind_) {
      case Kind::Enumerate: {
        ValuePtr item = next_item(ctx, sources_[0]);
        if (!item) break;
        return TracedValue::tuple({int_value(count_++), std::move(item)});
      }
      case Kind::Zip: {
        // As zip does: the sources are asked in order, and the first that ends ends it.
        std::vector<ValuePtr> items;
        for (const ValuePtr& source : sources_) {
          ValuePtr item = next_item(ctx, source);
          if (!item) break;
          items.push_back(std::move(item));
        }
        if (sources_.empty() || items.size() < sources_.size()) break;
        return TracedValue::tuple(std::move(items));
      }
      case Kind::Chain:
        for (; next_source_ < sources_.size(); ++next_source_) {
          if (ValuePtr item = next_item(ctx, sources_[next_source_])) return item;
        }
        break;
    }
    done_ = true;
    return nullptr;
  }
  bool pending() const override { return !done_; }
  bool pure() const override {
    for (const ValuePtr& source : sources_) {
      if (has_pending_user_code(source)) return false;
    }
    return true;
  }

 private:
  Kind kind_;
  std::vector<ValuePtr> sources_;
  long long count_;
  size_t next_source_ = 0;
  bool done_ = false;
};

}  // namespace

ValuePtr lazy_iterator(TraceContext& ctx, std::shared_ptr<LazyItems> lazy) {
  lazy->made_at_instruction = ctx.root_instruction;
  lazy->made_at_arrival = ctx.root_arrival;
  ValuePtr it = TracedValue::iterator({});
  it->lazy = std::move(lazy);
  return it;
}

ValuePtr next_item(TraceContext& ctx, const ValuePtr& iterator) {
  if (iterator->position < iterator->items.size()) return iterator->items[iterator->position++];
  if (!iterator->lazy || !iterator->lazy->pending()) return nullptr;
  ValuePtr item = iterator->lazy->produce(ctx);
  if (!item) return nullptr;
  iterator->items.push_back(item);
  ++iterator->position;
  return item;
}

std::vector<ValuePtr> drain_iterator(TraceContext& ctx, const ValuePtr& iterator, bool whole) {
  std::vector<ValuePtr> rest;
  // The innermost drain decides for the generators stepped within it.
  struct Restore {
    TraceContext& c;
    int outer;
    ~Restore() { c.draining = outer; }
  } restore{ctx, ctx.draining};
  ctx.draining = whole ? 0 : ctx.draining + 1;
  while (ValuePtr item = next_item(ctx, iterator)) {
    if (rest.size() >= kMaxDrainedItems) unsupported("iterating a very long sequence");
    rest.push_back(std::move(item));
  }
  return rest;
}

bool has_pending_user_code(const ValuePtr& iterator) {
  return iterator->is(TracedValue::Kind::Iterator) && iterator->lazy && iterator->lazy->pending() &&
         !iterator->lazy->pure();
}

void refuse_suspended_iterator(const TraceContext& ctx, const ValuePtr& iterator) {
  Unsupported stop;
  stop.reason = "a generator (or a map or filter) suspended in the loop taking its items: the " +
                std::string("frame cannot be rebuilt around it");
  const LazyItems& lazy = *iterator->lazy;
  stop.root_instruction = lazy.made_at_instruction;
  stop.root_arrival = lazy.made_at_arrival;
  if (ctx.root_code != nullptr && stop.root_instruction >= 0) {
    const auto& at = ctx.root_code->instructions[static_cast<size_t>(stop.root_instruction)];
    stop.filename = ctx.root_code->filename;
    stop.lineno = at.positions.line > 0 ? at.positions.line : ctx.root_code->firstlineno;
  }
  throw stop;
}

ValuePtr generator_iterator(TraceContext& ctx, std::unique_ptr<InlineFrame> frame,
                            uint64_t start_serial) {
  frame->suspend_at_yields();
  ValuePtr it =
      lazy_iterator(ctx, std::make_shared<GeneratorSteps>(std::move(frame), start_serial));
  // isinstance() sees it as a generator.
  it->class_value = TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyGen_Type)));
  return it;
}

ValuePtr lazy_map(TraceContext& ctx, ValuePtr function, std::vector<ValuePtr> sources) {
  return lazy_iterator(ctx,
                       std::make_shared<MapItems>(std::move(function), std::move(sources), false));
}

ValuePtr lazy_filter(TraceContext& ctx, ValuePtr predicate, ValuePtr source) {
  return lazy_iterator(ctx,
                       std::make_shared<MapItems>(std::move(predicate),
                                                  std::vector<ValuePtr>{std::move(source)}, true));
}

ValuePtr lazy_enumerate(TraceContext& ctx, ValuePtr source, long long start) {
  return lazy_iterator(
      ctx, std::make_shared<RegroupedItems>(RegroupedItems::Kind::Enumerate,
                                            std::vector<ValuePtr>{std::move(source)}, start));
}

ValuePtr lazy_zip(TraceContext& ctx, std::vector<ValuePtr> sources) {
  return lazy_iterator(
      ctx, std::make_shared<RegroupedItems>(RegroupedItems::Kind::Zip, std::move(sources), 0));
}

ValuePtr lazy_chain(TraceContext& ctx, std::vector<ValuePtr> sources) {
  return lazy_iterator(
      ctx, std::make_shared<RegroupedItems>(RegroupedItems::Kind::Chain, std::move(sources), 0));
}

}  // namespace dynvm::vm
