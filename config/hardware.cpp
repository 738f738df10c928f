#include "config/hardware.hpp"

#include <fmt/format.h>

#include "config/presets.hpp"

namespace dtsim::config {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::optional<hw::LinkKind> parse_link_kind(const std::string& s) {
  for (auto k : {hw::LinkKind::nvlink, hw::LinkKind::pcie, hw::LinkKind::cpu, hw::LinkKind::net}) {
    if (hw::to_string(k) == s) return k;
  }
  return std::nullopt;
}

}  // namespace

// GPUs the topology builds: every GPU of every node, with its PCIe tree and NICs, also those that
// gpus_per_node leaves unused (a million single-GPU DGX nodes build eight million NICs: found by
// the issue-15 mutation run, 5 GB before the fabric refused them).
static long long built_gpus(const std::vector<hw::NodeGroup>& groups) {
  long long gpus = 0;
  for (const auto& g : groups) gpus += static_cast<long long>(g.count) * std::max(g.gpus_per_node, g.node.gpus);
  return gpus;
}

bool looks_like_path(const std::string& s) {
  auto ends_with = [&](std::string_view suf) { return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0; };
  return s.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}

std::optional<std::pair<YAML::Node, std::string>> HardwareLoader::resolve(const std::string& kind, const std::string& ref,
                                                                          const Location& where, const std::string& field) {
  if (looks_like_path(ref)) {
    auto doc = load_yaml_file(ref, ctx_);
    if (!doc) return std::nullopt;
    return std::make_pair(*doc, ref);
  }
  const PresetFile* p = find_preset(kind, ref);
  if (p == nullptr) {
    const auto names = preset_names(kind);
    const std::string hint = closest(ref, names);
    std::string singular = kind.substr(0, kind.size() - 1);
    ctx_.diagnostics.error(where, field,
                           fmt::format("unknown {} preset '{}'{} (known: {})", singular, ref,
                                       hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), join(names)));
    return std::nullopt;
  }
  auto doc = parse_yaml(std::string(p->text), std::string(p->path), ctx_);
  if (!doc) return std::nullopt;
  return std::make_pair(*doc, std::string(p->path));
}

bool HardwareLoader::load_links() {
  if (links_loaded_) return !links_.empty();
  links_loaded_ = true;
  const PresetFile* p = find_preset_file("links");
  DTSIM_ASSERT(p != nullptr, "presets/links.yaml is not embedded");
  LoadContext local;
  auto doc = parse_yaml(std::string(p->text), std::string(p->path), local);
  if (!doc || !doc->IsMap()) {
    ctx_.diagnostics.error(Location{std::string(p->path), 0, 0}, "", "the link table is not a mapping");
    return false;
  }
  for (auto it = doc->begin(); it != doc->end(); ++it) {
    const std::string name = it->first.as<std::string>("");
    if (it->second.IsScalar()) {
      aliases_[name] = it->second.Scalar();
      continue;
    }
    MapReader r(it->second, name, std::string(p->path), ctx_);
    if (auto lt = link_from(r, name)) links_[name] = *lt;
  }
  return true;
}

std::optional<hw::LinkType> HardwareLoader::link_from(MapReader& r, const std::string& name) {
  hw::LinkType lt;
  lt.name = name;
  bool ok = true;
  if (auto k = r.string("kind", true)) {
    if (auto kind = parse_link_kind(*k)) lt.kind = *kind;
    else {
      r.error("kind", fmt::format("unknown link kind '{}' (use nvlink, pcie, cpu or net)", *k));
      ok = false;
    }
  } else {
    ok = false;
  }
  if (auto b = r.bandwidth("bandwidth", true)) lt.bandwidth = *b; else ok = false;
  if (auto t = r.time("latency", true)) lt.latency = *t; else ok = false;
  if (auto t = r.time("switch_latency")) lt.switch_latency = *t;
  if (r.has("efficiency")) {
    if (auto e = r.number("efficiency", false, 1e-3, 1.0)) lt.efficiency = *e; else ok = false;
  }
  if (auto a = r.boolean("adaptive_routing")) {
    if (*a && lt.kind != hw::LinkKind::net) {
      r.error("adaptive_routing", "applies to NIC (kind: net) link types, whose fabrics it routes");
      ok = false;
    }
    lt.adaptive_routing = *a;
  }
  r.finish();
  if (!ok) return std::nullopt;
  return lt;
}

