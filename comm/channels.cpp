#include "comm/channels.hpp"

#include <algorithm>
#include <iterator>

namespace dtsim::comm {

namespace {
// NCCL v2.18.5 src/graph/search.cc.
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12};
constexpr double kSm90SpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12};
constexpr int kMaxChannels = 32;  // MAXCHANNELS
}  // namespace

double nccl_search_speed(double nic_GBps, int compute_capability) {
  const bool sm90 = compute_capability >= 90;
  const double* first = sm90 ? std::begin(kSm90SpeedInter) : std::begin(kSpeedInter);
  const double* last = sm90 ? std::end(kSm90SpeedInter) : std::end(kSpeedInter);
  for (const double* s = first; s != last; ++s) {
    if (*s <= nic_GBps) return *s;
  }
  return *(last - 1);
}

int nccl_multinode_channels(const ChannelSearch& s) {
  int n = std::clamp(s.search_channels, 1, kMaxChannels / 2);
  double bw = nccl_search_speed(s.nic_GBps, s.compute_capability);
  // search.cc, end of ncclTopoCompute: duplicate the channels unless bwIntra < 25, or
  // (ccMin > 80 && bwIntra < 50 && nChannels > 4).
  const bool keep = bw < 25.0 || (s.compute_capability > 80 && bw < 50.0 && n > 4);
  if (!keep) {
    const int dup = std::min(2 * n, kMaxChannels / 2);
    bw /= (dup + n - 1) / n;
    n = dup;
  }
  // connect.cc, ncclTopoPostset: every search channel runs twice.
  n = std::min(kMaxChannels, 2 * n);
  // connect.cc: "Use 4 compute channels per search channel to reach peak BW on <8 PPN" (Hopper,
  // more than one node, ring bwIntra above 45).
  if (s.compute_capability == 90 && bw > 45.0 && 2 * n <= kMaxChannels) n *= 2;
  return n;
}

}  // namespace dtsim::comm
