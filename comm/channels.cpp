#include "comm/channels.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace dtsim::comm {

namespace {
// NCCL v2.18.5 src/graph/search.cc.
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12};
constexpr double kSm90SpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12};
constexpr int kMaxChannels = 32;  // MAXCHANNELS; the ring search finds at most half
constexpr double kInf = std::numeric_limits<double>::infinity();

// topo.h: NVLink bandwidth per link by compute capability.
double nvlink_GBps(int cc) {
  if (cc == 86) return 12.0;
  if (cc >= 70 || cc == 0) return 20.0;
  return 18.0;
}
// topo.cc: width x speed / 80, 12 GB/s for x16 Gen3 (PCI_BW).
double pcie_GBps(int generation) { return generation >= 3 ? 12.0 * std::pow(2.0, generation - 3) : kInf; }
int fits(double capacity, double speed) { return capacity >= kInf ? kMaxChannels : static_cast<int>(std::floor(capacity / speed + 1e-9)); }
}  // namespace

double nccl_search_speed(double GBps, int compute_capability) {
  const bool sm90 = compute_capability >= 90;
  const double* first = sm90 ? std::begin(kSm90SpeedInter) : std::begin(kSpeedInter);
  const double* last = sm90 ? std::end(kSm90SpeedInter) : std::end(kSpeedInter);
  for (const double* s = first; s != last; ++s) {
    if (*s <= GBps) return *s;
  }
  return *(last - 1);
}

SearchResult nccl_ring_search(const ChannelSearch& node) {
  const int cc = node.compute_capability;
  const bool sm90 = cc >= 90;
  const double* table = sm90 ? std::begin(kSm90SpeedInter) : std::begin(kSpeedInter);
  const int speeds = static_cast<int>(sm90 ? std::size(kSm90SpeedInter) : std::size(kSpeedInter));
  const double pcie = pcie_GBps(node.pcie_generation);
  const int g = std::max(1, node.gpus);
  const double total = node.nvlinks > 0 ? node.nvlinks * nvlink_GBps(cc) : pcie;  // system->totalBw
  const double max_bw = std::min(node.nic_GBps, pcie);
  auto channels_at = [&](double s) {
    int n = std::max(1, node.nics) * fits(node.nic_GBps, s);
    if (node.nvlinks > 0 && g > 1) {
      n = std::min(n, fits(total * g / (g - 1), s));
    } else {
      n = std::min(n, fits(pcie, s));  // every channel through the GPU's PCIe link (a lone GPU: in from a NIC, out to one)
    }
    return std::clamp(n, 0, kMaxChannels / 2);
  };
  int i = 0;
  while (i < speeds - 1 && (table[i] > max_bw || table[i] > total)) ++i;
  SearchResult best{0, 0};
  for (;;) {
    const double s = table[i];
    const int n = channels_at(s);
    if (n * s > best.channels * best.speed) best = {n, s};
    if (best.channels > 0 && best.channels * best.speed >= total) break;
    if (i + 1 < speeds && (best.channels == 0 || table[i + 1] / best.speed > .49)) {
      ++i;
      continue;
    }
    break;
  }
  if (best.channels == 0) return {1, table[speeds - 1]};  // NCCL falls back to one slow channel
  // End of ncclTopoCompute: duplicate unless bwIntra < 25, or (ccMin > 80 && bwIntra < 50 && nChannels > 4).
  const bool keep = best.speed < 25.0 || (cc > 80 && best.speed < 50.0 && best.channels > 4);
  if (!keep) {
    const int dup = std::min(2 * best.channels, kMaxChannels / 2);
    best.speed /= (dup + best.channels - 1) / best.channels;
    best.channels = dup;
  }
  return best;
}

SearchResult nccl_multinode_graph(const std::vector<ChannelSearch>& nodes) {
  if (nodes.empty()) return {1, 0};
  SearchResult g{kMaxChannels, kInf};
  for (const ChannelSearch& node : nodes) {
    const SearchResult r = nccl_ring_search(node);
    g.channels = std::min(g.channels, r.channels);  // init.cc: the ranks' smallest graph
    g.speed = std::min(g.speed, r.speed);
  }
  return g;
}

int nccl_multinode_channels(const std::vector<ChannelSearch>& nodes) {
  if (nodes.empty()) return 1;
  const SearchResult g = nccl_multinode_graph(nodes);
  int min_cc = std::numeric_limits<int>::max();
  for (const ChannelSearch& node : nodes) min_cc = std::min(min_cc, node.compute_capability);
  // connect.cc, ncclTopoPostset: every search channel runs twice.
  int n = std::min(kMaxChannels, 2 * g.channels);
  // "Use 4 compute channels per search channel to reach peak BW on <8 PPN": Hopper, more than one
  // node, ring bwIntra above 45.
  if (min_cc == 90 && nodes.size() > 1 && g.speed > 45.0 && 2 * n <= kMaxChannels) n *= 2;
  return n;
}

PerChannelCaps nccl_per_channel_caps(int compute_capability, int nodes) {
  // v2.18.5 tuning.cc, indexed [Volta, Ampere, Hopper][1 node, 2 nodes, more].
  constexpr double kTree[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
  constexpr double kTreeLL128[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
  constexpr double kRingLL128[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
  if (compute_capability <= 0) return {kInf, kInf, kInf};
  const int gen = compute_capability >= 90 ? 2 : compute_capability >= 80 ? 1 : 0;
  const int n = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
  return {kTree[gen][n], kTreeLL128[gen][n], kRingLL128[gen][n]};
}

}  // namespace dtsim::comm