std::optional<hw::LinkType> HardwareLoader::link_type(MapReader& r, const std::string& key, bool required) {
  YAML::Node n = r.node(key);
  if (!n.IsDefined() || n.IsNull()) {
    if (required) r.error(key, "is required (a link type such as nvlink4, pcie5-x16, ib-ndr)");
    return std::nullopt;
  }
  if (n.IsMap()) {
    MapReader sub(n, r.field(key), r.file(), ctx_);
    return link_from(sub, r.field(key));
  }
  if (!n.IsScalar()) {
    r.error(key, "expected a link type name or a {kind, bandwidth, latency} mapping");
    return std::nullopt;
  }
  if (!load_links()) return std::nullopt;
  std::string name = n.Scalar();
  if (auto a = aliases_.find(name); a != aliases_.end()) name = a->second;
  const auto it = links_.find(name);
  if (it == links_.end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : links_) names.push_back(k);
    for (const auto& [k, v] : aliases_) names.push_back(k);
    const std::string hint = closest(n.Scalar(), names);
    std::string known;
    for (const auto& [k, v] : links_) known += (known.empty() ? "" : ", ") + k;
    r.error(key, fmt::format("unknown link type '{}'{}; the link types are: {} (or a {{kind, bandwidth, latency}} mapping)", n.Scalar(),
                             hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), known));
    return std::nullopt;
  }
  return it->second;
}

std::optional<hw::GpuSpec> HardwareLoader::gpu_from(MapReader& r) {
  hw::GpuSpec g;
  const std::size_t errors = ctx_.diagnostics.size();
  g.name = r.string("name", true).value_or("");
  g.display_name = r.string("display_name").value_or(g.name);
  g.architecture = r.string("architecture").value_or("");
  g.compute_capability = r.string("compute_capability").value_or("");
  if (auto peak = r.map("peak", true)) {
    bool any = false;  // a rate refused below is not also "no dtype"
    for (hw::DType d : hw::kAllDTypes) {
      const std::string key(hw::to_string(d));
      any = any || peak->has(key);
      if (auto rate = peak->flop_rate(key)) {
        // Below 1 GFLOP/s (the slowest preset, M40 fp64, has 0.2 TFLOP/s) a step's compute times
        // overflow simulated time (int64 picoseconds, 106 days): found by the issue-15 mutation
        // run (fp32: 1e-9 TFLOP/s ended in the simulator's "event in the past" assertion).
        if (rate->flops_per_s() < 1e9) peak->error(key, "below 1 GFLOP/s is not a GPU's peak rate (dtsim's time would overflow)");
        else g.peak[d] = *rate;
      }
    }
    if (!any) peak->error_here("needs at least one dtype (fp64, fp32, tf32, bf16, fp16, fp8)");
    peak->finish();
  }
  if (auto mem = r.map("memory", true)) {
    if (auto c = mem->bytes("capacity", true)) {
      if (c->count() <= 0) mem->error("capacity", "must be positive");
      g.memory = *c;
    }
    if (auto b = mem->bandwidth("bandwidth", true)) {
      if (b->bytes_per_s() < 1e9) mem->error("bandwidth", "below 1 GB/s is not a GPU's memory bandwidth (dtsim's time would overflow)");
      g.memory_bandwidth = *b;
    }
    g.memory_kind = mem->string("kind").value_or("");
    mem->finish();
  }
  g.sms = static_cast<int>(r.integer("sms", true, 1, 100000).value_or(0));
  if (auto hz = r.frequency("sm_clock", 1e8, 1e10, "a GPU's SM clock (100 MHz to 10 GHz)")) g.sm_clock_hz = *hz;
  if (auto l2 = r.bytes("l2")) g.l2 = *l2;
  if (auto nv = r.map("nvlink")) {
    g.nvlink_generation = static_cast<int>(nv->integer("generation", false, 0, 10).value_or(0));
    g.nvlink_links = static_cast<int>(nv->integer("links", false, 0, 64).value_or(0));
    nv->finish();
  }
  if (auto pc = r.map("pcie")) {
    g.pcie_generation = static_cast<int>(pc->integer("generation", false, 1, 10).value_or(0));
    pc->finish();
  }
  if (auto w = r.power("tdp", 1, 1e4, "a GPU's power (1 W to 10 kW)")) g.tdp_watts = *w;
  r.finish();
  if (ctx_.diagnostics.size() != errors) return std::nullopt;
  return g;
}

