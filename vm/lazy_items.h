// Iterators whose items are made when they are asked for, in the order eager makes them: a
// generator the VM steps one yield at a time, and the lazy builtins over any iterator
// (map, filter, enumerate, zip, itertools.chain). Private to vm/.
//
// Eager runs a generator's body between its consumer's steps, and calls map's function
// as each item is taken. Making every item at once instead (when the generator or the map
// is made) reorders their reads and writes against the consumer's: a generator that
// yields an attribute the loop body increments would yield stale values.
#pragma once

#include <memory>
#include <vector>

#include "dynvm/vm/traced_value.h"

namespace dynvm::vm {

class TraceContext;
class InlineFrame;

class LazyItems {
 public:
  virtual ~LazyItems() = default;
  // The next item, or null once there is none (and on every later call). Throws Unsupported.
  virtual ValuePtr produce(TraceContext& context) = 0;
  // Whether items can still come (false once produce() returned null or raised).
  virtual bool pending() const = 0;
  // Whether producing the rest runs no user code (the rest of an enumerate or zip over
  // lists): a frame rebuilt at a graph break may then be given them all.
  virtual bool pure() const = 0;
  // What a finished generator returned (StopIteration's value: what `yield from` gives),
  // or null: None for everything else.
  virtual ValuePtr returned() const { return nullptr; }

  // The traced frame's instruction that made it, and the how-manieth arrival there (where
  // a graph break can come instead when the frame cannot be rebuilt with it suspended).
  int made_at_instruction = -1;
  int made_at_arrival = 0;
};

// An iterator over what `lazy` makes, made at the traced frame's current instruction.
ValuePtr lazy_iterator(TraceContext& context, std::shared_ptr<LazyItems> lazy);

// The next item of an Iterator value, moving it on; null when it has none left.
ValuePtr next_item(TraceContext& context, const ValuePtr& iterator);

// Every item an Iterator value has left, moving it to its end. `whole`: the consumer takes
// them all before anything else runs in eager too (list(it), unpacking, sum). Otherwise
// (a function written in C that may stop early, as itertools.islice does) a generator
// stepped here may run steps eager would not, and runs under TraceContext::generator_depth's
// restrictions: mutating what existed before it is a graph break.
std::vector<ValuePtr> drain_iterator(TraceContext& context, const ValuePtr& iterator, bool whole);

// Whether the Iterator value may still make items that run user code when made (a
// generator not run to its end): such an iterator cannot be rebuilt at a graph break.
bool has_pending_user_code(const ValuePtr& iterator);

// Refuses to rebuild such an iterator at a graph break: the Unsupported names the traced
// frame's instruction that made it, where the break then comes (vm/tracer.cpp).
[[noreturn]] void refuse_suspended_iterator(const TraceContext& context, const ValuePtr& iterator);

// A generator function's frame, stepped to its next yield each time an item is asked for.
// `start_serial` is the serial of the first value made by the call that made it.
ValuePtr generator_iterator(TraceContext& context, std::unique_ptr<InlineFrame> frame,
                            uint64_t start_serial);

// The lazy builtins over iterators (`source` and `sources` are Iterator values).
ValuePtr lazy_map(TraceContext& context, ValuePtr function, std::vector<ValuePtr> sources);
// predicate null: filter(None, ...), by truthiness
ValuePtr lazy_filter(TraceContext& context, ValuePtr predicate, ValuePtr source);
ValuePtr lazy_enumerate(TraceContext& context, ValuePtr source, long long start);
ValuePtr lazy_zip(TraceContext& context, std::vector<ValuePtr> sources);
ValuePtr lazy_chain(TraceContext& context, std::vector<ValuePtr> sources);

}  // namespace dynvm::vm
