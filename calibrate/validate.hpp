// `dtsim validate`: the simulator's prediction of the validation workload (calibrate/workload/,
// `dtsim-validate`: a GPT-style decoder trained data parallel on the local GPUs) next to its
// measured step times. Each measured point becomes the equivalent `dtsim simulate` configuration
// (same model dimensions, batch, precision, standard attention, DDP with the same bucket, one
// node of the matching preset with as many GPUs as were used), simulated with the defaults or a
// hardware profile.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/records.hpp"
#include "config/profile.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

struct ValidationPoint {
  std::string where;  // file:line
  std::string point;
  std::string device_name;
  nlohmann::json model;     // name, hidden, layers, heads, ffn, vocab, max_seq, bias, ...
  nlohmann::json training;  // micro_batch, global_batch, seq_len, precision, grad_dtype, attention, optimizer
  std::int64_t bucket_bytes = 25'000'000;
  int gpus = 1;
  double measured_s = 0;         // median step time
  double measured_min_s = 0, measured_max_s = 0;
  double tokens_per_step = 0;
};

// The measured points of dtsim-validate records (status ok); errors name file:line. Records of
// other tools are errors; failed points are listed in `skipped`.
Expected<std::vector<ValidationPoint>> validation_points(const std::vector<Record>& records, std::vector<std::string>& skipped);

// The `dtsim simulate` configuration that stands for a point, on node preset `node`.
std::string simulate_yaml(const ValidationPoint& p, const std::string& node);

struct ValidationRow {
  ValidationPoint p;
  std::string node;
  double predicted_s = 0;
  double error = 0;  // (predicted - measured) / measured
  bool fits = true;  // the simulator's memory model says it fits
};

struct ValidationOptions {
  std::string node;  // node preset; "" = from the device name
  const config::HardwareProfile* profile = nullptr;
};

Expected<std::vector<ValidationRow>> predict_points(const std::vector<ValidationPoint>& points, const ValidationOptions& o);

struct ValidationSummary {
  int points = 0;
  double mape = 0;  // mean |error|
  double median = 0, worst = 0;
};
ValidationSummary summarize(const std::vector<ValidationRow>& rows);

std::string validation_table(const std::vector<ValidationRow>& rows);
std::string validation_csv(const std::vector<ValidationRow>& rows);
nlohmann::json validation_json(const std::vector<ValidationRow>& rows, const std::string& profile_path);

}  // namespace dtsim::calibrate