std::optional<MapReader> HardwareLoader::reference(MapReader& r, const std::string& key, const std::string& kind,
                                                   const std::string& example) {
  YAML::Node n = r.node(key);
  if (!n.IsDefined() || n.IsNull()) {
    r.error(key, fmt::format("is required (a {} preset such as {}, or a mapping)", kind, example));
    return std::nullopt;
  }
  if (n.IsMap()) return MapReader(n, r.field(key), r.file(), ctx_);
  if (!n.IsScalar()) {
    r.error(key, fmt::format("expected a {} preset name, a file, or a mapping", kind));
    return std::nullopt;
  }
  auto doc = resolve(kind + "s", resolve_path(n.Scalar(), r.file()), r.location(key), r.field(key));
  if (!doc) return std::nullopt;
  return MapReader(doc->first, r.field(key), doc->second, ctx_);
}

std::optional<hw::GpuSpec> HardwareLoader::gpu(MapReader& r, const std::string& key) {
  auto sub = reference(r, key, "gpu", "h100-sxm");
  if (!sub) return std::nullopt;
  return gpu_from(*sub);
}

std::optional<hw::FabricSpec> HardwareLoader::fabric(MapReader& r, hw::FabricSpec f) {
  const std::size_t errors = ctx_.diagnostics.size();
  if (auto k = r.string("kind")) {
    if (auto kind = hw::parse_fabric_kind(*k)) f.kind = *kind;
    else r.error("kind", fmt::format("unknown fabric kind '{}' (use single-switch, fat-tree, rail-optimized, clos3 or custom)", *k));
  }
  if (r.has("nic")) f.nic = link_type(r, "nic", false);
  else r.node("nic");
  if (r.has("link")) f.link = link_type(r, "link", false);
  else r.node("link");
  if (auto n = r.integer("nics_per_node", false, 1, 64)) f.nics_per_node = static_cast<int>(*n);
  if (auto n = r.integer("radix", false, 2, 4096)) f.radix = static_cast<int>(*n);
  if (auto o = r.number("oversubscription", false, 1.0, 64.0)) f.oversubscription = *o;
  if (auto t = r.time("switch_latency")) f.switch_latency = *t;
  if (auto rt = r.string("routing")) {
    if (auto routing = hw::parse_fabric_routing(*rt)) f.routing = *routing;
    else r.error("routing", fmt::format("unknown routing '{}' (use adaptive, static or ecmp)", *rt));
  }
  YAML::Node sw = r.node("switches");
  if (sw.IsDefined() && !sw.IsNull()) {
    if (!sw.IsSequence()) r.error("switches", "expected a list of switch names");
    else {
      f.switches.clear();
      for (const auto& s : sw) f.switches.push_back(s.as<std::string>(""));
    }
  }
  YAML::Node links = r.node("links");
  if (links.IsDefined() && !links.IsNull()) {
    f.links.clear();
    if (!links.IsSequence()) r.error("links", "expected a list of [switch, switch] or [switch, switch, count]");
    for (std::size_t i = 0; links.IsSequence() && i < links.size(); ++i) {
      const YAML::Node l = links[i];
      const std::string field = fmt::format("{}[{}]", r.field("links"), i);
      ctx_.sources.add(field, location_of(l, r.file()));
      if (!l.IsSequence() || l.size() < 2 || l.size() > 3) {
        ctx_.diagnostics.error(location_of(l, r.file()), field, "expected [switch, switch] or [switch, switch, count]");
        continue;
      }
      hw::CustomLink cl{l[0].as<std::string>(""), l[1].as<std::string>(""), 1};
      if (l.size() == 3) {
        try {
          cl.count = l[2].as<int>();
        } catch (...) {
          cl.count = 0;
        }
        if (cl.count < 1 || cl.count > kMaxCustomLinkCount) {
          ctx_.diagnostics.error(location_of(l[2], r.file()), field,
                                 fmt::format("the link count must be a whole number from 1 to {}", kMaxCustomLinkCount));
        }
      }
      f.links.push_back(cl);
    }
  }
  YAML::Node attach = r.node("attach");
  if (attach.IsDefined() && !attach.IsNull()) {
    f.attach.clear();
    if (!attach.IsSequence()) r.error("attach", "expected a list of {nodes: \"0-3\", switch: name}");
    for (std::size_t i = 0; attach.IsSequence() && i < attach.size(); ++i) {
      MapReader a(attach[i], fmt::format("{}[{}]", r.field("attach"), i), r.file(), ctx_);
      hw::CustomAttach ca;
      if (auto nodes = a.string("nodes", true)) {
        const auto dash = nodes->find('-');
        try {
          ca.first_node = std::stoi(nodes->substr(0, dash));
          ca.last_node = dash == std::string::npos ? ca.first_node : std::stoi(nodes->substr(dash + 1));
        } catch (...) {
          a.error("nodes", fmt::format("'{}' is not a node number or range such as \"0-3\"", *nodes));
        }
      }
      ca.switch_name = a.string("switch", true).value_or("");
      a.finish();
      f.attach.push_back(ca);
    }
  }
  r.finish();
  if (ctx_.diagnostics.size() != errors) return std::nullopt;
  return f;
}

