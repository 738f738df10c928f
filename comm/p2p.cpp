#include "comm/p2p.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <utility>

#include "comm/channels.hpp"
#include "comm/plan_helpers.hpp"

namespace dtsim::comm {

namespace {
constexpr int kMaxChannels = 32;  // MAXCHANNELS in v2.18.5

using detail::div_up;
int next_pow2(int v) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(1, v)))); }

// ncclTopoGetNchannels over the pairs of `locals`, smallest: 2 x links for a pair joined by NVLink
// (through the switch: every link of the GPU), 2 for any other pair. Also whether any pair is
// NVLink (ncclTopoPathAllNVLink: the smallest path type).
std::pair<int, bool> pair_channels(const hw::NodeSpec& spec, const std::vector<int>& locals) {
  if (spec.nvlink_topology == hw::NvlinkTopology::nvswitch) return {2 * std::max({1, spec.gpu.nvlink_links, spec.nvlink_links_per_gpu}), true};
  if (spec.nvlink_topology == hw::NvlinkTopology::none) return {2, false};
  // A mesh lists each joined pair once (the node loader refuses repeats and empty links).
  int fewest = std::numeric_limits<int>::max();
  bool any = false;
  for (std::size_t i = 0; i < locals.size(); ++i) {
    for (std::size_t j = i + 1; j < locals.size(); ++j) {
      const int a = std::min(locals[i], locals[j]), b = std::max(locals[i], locals[j]);
      const auto link = std::find_if(spec.nvlink_mesh.begin(), spec.nvlink_mesh.end(),
                                     [&](const hw::NvlinkPair& p) { return std::min(p.a, p.b) == a && std::max(p.a, p.b) == b; });
      const int links = link == spec.nvlink_mesh.end() ? 1 : link->links;  // no NVLink: 2 channels, as one link's
      any = any || link != spec.nvlink_mesh.end();
      fewest = std::min(fewest, links);
    }
  }
  if (fewest == std::numeric_limits<int>::max()) fewest = 1;
  return {2 * fewest, any};
}
}  // namespace

int nccl_p2p_channels(const P2pChannelRule& rule, Bytes bytes) {
  const int ranks = std::max(1, rule.ranks);
  const int opened = std::clamp(rule.comm_channels, 1, kMaxChannels);
  const int per_peer = next_pow2(std::max(1, std::min(opened, rule.pair_channels)));
  const int p2p_channels = next_pow2(opened);
  int lo = per_peer, hi = per_peer;
  while (lo * ranks > p2p_channels && lo > 1) lo /= 2;
  while (hi * ranks > p2p_channels * rule.channel_load && hi > 1) hi /= 2;
  // calcP2pChunkSize, one node.
  const std::int64_t step = std::min(rule.nvlink ? std::int64_t{512} << 10 : std::int64_t{128} << 10, std::max<std::int64_t>(1, rule.simple_step));
  const std::int64_t min_size = step / 8, max_size = step * 32;
  const std::int64_t total = std::max<std::int64_t>(1, bytes.count());
  std::int64_t size = std::max(min_size, div_up(total, lo));
  int channels = lo;
  while (size > max_size && channels <= hi / 2) {
    channels *= 2;
    size = div_up(total, channels);
  }
  const std::int64_t chunk = div_up(size, min_size) * min_size;
  // Chunk k runs on the peer's channel k mod per_peer.
  return static_cast<int>(std::clamp<std::int64_t>(div_up(total, chunk), 1, std::min(channels, per_peer)));
}

P2pNodeRate nccl_p2p_node_rate(const hw::NodeSpec& spec, const CommParams& params, const std::vector<int>& locals, Bytes bytes) {
  const auto [pairs, nvlink] = pair_channels(spec, locals);
  const P2pChannelRule rule{params.max_channels, static_cast<int>(locals.size()), pairs, nvlink, params.p2p_channel_load, params.simple_step().count()};
  P2pNodeRate r;
  r.channels = nccl_p2p_channels(rule, bytes);
  const int cc = hw::compute_capability_code(spec.gpu);
  if (cc > 0 && cc < 100) r.cap = Bandwidth::GBps(nccl_per_channel_caps(cc, 1).tree / 2.0 * r.channels);
  return r;
}

}  // namespace dtsim::comm
