// Small hand-made hardware descriptions for tests, independent of the preset files.
#pragma once

#include "hw/specs.hpp"

namespace dtsim::hw::testing {

inline LinkType link(std::string name, LinkKind kind, double GBps, Time latency, Time switch_latency = Time::zero()) {
  LinkType t;
  t.name = std::move(name);
  t.kind = kind;
  t.bandwidth = Bandwidth::GBps(GBps);
  t.latency = latency;
  t.switch_latency = switch_latency;
  return t;
}

inline GpuSpec gpu() {
  GpuSpec g;
  g.name = "test-gpu";
  g.peak[DType::bf16] = FlopRate::TFLOPs(100);
  g.memory = Bytes::GiB(80);
  g.memory_bandwidth = Bandwidth::GBps(2000);
  g.sms = 100;
  return g;
}

// `gpus` GPUs on an NVSwitch (100 GB/s per GPU per direction), one CPU, one PCIe switch per
// pair of GPUs with one NIC each (NIC i beside GPUs 2i, 2i+1) unless `nic_per_gpu`.
inline NodeSpec nvswitch_node(int gpus = 8, bool nic_per_gpu = true, double nic_GBps = 50) {
  NodeSpec n;
  n.name = "test-nvswitch";
  n.gpu = gpu();
  n.gpus = gpus;
  n.cpus = 1;
  n.nvlink_topology = NvlinkTopology::nvswitch;
  n.nvlink = link("nvl", LinkKind::nvlink, 25, Time::ns(300));
  n.nvlink_links_per_gpu = 4;
  n.nvls = true;
  n.pcie = link("pcie", LinkKind::pcie, 32, Time::ns(500));
  n.nics = nic_per_gpu ? gpus : gpus / 2;
  for (int s = 0; s < gpus / 2; ++s) {
    PcieGroup g;
    g.cpu = 0;
    g.gpus = {2 * s, 2 * s + 1};
    g.nics = nic_per_gpu ? std::vector<int>{2 * s, 2 * s + 1} : std::vector<int>{s};
    n.pcie_groups.push_back(g);
  }
  n.nic = link("nic", LinkKind::net, nic_GBps, Time::ns(400), Time::ns(200));
  return n;
}

// Eight GPUs on PCIe only: two CPUs, two switches per CPU, two GPUs per switch.
inline NodeSpec pcie_node(bool p2p = true) {
  NodeSpec n;
  n.name = "test-pcie";
  n.gpu = gpu();
  n.gpus = 8;
  n.cpus = 2;
  n.cpu_link = link("upi", LinkKind::cpu, 60, Time::ns(100));
  n.pcie = link("pcie", LinkKind::pcie, 32, Time::ns(500));
  n.pcie_p2p = p2p;
  n.nics = 4;
  for (int s = 0; s < 4; ++s) {
    PcieGroup g;
    g.cpu = s / 2;
    g.gpus = {2 * s, 2 * s + 1};
    g.nics = {s};
    n.pcie_groups.push_back(g);
  }
  n.nic = link("nic", LinkKind::net, 25, Time::ns(400), Time::ns(200));
  return n;
}

inline ClusterSpec cluster(NodeSpec node, int count, FabricKind kind, int radix = 64) {
  ClusterSpec c;
  c.name = "test";
  c.groups.push_back(NodeGroup{std::move(node), count, 0});
  c.fabric.kind = kind;
  c.fabric.radix = radix;
  return c;
}

}  // namespace dtsim::hw::testing
