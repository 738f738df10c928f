#include "workloads/graph_json.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "sim/file.hpp"

namespace dtsim::workloads {

using nlohmann::json;

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::compute: return "compute";
    case OpKind::comm: return "comm";
    case OpKind::recv_act: return "recv_act";
    case OpKind::recv_grad: return "recv_grad";
    case OpKind::send_act: return "send_act";
    case OpKind::send_grad: return "send_grad";
    case OpKind::grads_ready: return "grads_ready";
    case OpKind::gather_wait: return "gather_wait";
    case OpKind::end_backward: return "end_backward";
    case OpKind::transfer: return "transfer";
  }
  return "?";
}

namespace {

constexpr Transfer::Kind kAllTransferKinds[] = {Transfer::Kind::host,    Transfer::Kind::h2d,       Transfer::Kind::scatter,
                                                Transfer::Kind::gather,  Transfer::Kind::replicate, Transfer::Kind::reduce};

// Limits on what a graph file may hold, so that a hand-edited or foreign file cannot make the
// executor's clock overflow or its memory explode (docs/config.md, "Step graphs").
constexpr std::int64_t kMaxDurationPs = 10'000'000'000'000'000;  // 10^4 s per op
constexpr std::int64_t kMaxStagePs = 100'000'000'000'000'000;    // 10^5 s of fixed time per stage
constexpr int kMaxStream = 1023;                                 // streams of a stage's host-launched compute
constexpr double kMaxBytes = 1e15;                               // per message, and moved per stage
constexpr double kMaxParams = 2.8e14;                            // parameters: x 4 bytes stays below the planner's 2^50
constexpr double kMaxCount = 1e24;                               // FLOPs (bookkeeping only)
constexpr std::size_t kMaxBuckets = 16'384;                      // gradient buckets per stage
constexpr std::size_t kMaxOps = 20'000'000;                      // ops in the whole graph
constexpr int kMaxStages = 65'536;

}  // namespace

std::string_view to_string(Transfer::Kind k) {
  switch (k) {
    case Transfer::Kind::host: return "host";
    case Transfer::Kind::h2d: return "h2d";
    case Transfer::Kind::scatter: return "scatter";
    case Transfer::Kind::gather: return "gather";
    case Transfer::Kind::replicate: return "replicate";
    case Transfer::Kind::reduce: return "reduce";
  }
  return "?";
}

