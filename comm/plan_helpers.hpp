// Small helpers shared by the collective planner's files (collective.cpp, paths.cpp,
// algorithms.cpp): internal to comm/, not part of its interface.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/collective.hpp"

namespace dtsim::comm::detail {

inline std::uint64_t label_of(std::uint64_t a, std::uint64_t b, std::uint64_t c) { return (a * 0x9E3779B1u) ^ (b << 21) ^ (c << 42) ^ c; }

inline Bytes scaled(double bytes, double factor) { return Bytes(static_cast<std::int64_t>(std::ceil(bytes / factor))); }

inline int ceil_log2(int m) {
  int d = 0;
  while ((1 << d) < m) ++d;
  return d;
}

// log2 rounded down (NCCL's log2i); 0 for 1 and below.
inline std::int64_t div_up(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline int floor_log2(std::int64_t m) { return m > 1 ? std::bit_width(static_cast<std::uint64_t>(m)) - 1 : 0; }

inline void append(hw::Path& dst, const hw::Path& src) { dst.insert(dst.end(), src.begin(), src.end()); }


inline std::vector<LinkUse> to_uses(const hw::Path& p) {
  std::vector<LinkUse> u;
  u.reserve(p.size());
  for (LinkId l : p) u.push_back(LinkUse{l, 1});
  return merge_uses(std::move(u));
}

// Binary tree over 0..m-1 built from the bits of the index: rank r > 0 with lowest set bit b
// hangs below (r ^ b) | (b << 1), or r ^ b when that is out of range; 0 is the root. Odd ranks
// are leaves, so shifting every rank by one (below) turns them into the inner nodes.
inline std::vector<int> binary_tree(int m) {
  std::vector<int> parent(static_cast<std::size_t>(m), -1);
  for (int r = 1; r < m; ++r) {
    const int bit = r & -r;
    int up = (r ^ bit) | (bit << 1);
    if (up >= m) up = r ^ bit;
    parent[static_cast<std::size_t>(r)] = up;
  }
  return parent;
}

// NCCL's double binary tree: the second tree is the first shifted by one (even m) or mirrored
// (odd m), so that most leaves of one tree are inner nodes of the other.
inline std::array<std::vector<int>, 2> double_binary_tree(int m) {
  std::vector<int> t0 = binary_tree(m);
  std::vector<int> t1(static_cast<std::size_t>(m), -1);
  auto sigma = [m](int x) { return m % 2 == 0 ? (x + 1) % m : m - 1 - x; };
  for (int x = 0; x < m; ++x) {
    const int p = t0[static_cast<std::size_t>(x)];
    t1[static_cast<std::size_t>(sigma(x))] = p < 0 ? -1 : sigma(p);
  }
  return {t0, t1};
}

}  // namespace dtsim::comm::detail
