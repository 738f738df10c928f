// Plain, validated descriptions of hardware: GPUs, link types, nodes, fabrics, clusters.
// The config layer fills them from YAML presets; the model never reads files.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"

namespace dtsim::hw {

enum class DType { fp64, fp32, tf32, bf16, fp16, fp8 };
std::string_view to_string(DType d);
std::optional<DType> parse_dtype(std::string_view s);
// Storage size of one element (tf32 is stored as fp32).
int dtype_bytes(DType d);
inline constexpr DType kAllDTypes[] = {DType::fp64, DType::fp32, DType::tf32, DType::bf16, DType::fp16, DType::fp8};

struct GpuSpec {
  std::string name;
  std::string display_name;
  std::string architecture;
  std::string compute_capability;
  std::map<DType, FlopRate> peak;  // dense peaks; a missing dtype is unsupported
  Bytes memory;
  Bandwidth memory_bandwidth;
  std::string memory_kind;
  int sms = 0;
  double sm_clock_hz = 0;  // the SMs' maximum (boost) clock; 0 where the preset does not give it
  Bytes l2;
  int nvlink_generation = 0;
  int nvlink_links = 0;
  int pcie_generation = 0;
  double tdp_watts = 0;
};

// The GPU's compute capability as a number ("9.0" -> 90); 0 when the spec does not say.
int compute_capability_code(const GpuSpec& g);

enum class LinkKind { nvlink, pcie, cpu, net };
std::string_view to_string(LinkKind k);

// One link of a given type: bandwidth per direction, latency per hop.
struct LinkType {
  std::string name;
  LinkKind kind = LinkKind::net;
  Bandwidth bandwidth;
  Time latency;             // per link traversed (for NICs: one adapter's one-way share)
  Time switch_latency;      // NIC types: added per fabric switch a path enters
  double efficiency = 1.0;  // achievable fraction of `bandwidth`
  // NIC types: fabrics of this NIC route adaptively by default (InfiniBand switches spread a
  // flow's packets over the equal-cost paths; NCCL expects it on IB links, presets/links.yaml [16]).
  bool adaptive_routing = false;
};

enum class NvlinkTopology { none, nvswitch, mesh };
std::string_view to_string(NvlinkTopology t);

// The host CPU's maker: NCCL's tuner charges network posts and caps LL across nodes by it.
enum class CpuVendor { intel, amd, other };
std::string_view to_string(CpuVendor v);
std::optional<CpuVendor> parse_cpu_vendor(std::string_view s);

struct NvlinkPair {
  int a = 0, b = 0, links = 1;
};

// GPUs and NICs below one PCIe switch (or, when `direct`, on the CPU's root ports).
struct PcieGroup {
  int cpu = 0;
  bool direct = false;
  std::vector<int> gpus;
  std::vector<int> nics;
};

enum class FabricKind { single_switch, fat_tree, rail_optimized, clos3, custom };
std::string_view to_string(FabricKind k);
std::optional<FabricKind> parse_fabric_kind(std::string_view s);

// How switches choose among equal-cost paths: by destination, one path per destination (D-mod-k,
// static), per packet over all of them (adaptive; modelled as an even split of every flow), or by
// a hash of each flow (ecmp: Ethernet switches' five-tuple hashing, one path per connection).
enum class FabricRouting { static_paths, adaptive, ecmp };
std::string_view to_string(FabricRouting r);
std::optional<FabricRouting> parse_fabric_routing(std::string_view s);

struct CustomLink {
  std::string a, b;
  int count = 1;
};
struct CustomAttach {
  int first_node = 0, last_node = 0;  // inclusive range of node indices
  std::string switch_name;
};

struct FabricSpec {
  FabricKind kind = FabricKind::fat_tree;
  std::optional<LinkType> nic;   // overrides the nodes' NIC type when set
  std::optional<LinkType> link;  // switch-to-switch; defaults to the NIC type
  int nics_per_node = 0;         // 0: every NIC of the node
  int radix = 64;                // ports per switch
  double oversubscription = 1.0; // leaf downlink:uplink bandwidth ratio (>= 1)
  std::optional<Time> switch_latency;  // added per switch entered; default: the NIC type's
  std::optional<FabricRouting> routing;  // default: adaptive when the NIC type routes adaptively
  // kind == custom
  std::vector<std::string> switches;
  std::vector<CustomLink> links;
  std::vector<CustomAttach> attach;
};

struct NodeSpec {
  std::string name;
  std::string description;
  GpuSpec gpu;
  int gpus = 0;
  int cpus = 1;
  CpuVendor cpu_vendor = CpuVendor::other;
  std::optional<LinkType> cpu_link;  // between sockets, when cpus > 1
  NvlinkTopology nvlink_topology = NvlinkTopology::none;
  std::optional<LinkType> nvlink;    // one NVLink link
  int nvlink_links_per_gpu = 0;      // nvswitch: links from each GPU to the switch fabric
  std::vector<NvlinkPair> nvlink_mesh;
  bool nvls = false;                 // NVLink SHARP (in-switch reduction)
  LinkType pcie;
  std::vector<PcieGroup> pcie_groups;
  bool pcie_p2p = true;              // GPU peer-to-peer over PCIe; false: staged via host memory
  std::optional<LinkType> nic;
  int nics = 0;
  bool gpudirect_rdma = true;        // false: NIC traffic staged through host memory
  std::optional<FabricSpec> reference_fabric;  // used when a cluster is "N of these nodes"
};

struct NodeGroup {
  NodeSpec node;
  int count = 1;
  int gpus_per_node = 0;  // GPUs used per node (<= node.gpus); 0: all
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::vector<NodeGroup> groups;
  FabricSpec fabric;
};

}  // namespace dtsim::hw
