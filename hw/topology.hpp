// The cluster as a graph of directed links (each physical full-duplex link is two of them).
// Nodes of one kind share a NodeTemplate (local vertices, links and precomputed local routes);
// the fabric (NICs and switches) is routed with cached shortest-path tables and ECMP.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "hw/specs.hpp"
#include "sim/expected.hpp"
#include "sim/flow_network.hpp"

namespace dtsim::hw {

enum class VertexKind : std::uint8_t { gpu, cpu, pcie_switch, nvswitch, nic, fabric_switch };

struct Vertex {
  VertexKind kind;
  int node = -1;   // -1 for fabric switches
  int index = 0;   // GPU, CPU, NIC... number inside its node; switch number in the fabric
};

struct TopoLink {
  std::uint32_t src = 0, dst = 0;  // vertex ids
  LinkKind kind = LinkKind::net;
  Bandwidth bandwidth;             // line rate of this direction
  double efficiency = 1.0;         // achievable fraction of the line rate (from the link type)
  Time latency;
  std::string type;                // link type name, e.g. "nvlink4"
  // What flows can use: line rate x efficiency.
  Bandwidth capacity() const { return bandwidth * efficiency; }
};

using Path = std::vector<LinkId>;

// Graph with the link id on every edge (Boost.Graph, used for shortest paths).
struct EdgeLink {
  std::uint32_t link = 0;
  std::int64_t cost = 0;  // routing weight: latency + time to move 1 MiB, in ps
};
using LinkGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, EdgeLink>;

// Routing cost of a link: its latency plus the time to move 1 MiB over it (integer, so that
// equal links tie exactly and ECMP sees them as equal).
std::int64_t routing_cost(Bandwidth bw, Time latency);
// The cost of no route, in the units of routing_cost (far from overflow when costs are added).
inline constexpr std::int64_t kUnreachableCost = std::numeric_limits<std::int64_t>::max() / 4;

// The internal structure of one kind of node with a given number of GPUs in use.
class NodeTemplate {
 public:
  static Expected<NodeTemplate> build(const NodeSpec& spec, int gpus_used);

  const NodeSpec& spec() const { return spec_; }
  int gpus() const { return gpus_; }
  int nics() const { return spec_.nics; }
  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<TopoLink>& links() const { return links_; }
  int gpu_vertex(int g) const { return g; }
  int nic_vertex(int n) const { return first_nic_ + n; }
  int cpu_vertex(int c) const { return first_cpu_ + c; }
  int nvswitch_vertex() const { return nvswitch_; }  // -1 without NVSwitch
  int cpu_of_gpu(int g) const { return gpu_cpu_[static_cast<std::size_t>(g)]; }  // a local vertex (see cpu_vertex)
  // Local links (indices into links()) from one local vertex to another. Empty when from == to.
  const std::vector<std::uint32_t>& route(int from, int to) const;
  bool reachable(int from, int to) const { return from == to || !route(from, to).empty(); }
  // The NIC a GPU uses by default among the node's NICs (those the fabric uses: a node with
  // fewer keeps only those, hw/topology.cpp with_nics): the cheapest route, ties broken towards
  // the proportional position (GPU g of G with N NICs prefers NIC g*N/G). -1 when none is
  // reachable.
  int nearest_nic(int gpu) const;
  std::int64_t route_cost(int from, int to) const;

 private:
  int add_vertex(VertexKind kind, int index);
  void add_duplex(int a, int b, const LinkType& type, Bandwidth bw);
  void compute_routes();

  NodeSpec spec_;
  int gpus_ = 0;
  int first_cpu_ = 0, first_nic_ = 0, nvswitch_ = -1;
  std::vector<int> gpu_cpu_;
  std::vector<Vertex> vertices_;
  std::vector<TopoLink> links_;
  std::vector<std::vector<std::uint32_t>> routes_;  // [from * V + to]
  std::vector<std::int64_t> costs_;
};

class Topology {
 public:
  static Expected<Topology> build(const ClusterSpec& spec);

