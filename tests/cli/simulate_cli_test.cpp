// `dtsim simulate` as a user runs it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace {

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(DTSIM_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (p && std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = p ? pclose(p) : -1;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string temp(const std::string& name) { return (std::filesystem::path(::testing::TempDir()) / name).string(); }
std::string example(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/" + name; }
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SimulateCli, PrintsTheStepAndWritesJson) {
  const std::string json = temp("resnet.json");
  const Result r = run("simulate " + example("resnet50-ddp.yaml") + " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step time"), std::string::npos);
  EXPECT_NE(r.out.find("MFU"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& res = j.at("result");
  EXPECT_EQ(res.at("model").at("params").get<double>(), 25557032.0);  // torchvision's ResNet-50
  for (const char* key : {"step_time_s", "tflops_per_gpu", "mfu", "hfu", "breakdown", "memory", "throughput"}) {
    EXPECT_TRUE(res.contains(key)) << key;
  }
  EXPECT_TRUE(res.at("model").contains("flops_per_step"));
  EXPECT_TRUE(res.at("throughput").contains("samples_per_s"));
  EXPECT_TRUE(res.at("memory").at("peak").contains("activations_GiB"));
  EXPECT_EQ(j.at("config").at("parallel").at("dp_impl"), "ddp");
  EXPECT_EQ(j.at("config").at("training").at("recompute"), "none");  // a default, echoed
}

TEST(SimulateCli, SameInputGivesIdenticalJson) {
  const std::string a = temp("a.json"), b = temp("b.json");
  ASSERT_EQ(run("simulate " + example("llama2-7b-fsdp.yaml") + " --json " + a).code, 0);
  ASSERT_EQ(run("simulate " + example("llama2-7b-fsdp.yaml") + " --json " + b).code, 0);
  EXPECT_EQ(slurp(a), slurp(b));
}

TEST(SimulateCli, SetOverridesAnyKey) {
  const Result r = run("simulate " + example("llama2-7b-fsdp.yaml") + " --set parallel.zero=0 --set training.micro_batch=4");
  ASSERT_EQ(r.code, 0) << r.out;
  const Result j = run("simulate " + example("llama2-7b-fsdp.yaml") + " --set parallel.tp=2 --set parallel.dp=8 --json " + temp("o.json"));
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_NE(j.out.find("tp 2 x pp 1 x cp 1 x dp 8"), std::string::npos) << j.out;
}

TEST(SimulateCli, LayoutThatDoesNotMatchTheGpuCountNamesTheLine) {
  const std::string f = temp("bad-layout.yaml");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\n"
                      "model: llama2-7b\n"
                      "training: {global_batch: 64}\n"
                      "parallel: {tp: 4, pp: 4, dp: 2}\n";
  const Result r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":4:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("= 32 but the cluster has 8 GPUs"), std::string::npos) << r.out;
}

TEST(SimulateCli, BadInputIsReportedTogether) {
  const std::string f = temp("bad.yaml");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\n"
                      "model: llama2-7c\n"
                      "training: {micro_batch: 0, precision: fp12}\n"
                      "parallel: {schedule: zigzag}\n";
  const Result r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("did you mean 'llama2-7b'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training.global_batch: is required"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training.micro_batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown type 'fp12'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown value 'zigzag'"), std::string::npos) << r.out;
}

TEST(SimulateCli, MalformedSetIsAnError) {
  const Result r = run("simulate " + example("resnet50-ddp.yaml") + " --set parallel.dp");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("is not key=value"), std::string::npos) << r.out;
}

TEST(SimulateCli, OutOfMemoryIsAReportNotAnError) {
  const Result r = run("simulate " + example("gpt2-single-gpu.yaml") + " --set model=llama2-70b");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("out of memory: rank 0 (pipeline stage 0) needs"), std::string::npos) << r.out;
}

TEST(SimulateCli, ImpossibleModelLayoutsNameTheField) {
  const Result r = run("simulate " + example("llama2-7b-fsdp.yaml") + " --set parallel.tp=3 --set parallel.dp=1 --set cluster.gpus_per_node=3 --set cluster.nodes=1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("parallel.tp: tp (3) must divide the 32 attention heads"), std::string::npos) << r.out;
}

}  // namespace