namespace {

json op_json(const GraphOp& op) {
  json j = {{"kind", to_string(op.kind)}, {"label", op.label}};
  switch (op.kind) {
    case OpKind::compute:
      j["duration_ps"] = op.duration.picoseconds();
      // Host-launched compute (a traced step) only: the analytical builders' graphs leave them out.
      if (op.host_gap > Time::zero()) j["host_gap_ps"] = op.host_gap.picoseconds();
      if (op.delay > Time::zero()) j["delay_ps"] = op.delay.picoseconds();
      if (op.stream != 0) j["stream"] = op.stream;
      break;
    case OpKind::comm:
      j["comm"] = op.a;
      if (op.overlapped) {
        j["overlapped"] = true;
        j["duration_ps"] = op.duration.picoseconds();
      }
      break;
    case OpKind::recv_act:
    case OpKind::recv_grad:
    case OpKind::send_act:
    case OpKind::send_grad:
      j["micro_batch"] = op.a;
      j["virtual_stage"] = op.b;
      break;
    case OpKind::grads_ready: j["slot"] = op.a; break;
    case OpKind::gather_wait: j["gather"] = op.a; break;
    case OpKind::end_backward: break;
    case OpKind::transfer: j["transfer"] = op.a; break;
  }
  return j;
}

json stage_json(const StageGraph& s) {
  json ops = json::array();
  for (const GraphOp& op : s.ops) ops.push_back(op_json(op));
  json comms = json::array();
  for (const CommStep& c : s.comms) comms.push_back({{"op", to_string(c.op)}, {"group", to_string(c.group)}, {"bytes", c.bytes.count()}});
  json slots = json::array();
  for (const LayerSlot& l : s.grad_slots) {
    json e = {{"params", l.params}, {"expert_params", l.expert_params}, {"tensors", l.tensors}};
    if (l.repeat) e["repeat"] = true;
    slots.push_back(std::move(e));
  }
  json buckets = json::array();
  for (const Bucket& b : s.buckets) buckets.push_back({{"params", b.params}, {"expert_params", b.expert_params}});
  json transfers = json::array();
  for (const Transfer& t : s.transfers) {
    transfers.push_back({{"kind", to_string(t.kind)}, {"bytes", t.bytes}, {"duration_ps", t.duration.picoseconds()}, {"name", t.name}});
  }
  return json{{"ops", std::move(ops)},
              {"comms", std::move(comms)},
              {"grad_slots", std::move(slots)},
              {"buckets", std::move(buckets)},
              {"slot_bucket", s.slot_bucket},
              {"gathers", s.gathers},
              {"transfers", std::move(transfers)},
              {"labels", s.labels},
              {"optimizer_ps", s.optimizer.picoseconds()},
              {"tied_grad_bytes", s.tied_grad_bytes},
              {"flops", s.flops},
              {"recompute_flops", s.recompute_flops},
              {"dense_params", s.dense_params},
              {"expert_params", s.expert_params},
              {"layers", s.layers},
              {"in_flight", s.in_flight},
              {"activation_bytes", s.activation_bytes},
              {"has_embedding", s.has_embedding},
              {"has_head", s.has_head}};
}

// Reads fields of a JSON document, naming the path of the first problem ("kinds[0].stages[1]...").
class Fields {
 public:
  explicit Fields(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  Fields at(std::string_view key) const { return Fields(path_.empty() ? std::string(key) : path_ + "." + std::string(key)); }
  Fields at(std::size_t i) const { return Fields(fmt::format("{}[{}]", path_, i)); }
  Error error(const std::string& message) const { return Error(message, path_); }

  // The member `key` of object `j` (an error when missing or null, unless optional).
  Expected<const json*> member(const json& j, std::string_view key, bool optional = false) const {
    if (!j.is_object()) return error("expected a JSON object");
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (optional) return static_cast<const json*>(nullptr);
      return at(key).error("missing");
    }
    return &*it;
  }

 private:
  std::string path_;
};

Expected<std::int64_t> as_int(const json& j, const Fields& f, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return f.error(fmt::format("{} is out of range [{}, {}]", u, lo, hi));
    v = static_cast<std::int64_t>(u);
  } else if (j.is_number_integer()) {
    v = j.get<std::int64_t>();
  } else {
    return f.error(fmt::format("expected an integer, got {}", j.type_name()));
  }
  if (v < lo || v > hi) return f.error(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  return v;
}

Expected<double> as_number(const json& j, const Fields& f, double hi) {
  if (!j.is_number()) return f.error(fmt::format("expected a number, got {}", j.type_name()));
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < 0 || v > hi) return f.error(fmt::format("{} is out of range [0, {:g}]", v, hi));
  return v;
}

template <class T>
Expected<T> field_int(const json& obj, const Fields& f, std::string_view key, std::int64_t lo, std::int64_t hi, std::optional<T> dflt = {}) {
  auto m = f.member(obj, key, dflt.has_value());
  if (!m) return m.error();
  if (!*m) return *dflt;
  auto v = as_int(**m, f.at(key), lo, hi);
  if (!v) return v.error();
  return static_cast<T>(*v);
}

Expected<double> field_number(const json& obj, const Fields& f, std::string_view key, double hi, bool optional = false) {
  auto m = f.member(obj, key, optional);
  if (!m) return m.error();
  if (!*m) return 0.0;
  return as_number(**m, f.at(key), hi);
}

