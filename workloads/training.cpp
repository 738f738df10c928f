#include "workloads/training.hpp"

namespace dtsim::workloads {

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}
std::string_view to_string(Optimizer o) { return o == Optimizer::adam ? "adam" : "sgd"; }
std::string_view to_string(Attention a) {
  switch (a) {
    case Attention::flash: return "flash";
    case Attention::flash1: return "flash1";
    case Attention::standard: return "standard";
  }
  return "?";
}
std::string_view to_string(Framework f) {
  switch (f) {
    case Framework::megatron: return "megatron";
    case Framework::pytorch_eager: return "pytorch-eager";
    case Framework::torch_compile: return "torch-compile";
  }
  return "?";
}
std::string_view to_string(DpImpl d) {
  switch (d) {
    case DpImpl::ddp: return "ddp";
    case DpImpl::horovod: return "horovod";
    case DpImpl::no_overlap: return "no-overlap";
    case DpImpl::mirrored: return "mirrored";
    case DpImpl::dataparallel: return "dataparallel";
    case DpImpl::parameter_server: return "parameter-server";
  }
  return "?";
}

std::string_view to_string(CpComm c) {
  switch (c) {
    case CpComm::p2p: return "p2p";
    case CpComm::allgather: return "allgather";
    case CpComm::a2a: return "a2a";
  }
  return "?";
}

std::optional<Recompute> parse_recompute(std::string_view s) {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    if (to_string(r) == s) return r;
  }
  return std::nullopt;
}
std::optional<Optimizer> parse_optimizer(std::string_view s) {
  if (s == "adam" || s == "adamw") return Optimizer::adam;
  if (s == "sgd" || s == "sgd-momentum") return Optimizer::sgd_momentum;
  return std::nullopt;
}
std::optional<Attention> parse_attention(std::string_view s) {
  if (s == "flash") return Attention::flash;
  if (s == "flash1") return Attention::flash1;
  if (s == "standard") return Attention::standard;
  return std::nullopt;
}
std::optional<Framework> parse_framework(std::string_view s) {
  for (Framework f : {Framework::megatron, Framework::pytorch_eager, Framework::torch_compile}) {
    if (to_string(f) == s) return f;
  }
  return std::nullopt;
}
std::optional<DpImpl> parse_dp_impl(std::string_view s) {
  for (DpImpl d : {DpImpl::ddp, DpImpl::horovod, DpImpl::no_overlap, DpImpl::mirrored, DpImpl::dataparallel, DpImpl::parameter_server}) {
    if (to_string(d) == s) return d;
  }
  return std::nullopt;
}

std::string_view to_string(TpOverlap t) {
  switch (t) {
    case TpOverlap::none: return "none";
    case TpOverlap::backward: return "backward";
    case TpOverlap::userbuffers: return "userbuffers";
  }
  return "?";
}

std::optional<TpOverlap> parse_tp_overlap(std::string_view s) {
  for (TpOverlap t : {TpOverlap::none, TpOverlap::backward, TpOverlap::userbuffers}) {
    if (to_string(t) == s) return t;
  }
  return std::nullopt;
}

std::string_view to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::current: return "current";
  }
  return "?";
}

std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s) {
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::current}) {
    if (to_string(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view to_string(ParamGatherStart s) {
  switch (s) {
    case ParamGatherStart::automatic: return "auto";
    case ParamGatherStart::step: return "step";
    case ParamGatherStart::first_use: return "first-use";
    case ParamGatherStart::aligned: return "aligned";
  }
  return "?";
}

std::optional<ParamGatherStart> parse_param_gather_start(std::string_view s) {
  for (ParamGatherStart g : {ParamGatherStart::automatic, ParamGatherStart::step, ParamGatherStart::first_use, ParamGatherStart::aligned}) {
    if (to_string(g) == s) return g;
  }
  return std::nullopt;
}

std::optional<CpComm> parse_cp_comm(std::string_view s) {
  for (CpComm c : {CpComm::p2p, CpComm::allgather, CpComm::a2a}) {
    if (to_string(c) == s) return c;
  }
  return std::nullopt;
}

}  // namespace dtsim::workloads