std::optional<hw::NodeSpec> HardwareLoader::node_from(MapReader& r) {
  hw::NodeSpec n;
  const std::size_t errors = ctx_.diagnostics.size();
  n.name = r.string("name", true).value_or("");
  n.description = r.string("description").value_or(n.name);
  if (auto g = gpu(r, "gpu")) n.gpu = *g;
  n.gpus = static_cast<int>(r.integer("gpus", true, 1, 1024).value_or(0));
  n.cpus = static_cast<int>(r.integer("cpus", false, 1, 16).value_or(1));
  if (auto v = r.string("cpu_vendor")) {
    if (auto vendor = hw::parse_cpu_vendor(*v)) n.cpu_vendor = *vendor;
    else r.error("cpu_vendor", fmt::format("unknown CPU vendor '{}' (use intel, amd or other)", *v));
  }
  if (r.has("cpu_interconnect")) n.cpu_link = link_type(r, "cpu_interconnect", false);
  else r.node("cpu_interconnect");
  // Refused here, in the node's own file, rather than when the topology is built (where the error
  // named only the configuration that used the node: found by the issue-15 mutation run).
  if (n.cpus > 1 && !r.has("cpu_interconnect")) {
    r.error("cpus", fmt::format("{} CPU sockets need a cpu_interconnect link between them (e.g. upi-sapphire-rapids)", n.cpus));
  }
  if (auto nv = r.map("nvlink")) {
    const std::string topo = nv->string("topology").value_or("none");
    if (topo == "nvswitch") n.nvlink_topology = hw::NvlinkTopology::nvswitch;
    else if (topo == "mesh") n.nvlink_topology = hw::NvlinkTopology::mesh;
    else if (topo == "none") n.nvlink_topology = hw::NvlinkTopology::none;
    else nv->error("topology", fmt::format("unknown NVLink topology '{}' (use nvswitch, mesh or none)", topo));
    if (nv->has("link")) n.nvlink = link_type(*nv, "link", false);
    else nv->node("link");
    n.nvlink_links_per_gpu = static_cast<int>(nv->integer("links_per_gpu", false, 1, 64).value_or(0));
    n.nvls = nv->boolean("sharp").value_or(false);
    YAML::Node pairs = nv->node("pairs");
    if (pairs.IsDefined() && !pairs.IsNull()) {
      if (!pairs.IsSequence()) nv->error("pairs", "expected a list of [gpu, gpu, links]");
      for (std::size_t i = 0; pairs.IsSequence() && i < pairs.size(); ++i) {
        const YAML::Node p = pairs[i];
        const std::string field = fmt::format("{}[{}]", nv->field("pairs"), i);
        ctx_.sources.add(field, location_of(p, r.file()));
        try {
          if (!p.IsSequence() || p.size() < 2 || p.size() > 3) throw std::runtime_error("shape");
          n.nvlink_mesh.push_back(hw::NvlinkPair{p[0].as<int>(), p[1].as<int>(), p.size() == 3 ? p[2].as<int>() : 1});
        } catch (...) {
          ctx_.diagnostics.error(location_of(p, r.file()), field, "expected [gpu, gpu] or [gpu, gpu, links] with whole numbers");
        }
      }
    }
    nv->finish();
  }
  if (auto pc = r.map("pcie", true)) {
    if (auto lt = link_type(*pc, "link", true)) n.pcie = *lt;
    n.pcie_p2p = pc->boolean("p2p").value_or(true);
    YAML::Node sw = pc->node("switches");
    if (!sw.IsDefined() || !sw.IsSequence()) {
      pc->error("switches", "is required: a list of {cpu, gpus, nics} (add direct: true for CPU root ports)");
    } else {
      for (std::size_t i = 0; i < sw.size(); ++i) {
        MapReader s(sw[i], fmt::format("{}[{}]", pc->field("switches"), i), r.file(), ctx_);
        hw::PcieGroup grp;
        grp.cpu = static_cast<int>(s.integer("cpu", false, 0, 15).value_or(0));
        grp.direct = s.boolean("direct").value_or(false);
        for (auto v : s.int_list("gpus", false, 0, 1023).value_or(std::vector<std::int64_t>{})) grp.gpus.push_back(static_cast<int>(v));
        for (auto v : s.int_list("nics", false, 0, 63).value_or(std::vector<std::int64_t>{})) grp.nics.push_back(static_cast<int>(v));
        s.finish();
        n.pcie_groups.push_back(grp);
      }
    }
    pc->finish();
  }
  if (auto nics = r.map("nics")) {
    if (nics->has("link")) n.nic = link_type(*nics, "link", false);
    else nics->node("link");
    n.nics = static_cast<int>(nics->integer("count", false, 0, 64).value_or(0));
    n.gpudirect_rdma = nics->boolean("gpudirect_rdma").value_or(true);
    nics->finish();
  }
  if (auto rf = r.map("reference_fabric")) n.reference_fabric = fabric(*rf, hw::FabricSpec{});
  r.finish();
  if (ctx_.diagnostics.size() != errors) return std::nullopt;
  return n;
}