Expected<bool> field_bool(const json& obj, const Fields& f, std::string_view key) {
  auto m = f.member(obj, key, true);
  if (!m) return m.error();
  if (!*m) return false;
  if (!(*m)->is_boolean()) return f.at(key).error(fmt::format("expected true or false, got {}", (*m)->type_name()));
  return (*m)->get<bool>();
}

Expected<std::string> field_string(const json& obj, const Fields& f, std::string_view key) {
  auto m = f.member(obj, key);
  if (!m) return m.error();
  if (!(*m)->is_string()) return f.at(key).error(fmt::format("expected a string, got {}", (*m)->type_name()));
  return (*m)->get<std::string>();
}

Expected<const json*> field_array(const json& obj, const Fields& f, std::string_view key, bool optional = false) {
  auto m = f.member(obj, key, optional);
  if (!m) return m.error();
  if (*m && !(*m)->is_array()) return f.at(key).error(fmt::format("expected an array, got {}", (*m)->type_name()));
  return *m;
}

template <class E, std::size_t N>
Expected<E> field_enum(const json& obj, const Fields& f, std::string_view key, const E (&all)[N]) {
  auto s = field_string(obj, f, key);
  if (!s) return s.error();
  std::string names;
  for (E e : all) {
    if (to_string(e) == *s) return e;
    names += (names.empty() ? "" : ", ") + std::string(to_string(e));
  }
  return f.at(key).error(fmt::format("unknown value '{}' (one of: {})", *s, names));
}

// Each array element through `read`, into `out`.
template <class T, class Read>
Status read_array(const json& obj, const Fields& f, std::string_view key, std::vector<T>& out, Read read, bool optional = false) {
  auto arr = field_array(obj, f, key, optional);
  if (!arr) return arr.error();
  if (!*arr) return {};
  const Fields af = f.at(key);
  out.reserve((*arr)->size());
  for (std::size_t i = 0; i < (*arr)->size(); ++i) {
    auto v = read((**arr)[i], af.at(i));
    if (!v) return v.error();
    out.push_back(std::move(*v));
  }
  return {};
}

// `lhs = *expr`, or return expr's error.
#define DTSIM_CAT2(a, b) a##b
#define DTSIM_CAT(a, b) DTSIM_CAT2(a, b)
#define DTSIM_TRY(lhs, expr)                                                    \
  auto DTSIM_CAT(try_, __LINE__) = (expr);                                      \
  if (!DTSIM_CAT(try_, __LINE__)) return DTSIM_CAT(try_, __LINE__).error();     \
  lhs = std::move(*DTSIM_CAT(try_, __LINE__))

