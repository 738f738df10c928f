// Every accuracy figure of docs/validation.md: dtsim's predictions against each dataset of
// data/published/, each figure marked in-sample (the dataset fed a default constant that the
// prediction uses, per data/registry.yaml), held-out, or leave-one-source-out (the constant was
// refitted without this dataset). Used by dtsim-compare-published.
#pragma once

#include <string>
#include <vector>

#include "config/registry.hpp"

namespace dtsim::accuracy {

// One predicted-against-measured point.
struct Figure {
  std::string dataset;  // registry id
  std::string point;    // "8 GiB", "4096^3", "16,384 GPUs 8K"
  double measured = 0;
  double predicted = 0;
  std::string fit;  // "in-sample", "held-out", "leave-one-source-out"
  double error() const { return (predicted - measured) / measured; }
};

// A block of Markdown that goes between the markers of the same name in a document.
struct Section {
  std::string name;
  std::string markdown;
};

struct Results {
  std::vector<Section> sections;
  std::vector<Figure> figures;
};

// "in-sample" when `dataset` fed one of `constants`, else "held-out".
std::string fit_of(const config::Registry& reg, const std::string& dataset, const std::vector<std::string>& constants);
// The median (the mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> v);
// "1,234" for tables.
std::string thousands(double v);

// Each adds its sections and figures; an error message when a dataset cannot be read.
Status nccl_allreduce(const config::Registry& reg, Results& out);
// The nccl-tests logs of data/published/nccl-tests/, from 1 MiB up (bench/accuracy_logs.cpp).
Status nccl_logs(const config::Registry& reg, Results& out);
Status gemm_and_hbm(const config::Registry& reg, Results& out);
Status training(const config::Registry& reg, Results& out);
// Runs of dtsim's own harness on real GPUs (data/validation/), held out from every fit.
Status measured_runs(const config::Registry& reg, Results& out);
// The summary tables (held-out accuracy; in-sample fit quality) from the figures.
void summary(Results& out);

// Reads a CSV of data/published/ ('#' comment lines, one header row) into rows of named fields.
Expected<std::vector<std::vector<std::pair<std::string, std::string>>>> read_csv(const std::string& path);
std::string field(const std::vector<std::pair<std::string, std::string>>& row, const std::string& name);

}  // namespace dtsim::accuracy
