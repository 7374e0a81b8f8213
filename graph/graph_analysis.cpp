// topological_order and reachable_from over a Boost adjacency_list view of the data flow.
#include "dynvm/graph/graph_analysis.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/reverse_graph.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>

namespace dynvm::graph {

namespace {

using FlowGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
using Vertex = FlowGraph::vertex_descriptor;

// Vertex i is the i-th live node in program order; an edge runs from the producer of
// each input to its reader. Inputs from removed nodes (a bug the verifier reports) and
// graph inputs add no edge.
struct DataFlow {
  FlowGraph flow;
  std::vector<Node*> nodes;             // by vertex
  std::vector<int64_t> vertex_of_node;  // by node id; -1 when not live

  explicit DataFlow(const Graph& graph) : vertex_of_node(graph.num_node_ids(), -1) {
    for (const Node* node : graph.nodes()) {
      vertex_of_node[node->id()] = static_cast<int64_t>(nodes.size());
      nodes.push_back(graph.node(node->id()));
    }
    flow = FlowGraph(nodes.size());
    for (size_t consumer = 0; consumer < nodes.size(); ++consumer) {
      nodes[consumer]->for_each_input([&](const Value* v) {
        const Node* producer = v->producer();
        if (producer == nullptr || !graph.owns(producer) || producer->is_removed()) return;
        boost::add_edge(static_cast<Vertex>(vertex_of_node[producer->id()]), consumer, flow);
      });
    }
  }
};

// Records every vertex a depth-first visit discovers.
class CollectVertices : public boost::default_dfs_visitor {
 public:
  explicit CollectVertices(std::vector<Vertex>& found) : found_(&found) {}
  template <typename G>
  void discover_vertex(Vertex v, const G&) const {
    found_->push_back(v);
  }

 private:
  std::vector<Vertex>* found_;
};

template <typename G>
void visit_from(const G& g, const std::vector<Vertex>& starts, std::vector<Vertex>& found) {
  std::vector<boost::default_color_type> colors(boost::num_vertices(g), boost::white_color);
  auto color_map =
      boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, g));
  for (Vertex start : starts) {
    // Already reached from an earlier start: its whole subgraph is done.
    if (colors[start] != boost::white_color) continue;
    boost::depth_first_visit(g, start, CollectVertices(found), color_map);
  }
}

}  // namespace

Expected<std::vector<Node*>> topological_order(const Graph& graph) {
  DataFlow data(graph);
  std::vector<Vertex> reversed;
  try {
    boost::topological_sort(data.flow, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    // Name the earliest node (in program order) that lies on a cycle.
    std::vector<size_t> component(data.nodes.size());
    size_t count = boost::strong_components(
        data.flow, boost::make_iterator_property_map(component.begin(),
                                                     boost::get(boost::vertex_index, data.flow)));
    std::vector<size_t> members(count, 0);
    for (size_t c : component) ++members[c];
    for (Vertex v = 0; v < data.nodes.size(); ++v) {
      bool self_loop = boost::edge(v, v, data.flow).second;
      if (members[component[v]] > 1 || self_loop) {
        return make_error("the data flow has a cycle through node #" + std::to_string(v) + " (" +
                          data.nodes[v]->op() + ")");
      }
    }
    return make_error("the data flow has a cycle");
  }
  std::vector<Node*> order;
  order.reserve(reversed.size());
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) order.push_back(data.nodes[*it]);
  return order;
}

NodeSet reachable_from(const Graph& graph, const std::vector<const Node*>& from,
                       FlowDirection direction) {
  DataFlow data(graph);
  std::vector<Vertex> starts;
  for (const Node* node : from) {
    if (graph.owns(node) && data.vertex_of_node[node->id()] >= 0) {
      starts.push_back(static_cast<Vertex>(data.vertex_of_node[node->id()]));
    }
  }
  std::vector<Vertex> found;
  if (direction == FlowDirection::Forward) {
    visit_from(data.flow, starts, found);
  } else {
    visit_from(boost::make_reverse_graph(data.flow), starts, found);
  }
  NodeSet set(graph.num_node_ids());
  for (Vertex v : found) set.insert(data.nodes[v]);
  return set;
}

}  // namespace dynvm::graph