Expected<GraphOp> read_op(const json& j, const Fields& f, const StageGraph& s, const StepGraph& g) {
  GraphOp op;
  DTSIM_TRY(op.kind, field_enum(j, f, "kind", kAllOpKinds));
  DTSIM_TRY(op.label, field_int<int>(j, f, "label", 0, static_cast<std::int64_t>(s.labels.size()) - 1, std::optional<int>(0)));
  const auto duration = [&]() -> Status {
    std::int64_t ps = 0;
    DTSIM_TRY(ps, field_int<std::int64_t>(j, f, "duration_ps", 0, kMaxDurationPs));
    op.duration = Time::ps(ps);
    return {};
  };
  const auto index = [&](std::string_view key, std::size_t n, std::string_view what) -> Status {
    if (n == 0) return f.at(key).error(fmt::format("no {} to refer to", what));
    DTSIM_TRY(op.a, field_int<int>(j, f, key, 0, static_cast<std::int64_t>(n) - 1));
    return {};
  };
  switch (op.kind) {
    case OpKind::compute: {
      if (auto st = duration(); !st) return st.error();
      std::int64_t gap = 0, delay = 0;
      DTSIM_TRY(gap, field_int<std::int64_t>(j, f, "host_gap_ps", 0, kMaxDurationPs, std::optional<std::int64_t>(0)));
      DTSIM_TRY(delay, field_int<std::int64_t>(j, f, "delay_ps", 0, kMaxDurationPs, std::optional<std::int64_t>(0)));
      DTSIM_TRY(op.stream, field_int<int>(j, f, "stream", 0, kMaxStream, std::optional<int>(0)));
      op.host_gap = Time::ps(gap);
      op.delay = Time::ps(delay);
      break;
    }
    case OpKind::comm: {
      if (auto st = index("comm", s.comms.size(), "comms"); !st) return st.error();
      DTSIM_TRY(op.overlapped, field_bool(j, f, "overlapped"));
      if (op.overlapped) {
        if (auto st = duration(); !st) return st.error();
      }
      break;
    }
    case OpKind::recv_act:
    case OpKind::recv_grad:
    case OpKind::send_act:
    case OpKind::send_grad: {
      DTSIM_TRY(op.a, field_int<int>(j, f, "micro_batch", 0, g.micro_batches - 1));
      // A send needs a virtual stage to send to: forward from all but the last, backward from all
      // but the first.
      const std::int64_t lo = op.kind == OpKind::send_grad ? 1 : 0;
      const std::int64_t hi = g.virtual_stages - (op.kind == OpKind::send_act ? 2 : 1);
      if (lo > hi) return f.at("kind").error(fmt::format("{} with {} virtual stage(s)", to_string(op.kind), g.virtual_stages));
      DTSIM_TRY(op.b, field_int<int>(j, f, "virtual_stage", lo, hi));
      break;
    }
    case OpKind::grads_ready:
      if (auto st = index("slot", s.grad_slots.size(), "gradient slots"); !st) return st.error();
      break;
    case OpKind::gather_wait:
      if (auto st = index("gather", s.gathers.size(), "gathers"); !st) return st.error();
      break;
    case OpKind::end_backward: break;
    case OpKind::transfer:
      if (auto st = index("transfer", s.transfers.size(), "transfers"); !st) return st.error();
      break;
  }
  return op;
}