std::optional<hw::NodeSpec> HardwareLoader::node(MapReader& r, const std::string& key) {
  auto sub = reference(r, key, "node", "dgx-h100");
  if (!sub) return std::nullopt;
  return node_from(*sub);
}

std::optional<hw::ClusterSpec> HardwareLoader::cluster(MapReader& r) {
  hw::ClusterSpec c;
  const std::size_t errors = ctx_.diagnostics.size();
  c.name = r.string("name").value_or("");
  c.description = r.string("description").value_or("");
  YAML::Node nodes = r.node("nodes");
  if (nodes.IsDefined() && nodes.IsSequence()) {
    // Heterogeneous: nodes: [{node, count, gpus_per_node}, ...]
    bool all_maps = nodes.size() > 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) all_maps = all_maps && nodes[i].IsMap();
    if (r.has("node")) {
      r.node("node");  // the one error below names both keys
      if (all_maps) {
        r.error("node", "give either node + nodes: N, or a list under nodes, not both");
      } else {
        r.error("nodes", "with node: give the number of nodes as a number (nodes: 2); a list under nodes is for clusters of several "
                         "node kinds (nodes: [{node: dgx-h100, count: 2}, {node: dgx-a100, count: 2}])");
      }
    } else if (nodes.size() == 0) {
      r.error("nodes", "the list of nodes is empty: give node: KIND with nodes: N, or a list such as [{node: dgx-h100, count: 2}]");
    }
    for (std::size_t i = 0; i < nodes.size() && !r.has("node"); ++i) {
      MapReader g(nodes[i], fmt::format("{}[{}]", r.field("nodes"), i), r.file(), ctx_);
      hw::NodeGroup grp;
      if (auto ns = node(g, "node")) grp.node = *ns;
      grp.count = static_cast<int>(g.integer("count", false, 1, 1'000'000).value_or(1));
      grp.gpus_per_node = static_cast<int>(g.integer("gpus_per_node", false, 1, 1024).value_or(0));
      g.finish();
      c.groups.push_back(grp);
    }
  } else {
    hw::NodeGroup grp;
    if (auto ns = node(r, "node")) grp.node = *ns;
    grp.count = static_cast<int>(r.integer("nodes", false, 1, 1'000'000).value_or(1));
    grp.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", false, 1, 1024).value_or(0));
    c.groups.push_back(grp);
  }
  hw::FabricSpec base;
  if (!c.groups.empty() && c.groups.front().node.reference_fabric) base = *c.groups.front().node.reference_fabric;
  if (auto f = r.map("fabric")) {
    if (auto fs = fabric(*f, base)) c.fabric = *fs;
    // A NIC kind given without its count keeps the node's count, which belongs to the node's own
    // NICs (8 ConnectX-7 on a DGX H100): say so, as it decides the data-parallel bandwidth.
    if (f->has("nic") && !f->has("nics_per_node") && c.fabric.nic && !c.groups.empty()) {
      const hw::NodeSpec& ns = c.groups.front().node;
      const int count = c.fabric.nics_per_node > 0 ? c.fabric.nics_per_node : ns.nics;
      if (!ns.nic || ns.nic->name != c.fabric.nic->name) {
        ctx_.notes.push_back(fmt::format("{}: '{}' replaces the NICs of node '{}' but nics_per_node is not given, so the node's count "
                                         "is inherited: {} x {} per node; set {} if the nodes have fewer",
                                         f->field("nic"), c.fabric.nic->name, ns.name, count, c.fabric.nic->name, f->field("nics_per_node")));
      }
    }
  } else {
    const bool single_node = c.groups.size() == 1 && c.groups.front().count == 1;
    if (c.groups.empty()) {
      // an empty or misplaced node list, reported above
    } else if (c.groups.size() > 1) r.error_here("a cluster with several node kinds needs a fabric: mapping");
    else if (!single_node && c.groups.front().node.reference_fabric == std::nullopt && !c.groups.front().node.name.empty()) {
      r.error_here(fmt::format("node '{}' has no reference_fabric; give a fabric: mapping", c.groups.front().node.name));
    }
    c.fabric = base;
    // Errors about the fabric then point at the node's reference_fabric.
    if (!c.groups.empty()) ctx_.sources.add("fabric", ctx_.sources.find(r.field("node") + ".reference_fabric"));
  }
  // Refused here, naming the limit, rather than by the memory the topology would take (about
  // 1.2 kB a GPU: 1.25 GB for a million, measured with dtsim simulate).
  if (const long long gpus = built_gpus(c.groups); gpus > kMaxClusterGpus) {
    r.error("nodes", fmt::format("{} GPUs in all is beyond the {} GPUs a cluster may have", gpus, kMaxClusterGpus));
  }
  r.finish();
  if (c.name.empty() && !c.groups.empty()) c.name = c.groups.front().node.name;
  if (ctx_.diagnostics.size() != errors) return std::nullopt;
  return c;
}

