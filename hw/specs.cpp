#include "hw/specs.hpp"

namespace dtsim::hw {

std::string_view to_string(DType d) {
  switch (d) {
    case DType::fp64: return "fp64";
    case DType::fp32: return "fp32";
    case DType::tf32: return "tf32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8: return "fp8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType d : kAllDTypes) {
    if (to_string(d) == s) return d;
  }
  if (s == "float" || s == "float32") return DType::fp32;
  if (s == "double" || s == "float64") return DType::fp64;
  if (s == "half" || s == "float16") return DType::fp16;
  if (s == "bfloat16") return DType::bf16;
  return std::nullopt;
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::fp64: return 8;
    case DType::fp32: return 4;
    case DType::tf32: return 4;
    case DType::bf16: return 2;
    case DType::fp16: return 2;
    case DType::fp8: return 1;
  }
  return 4;
}

int compute_capability_code(const GpuSpec& g) {
  const std::string& cc = g.compute_capability;
  const auto dot = cc.find('.');
  if (cc.empty() || dot == std::string::npos || dot == 0 || dot + 1 >= cc.size()) return 0;
  int major = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (cc[i] < '0' || cc[i] > '9') return 0;
    major = major * 10 + (cc[i] - '0');
    if (major > 100) return 0;
  }
  if (cc[dot + 1] < '0' || cc[dot + 1] > '9') return 0;
  return major * 10 + (cc[dot + 1] - '0');
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::cpu: return "cpu";
    case LinkKind::net: return "net";
  }
  return "?";
}

std::string_view to_string(NvlinkTopology t) {
  switch (t) {
    case NvlinkTopology::none: return "none";
    case NvlinkTopology::nvswitch: return "nvswitch";
    case NvlinkTopology::mesh: return "mesh";
  }
  return "?";
}

std::string_view to_string(CpuVendor v) {
  switch (v) {
    case CpuVendor::intel: return "intel";
    case CpuVendor::amd: return "amd";
    case CpuVendor::other: return "other";
  }
  return "?";
}

std::optional<CpuVendor> parse_cpu_vendor(std::string_view s) {
  for (CpuVendor v : {CpuVendor::intel, CpuVendor::amd, CpuVendor::other}) {
    if (to_string(v) == s) return v;
  }
  return std::nullopt;
}

std::string_view to_string(FabricKind k) {
  switch (k) {
    case FabricKind::single_switch: return "single-switch";
    case FabricKind::fat_tree: return "fat-tree";
    case FabricKind::rail_optimized: return "rail-optimized";
    case FabricKind::clos3: return "clos3";
    case FabricKind::custom: return "custom";
  }
  return "?";
}

std::string_view to_string(FabricRouting r) {
  switch (r) {
    case FabricRouting::static_paths: return "static";
    case FabricRouting::adaptive: return "adaptive";
    case FabricRouting::ecmp: return "ecmp";
  }
  return "?";
}

std::optional<FabricRouting> parse_fabric_routing(std::string_view s) {
  for (FabricRouting r : {FabricRouting::static_paths, FabricRouting::adaptive, FabricRouting::ecmp}) {
    if (to_string(r) == s) return r;
  }
  return std::nullopt;
}

std::optional<FabricKind> parse_fabric_kind(std::string_view s) {
  for (FabricKind k : {FabricKind::single_switch, FabricKind::fat_tree, FabricKind::rail_optimized,
                       FabricKind::clos3, FabricKind::custom}) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}

}  // namespace dtsim::hw