Expected<StageGraph> read_stage(const json& j, const Fields& f, const StepGraph& g) {
  StageGraph s;
  if (!j.is_object()) return f.error("expected a JSON object (a pipeline stage)");
  // The tables ops refer to come first.
  s.labels.clear();
  auto st = read_array(j, f, "labels", s.labels, [](const json& e, const Fields& ef) -> Expected<std::string> {
    if (!e.is_string()) return ef.error(fmt::format("expected a string, got {}", e.type_name()));
    return e.get<std::string>();
  });
  if (!st) return st.error();
  if (s.labels.empty()) return f.at("labels").error("needs at least one label");
  st = read_array(j, f, "comms", s.comms, [](const json& e, const Fields& ef) -> Expected<CommStep> {
    CommStep c;
    DTSIM_TRY(c.op, field_enum(e, ef, "op", kAllCollOps));
    static constexpr CommGroup groups[] = {CommGroup::tp, CommGroup::cp, CommGroup::ep};
    DTSIM_TRY(c.group, field_enum(e, ef, "group", groups));
    std::int64_t bytes = 0;
    DTSIM_TRY(bytes, field_int<std::int64_t>(e, ef, "bytes", 0, static_cast<std::int64_t>(kMaxBytes)));
    c.bytes = Bytes(bytes);
    return c;
  });
  if (!st) return st.error();
  st = read_array(j, f, "grad_slots", s.grad_slots, [](const json& e, const Fields& ef) -> Expected<LayerSlot> {
    LayerSlot l;
    DTSIM_TRY(l.params, field_number(e, ef, "params", kMaxParams));
    DTSIM_TRY(l.expert_params, field_number(e, ef, "expert_params", kMaxParams, true));
    auto tst = read_array(e, ef, "tensors", l.tensors, [](const json& t, const Fields& tf) { return as_int(t, tf, 0, static_cast<std::int64_t>(kMaxParams)); }, true);
    if (!tst) return tst.error();
    DTSIM_TRY(l.repeat, field_bool(e, ef, "repeat"));
    return l;
  });
  if (!st) return st.error();
  st = read_array(j, f, "buckets", s.buckets, [](const json& e, const Fields& ef) -> Expected<Bucket> {
    Bucket b;
    DTSIM_TRY(b.params, field_number(e, ef, "params", kMaxParams));
    DTSIM_TRY(b.expert_params, field_number(e, ef, "expert_params", kMaxParams, true));
    return b;
  });
  if (!st) return st.error();
  if (s.buckets.size() > kMaxBuckets) return f.at("buckets").error(fmt::format("more than {} gradient buckets", kMaxBuckets));
  const auto nb = static_cast<std::int64_t>(s.buckets.size());
  st = read_array(j, f, "slot_bucket", s.slot_bucket, [nb](const json& e, const Fields& ef) -> Expected<int> {
    auto v = as_int(e, ef, -1, nb - 1);
    if (!v) return v.error();
    return static_cast<int>(*v);
  });
  if (!st) return st.error();
  if (s.slot_bucket.size() != s.grad_slots.size()) {
    return f.at("slot_bucket").error(fmt::format("has {} entries for {} gradient slots", s.slot_bucket.size(), s.grad_slots.size()));
  }
  st = read_array(j, f, "gathers", s.gathers, [](const json& e, const Fields& ef) { return as_number(e, ef, kMaxParams); });
  if (!st) return st.error();
  st = read_array(j, f, "transfers", s.transfers, [](const json& e, const Fields& ef) -> Expected<Transfer> {
    Transfer t;
    DTSIM_TRY(t.kind, field_enum(e, ef, "kind", kAllTransferKinds));
    DTSIM_TRY(t.bytes, field_number(e, ef, "bytes", kMaxBytes));
    std::int64_t ps = 0;
    DTSIM_TRY(ps, field_int<std::int64_t>(e, ef, "duration_ps", 0, kMaxDurationPs, std::optional<std::int64_t>(0)));
    t.duration = Time::ps(ps);
    DTSIM_TRY(t.name, field_string(e, ef, "name"));
    return t;
  });
  if (!st) return st.error();
  std::int64_t optimizer_ps = 0;
  DTSIM_TRY(optimizer_ps, field_int<std::int64_t>(j, f, "optimizer_ps", 0, kMaxDurationPs));
  s.optimizer = Time::ps(optimizer_ps);
  DTSIM_TRY(s.tied_grad_bytes, field_number(j, f, "tied_grad_bytes", kMaxBytes));
  DTSIM_TRY(s.flops, field_number(j, f, "flops", kMaxCount));
  DTSIM_TRY(s.recompute_flops, field_number(j, f, "recompute_flops", kMaxCount));
  DTSIM_TRY(s.dense_params, field_number(j, f, "dense_params", kMaxParams));
  DTSIM_TRY(s.expert_params, field_number(j, f, "expert_params", kMaxParams));
  DTSIM_TRY(s.layers, field_int<int>(j, f, "layers", 0, 1'000'000));
  DTSIM_TRY(s.in_flight, field_int<int>(j, f, "in_flight", 0, 1'000'000));
  DTSIM_TRY(s.activation_bytes, field_number(j, f, "activation_bytes", kMaxBytes));
  DTSIM_TRY(s.has_embedding, field_bool(j, f, "has_embedding"));
  DTSIM_TRY(s.has_head, field_bool(j, f, "has_head"));
  // The ops last, checked against the tables.
  st = read_array(j, f, "ops", s.ops, [&](const json& e, const Fields& ef) { return read_op(e, ef, s, g); });
  if (!st) return st.error();
  int ends = 0;
  // Fixed time (compute, host transfers per use, the optimizer) and bytes moved (collectives,
  // pipeline messages, transfers per use, buckets and gathers at 8 bytes a parameter) per stage,
  // checked as they add up so that neither can overflow the executor's clock.
  std::int64_t fixed = s.optimizer.picoseconds();
  double moved = 0;
  const auto too_long = [&] { return f.at("ops").error(fmt::format("more than {:g} s of compute and host time on one stage", kMaxStagePs * 1e-12)); };
  for (const GraphOp& op : s.ops) {
    ends += op.kind == OpKind::end_backward ? 1 : 0;
    std::int64_t t = op.duration.picoseconds() + op.host_gap.picoseconds() + op.delay.picoseconds();
    if (op.kind == OpKind::transfer) {
      t += s.transfers[static_cast<std::size_t>(op.a)].duration.picoseconds();
      moved += s.transfers[static_cast<std::size_t>(op.a)].bytes;
    }
    if (op.kind == OpKind::comm) moved += static_cast<double>(s.comms[static_cast<std::size_t>(op.a)].bytes.count());
    if (op.kind == OpKind::send_act || op.kind == OpKind::send_grad) moved += g.act_msg_bytes;
    if (t > kMaxStagePs - fixed) return too_long();  // each term is at most 3 x 10^4 s: no overflow
    fixed += t;
  }
  for (const Bucket& b : s.buckets) moved += 8.0 * (b.params + b.expert_params);
  for (double p : s.gathers) moved += 8.0 * p;
  moved += s.tied_grad_bytes;
  if (moved > kMaxBytes) return f.at("ops").error(fmt::format("more than {:g} bytes communicated by one stage", kMaxBytes));
  if (ends != 1) return f.at("ops").error(fmt::format("needs exactly one end_backward op (the step's end of backward), found {}", ends));
  return s;
}

}  // namespace