std::optional<hw::ClusterSpec> load_cluster(const ClusterRequest& req, LoadContext& ctx) {
  return load_cluster(req, ctx, Location{"--cluster", 0, 0});
}

std::optional<hw::ClusterSpec> load_cluster(const ClusterRequest& req, LoadContext& ctx, const Location& where) {
  HardwareLoader hl(ctx);
  std::optional<hw::ClusterSpec> spec;
  const std::size_t errors = ctx.diagnostics.size();
  if (!looks_like_path(req.name_or_path) && find_preset("clusters", req.name_or_path) == nullptr &&
      find_preset("nodes", req.name_or_path) != nullptr) {
    // A node preset: N of them on the node's reference fabric.
    YAML::Node doc(YAML::NodeType::Map);
    doc["node"] = req.name_or_path;
    MapReader r(doc, "", where.file, ctx);
    spec = hl.cluster(r);
  } else {
    const bool is_file = looks_like_path(req.name_or_path);
    if (!is_file && find_preset("clusters", req.name_or_path) == nullptr) {
      auto names = preset_names("clusters");
      const auto nodes = preset_names("nodes");
      names.insert(names.end(), nodes.begin(), nodes.end());
      const std::string hint = closest(req.name_or_path, names);
      ctx.diagnostics.error(where, "cluster",
                            fmt::format("unknown cluster or node preset '{}'{} (known: {}; or give a path to a YAML file)",
                                        req.name_or_path, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), join(names)));
      return std::nullopt;
    }
    auto doc = hl.resolve("clusters", req.name_or_path, where, "cluster");
    if (!doc) return std::nullopt;
    MapReader r(doc->first, "", doc->second, ctx);
    spec = hl.cluster(r);
  }
  if (!spec || ctx.diagnostics.size() != errors) return std::nullopt;
  if (req.nodes) {
    if (spec->groups.size() != 1) {
      ctx.diagnostics.error(Location{"--nodes", 0, 0}, "nodes", "--nodes applies to clusters of one node kind only");
      return std::nullopt;
    }
    spec->groups.front().count = *req.nodes;
  }
  if (req.gpus_per_node) {
    for (auto& g : spec->groups) g.gpus_per_node = *req.gpus_per_node;
  }
  if (req.nodes || req.gpus_per_node) {
    if (const long long gpus = built_gpus(spec->groups); gpus > kMaxClusterGpus) {
      ctx.diagnostics.error(Location{req.nodes ? "--nodes" : "--gpus-per-node", 0, 0}, req.nodes ? "nodes" : "gpus_per_node",
                            fmt::format("{} GPUs in all is beyond the {} GPUs a cluster may have", gpus, kMaxClusterGpus));
      return std::nullopt;
    }
  }
  return spec;
}

}  // namespace dtsim::config
