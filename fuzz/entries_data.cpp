// Fuzz entries of the measured-data readers: calibration and validation JSON Lines, nccl-tests
// logs, published bandwidth CSV, PyTorch profiler traces and kernel-profile CSV, each through the
// functions cli/ (and bench/, for the published CSV) call.
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/kernel_profile.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "calibrate/published.hpp"
#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "fuzz/entries.hpp"
#include "trace/ops.hpp"
#include "trace/reader.hpp"
#include "trace/summary.hpp"

namespace dtsim::fuzz {

namespace {

template <class T>
void require_reason(const Expected<T>& e, const char* what) {
  if (!e && e.error().message.empty()) contract_broken(std::string(what) + ": an error without a message");
}

void require_reason(const Status& s, const char* what) {
  if (!s && s.error().message.empty()) contract_broken(std::string(what) + ": an error without a message");
}

}  // namespace

void records(std::string_view input) {
  auto recs = calibrate::read_records(scratch_file(input, "jsonl"));
  require_reason(recs, "JSON Lines records");
  if (!recs) return;
  // `dtsim fit --results` and `dtsim validate` both go on from the records.
  calibrate::Dataset data;
  require_reason(calibrate::add_records(data, *recs), "fit records");
  std::vector<std::string> skipped;
  require_reason(calibrate::validation_points(*recs, skipped), "validation points");
}

void nccl_tests(std::string_view input) {
  auto log = calibrate::read_nccl_tests(scratch_file(input, "txt"));
  require_reason(log, "nccl-tests log");
  if (!log) return;
  calibrate::Dataset data;
  require_reason(calibrate::add_nccl_tests(data, *log, calibrate::NcclTestsInput{}), "fit nccl-tests");
}

void published(std::string_view input) { require_reason(calibrate::read_published_busbw(scratch_file(input, "csv")), "published CSV"); }

void trace(std::string_view input) {
  auto t = trace::read_trace(scratch_file(input, "json"));
  require_reason(t, "profiler trace");
  if (!t) return;
  // `dtsim trace summary`.
  const trace::StepOps ops = trace::link_step(*t);
  const trace::Summary s = trace::summarize(*t, ops);
  (void)trace::render_summary(s);
}

void kernel_csv(std::string_view input) { require_reason(calibrate::read_kernel_csv(scratch_file(input, "csv")), "kernel-profile CSV"); }

}  // namespace dtsim::fuzz