json graph_to_json(const StepGraph& g) {
  json kinds = json::array();
  for (std::size_t k = 0; k < g.kinds.size(); ++k) {
    json stages = json::array();
    for (const StageGraph& s : g.kinds[k]) stages.push_back(stage_json(s));
    kinds.push_back({{"gpu", k < g.gpu_kinds.size() ? g.gpu_kinds[k] : std::string()}, {"stages", std::move(stages)}});
  }
  return json{{"format", kGraphFormat}, {"version", kGraphVersion},         {"stages", g.stages},
              {"virtual_stages", g.virtual_stages}, {"micro_batches", g.micro_batches}, {"act_msg_bytes", g.act_msg_bytes},
              {"kinds", std::move(kinds)}};
}

Expected<StepGraph> graph_from_json(const json& j) {
  const Fields root("");
  if (!j.is_object()) return Error(fmt::format("expected a JSON object (a dtsim step graph), got {}", j.type_name()));
  std::string format;
  DTSIM_TRY(format, field_string(j, root, "format"));
  if (format != kGraphFormat) return root.at("format").error(fmt::format("'{}' is not a dtsim step graph (expected '{}')", format, kGraphFormat));
  int version = 0;
  DTSIM_TRY(version, field_int<int>(j, root, "version", 0, 1'000'000));
  if (version != kGraphVersion) return root.at("version").error(fmt::format("version {} is not supported (this dtsim reads version {})", version, kGraphVersion));
  StepGraph g;
  DTSIM_TRY(g.stages, field_int<int>(j, root, "stages", 1, kMaxStages));
  DTSIM_TRY(g.virtual_stages, field_int<int>(j, root, "virtual_stages", 1, kMaxStages));
  if (g.virtual_stages % g.stages != 0) {
    return root.at("virtual_stages").error(fmt::format("{} is not a multiple of the {} stages", g.virtual_stages, g.stages));
  }
  DTSIM_TRY(g.micro_batches, field_int<int>(j, root, "micro_batches", 1, 65'536));
  DTSIM_TRY(g.act_msg_bytes, field_number(j, root, "act_msg_bytes", kMaxBytes));
  const json* kinds = nullptr;
  DTSIM_TRY(kinds, field_array(j, root, "kinds"));
  if (kinds->empty()) return root.at("kinds").error("needs at least one GPU kind");
  std::size_t ops = 0;
  for (std::size_t k = 0; k < kinds->size(); ++k) {
    const Fields kf = root.at("kinds").at(k);
    std::string gpu;
    DTSIM_TRY(gpu, field_string((*kinds)[k], kf, "gpu"));
    const json* stages = nullptr;
    DTSIM_TRY(stages, field_array((*kinds)[k], kf, "stages"));
    if (stages->size() != static_cast<std::size_t>(g.stages)) {
      return kf.at("stages").error(fmt::format("has {} stage graphs for {} pipeline stages", stages->size(), g.stages));
    }
    std::vector<StageGraph> graphs;
    for (std::size_t s = 0; s < stages->size(); ++s) {
      // The op budget before reading a stage's ops (the document is parsed whole before this).
      if (const auto it = (*stages)[s].find("ops"); (*stages)[s].is_object() && it != (*stages)[s].end() && it->is_array()) ops += it->size();
      if (ops > kMaxOps) return kf.at("stages").at(s).at("ops").error(fmt::format("more than {} ops in the graph", kMaxOps));
      auto sg = read_stage((*stages)[s], kf.at("stages").at(s), g);
      if (!sg) return sg.error();
      graphs.push_back(std::move(*sg));
    }
    // Stages wait for each other through the pipeline: the fixed time of all of them together
    // bounds the step (each stage's own sum was checked on reading it).
    std::int64_t total = 0;
    for (const StageGraph& sg : graphs) {
      std::int64_t t = sg.optimizer.picoseconds();
      for (const GraphOp& op : sg.ops) {
        t += op.duration.picoseconds() + op.host_gap.picoseconds() + op.delay.picoseconds() + (op.kind == OpKind::transfer ? sg.transfers[static_cast<std::size_t>(op.a)].duration.picoseconds() : 0);
      }
      if (t > kMaxStagePs - total) return kf.at("stages").error(fmt::format("more than {:g} s of compute and host time over all stages", kMaxStagePs * 1e-12));
      total += t;
    }
    g.gpu_kinds.push_back(std::move(gpu));
    g.kinds.push_back(std::move(graphs));
  }
  return g;
}

#undef DTSIM_TRY
#undef DTSIM_CAT
#undef DTSIM_CAT2

Status write_graph_file(const std::string& path, const StepGraph& g) { return write_file_atomic(path, graph_to_json(g).dump() + "\n"); }

Expected<StepGraph> read_graph_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("{}: cannot open the step graph file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    return Error(fmt::format("{}: malformed JSON at byte {}: {}", path, e.byte > 0 ? e.byte - 1 : 0, what));
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    return Error(fmt::format("{}: unusable JSON: {}", path, what));
  }
  auto g = graph_from_json(doc);
  if (!g) {
    const Error& e = g.error();
    return Error(fmt::format("{}: {}{}", path, e.field.empty() ? "" : e.field + ": ", e.message));
  }
  return g;
}

Status check_graph_shape(const StepGraph& given, const StepGraph& built) {
  const auto differ = [](std::string_view what, auto a, auto b) {
    return Error(fmt::format("the graph has {} {} where the configuration has {}", a, what, b), "graph");
  };
  if (given.stages != built.stages) return differ("pipeline stages", given.stages, built.stages);
  if (given.virtual_stages != built.virtual_stages) return differ("virtual stages", given.virtual_stages, built.virtual_stages);
  if (given.micro_batches != built.micro_batches) return differ("micro-batches", given.micro_batches, built.micro_batches);
  if (given.gpu_kinds != built.gpu_kinds) {
    return Error(fmt::format("the graph is for GPU kinds [{}] where the cluster has [{}]", fmt::join(given.gpu_kinds, ", "),
                             fmt::join(built.gpu_kinds, ", ")),
                 "graph");
  }
  return {};
}

}  // namespace dtsim::workloads