  const ClusterSpec& spec() const { return spec_; }
  int gpus() const { return static_cast<int>(gpu_node_.size()); }
  int nodes() const { return static_cast<int>(nodes_.size()); }
  int node_of(int rank) const { return gpu_node_[static_cast<std::size_t>(rank)]; }
  int local_of(int rank) const { return rank - nodes_[static_cast<std::size_t>(node_of(rank))].first_rank; }
  int first_rank(int node) const { return nodes_[static_cast<std::size_t>(node)].first_rank; }
  const NodeTemplate& node_template(int node) const { return *templates_[nodes_[static_cast<std::size_t>(node)].tmpl]; }
  int fabric_nics(int node) const { return nodes_[static_cast<std::size_t>(node)].nics_used; }
  // Switch vertices of the model: an adaptively routed tier is one pooled vertex, so this counts
  // physical switches only under static routing (the summary gives the physical counts).
  int fabric_switches() const { return static_cast<int>(switch_names_.size()); }
  // Global vertex of a node's local vertex, and of a GPU rank.
  std::uint32_t vertex(int node, int local_vertex) const;
  std::uint32_t gpu_vertex(int rank) const { return vertex(node_of(rank), local_of(rank)); }
  // Global link id of a node's local link.
  LinkId link_id(int node, std::uint32_t local_link) const;

  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<TopoLink>& links() const { return links_; }
  const TopoLink& link(LinkId id) const { return links_[id.value]; }
  std::string vertex_name(std::uint32_t v) const;
  std::string link_name(LinkId id) const;
  const LinkGraph& fabric_graph() const { return fabric_; }
  // Fabric-graph vertex of a global vertex (NICs and switches), or -1.
  int fabric_vertex(std::uint32_t v) const;
  std::uint32_t global_of_fabric(int fv) const { return fabric_global_[static_cast<std::size_t>(fv)]; }
  // Position of a fabric NIC in the tree, for destination-based routing (D-mod-k): its leaf
  // switch's number times the most NICs any leaf holds, plus its port among that leaf's NICs.
  int tree_position(int fabric_nic) const { return tree_position_[static_cast<std::size_t>(fabric_nic)]; }
  // How the fabric's switches choose among equal-cost paths (Router::append_fabric).
  FabricRouting routing() const { return routing_; }

  // Adds every link to `net`, in id order, so that LinkId values match this topology's.
  void install(FlowNetwork& net) const;

  // A one-line description, e.g. "4 x dgx-h100 (32 GPUs), rail-optimized fabric: 8 x ib-ndr per node, 8 leaf + 0 spine".
  std::string summary() const;

 private:
  struct NodeInstance {
    std::size_t tmpl = 0;
    int group = 0;
    int first_rank = 0;
    std::uint32_t first_vertex = 0;
    std::uint32_t first_link = 0;
    int nics_used = 0;
  };
  friend class FabricBuilder;

  ClusterSpec spec_;
  std::vector<std::unique_ptr<NodeTemplate>> templates_;
  std::vector<NodeInstance> nodes_;
  std::vector<int> gpu_node_;
  std::vector<Vertex> vertices_;
  std::vector<TopoLink> links_;
  std::vector<std::string> switch_names_;
  std::string fabric_summary_;
  LinkGraph fabric_;
  std::vector<std::uint32_t> fabric_global_;
  std::unordered_map<std::uint32_t, int> fabric_index_;
  std::vector<int> tree_position_;  // by fabric vertex (NICs only; -1 for switches)
  FabricRouting routing_ = FabricRouting::static_paths;
};

// Routes between GPUs and NICs. Holds caches; one per simulation (not thread-safe).
class Router {
 public:
  explicit Router(const Topology& topo) : topo_(topo) {}

  // GPU to GPU. Across nodes, each side uses its nearest NIC. Among equal-cost fabric paths the
  // route is chosen by destination (D-mod-k, as InfiniBand subnet managers' fat-tree routing does),
  // so that the flows of a shift permutation (a ring) leave a leaf over distinct uplinks; under
  // ECMP routing by a hash of the flow: its endpoints and `label` (which names the connection, as
  // a queue pair's UDP source port does) with each switch's seed.
  Path route(int src_rank, int dst_rank, std::uint64_t label = 0);
  // Across nodes through given NICs (node-local NIC numbers).
  Path route_via(int src_rank, int src_nic, int dst_nic, int dst_rank, std::uint64_t label = 0);
  // Appends the local links from one local vertex to another inside `node`.
  void append_local(int node, int from, int to, Path& out) const;
  // Appends fabric links from one NIC (global vertex) to another.
  void append_fabric(std::uint32_t src_nic, std::uint32_t dst_nic, std::uint64_t label, Path& out);
  Time latency(const Path& p) const;
  // Smallest link capacity along a path (zero for an empty path).
  Bandwidth bottleneck(const Path& p) const;
  std::size_t cached_tables() const { return dist_.size(); }

 private:
  const std::vector<std::int64_t>& distances_to(int fabric_anchor);

  const Topology& topo_;
  std::unordered_map<int, std::vector<std::int64_t>> dist_;
};

}  // namespace dtsim::hw
