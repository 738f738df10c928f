// The deployment templates (scripts/slurm, scripts/k8s, scripts/calibrate-device) are not run in
// CI: they are checked for syntax (bash -n, a YAML parse), and for what they must ask for
// (one task per GPU, GPUs from Kubernetes, the fit at the end).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace {

std::string source(const std::string& rel) { return std::string(DTSIM_SOURCE_DIR) + "/" + rel; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int bash_syntax(const std::string& path) { return std::system(("bash -n '" + path + "' 2>&1").c_str()); }

TEST(Deployment, ScriptsParse) {
  for (const char* s : {"scripts/slurm/calibrate.sbatch", "scripts/calibrate-device"}) {
    ASSERT_TRUE(std::filesystem::exists(source(s))) << s;
    EXPECT_EQ(bash_syntax(source(s)), 0) << s;
  }
}

TEST(Deployment, SlurmRunsOneTaskPerGpuThenFits) {
  const std::string s = slurp(source("scripts/slurm/calibrate.sbatch"));
  EXPECT_NE(s.find("#SBATCH --ntasks-per-node=8"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --gpus-per-node=8"), std::string::npos);
  EXPECT_NE(s.find("srun --mpi=pmix"), std::string::npos);
  EXPECT_NE(s.find("--gpus-per-task=1"), std::string::npos);
  EXPECT_NE(s.find("dtsim-calibrate-mpi"), std::string::npos);
  EXPECT_NE(s.find("--resume"), std::string::npos);
  EXPECT_NE(s.find("\"$dtsim\" fit"), std::string::npos);
}

// Containers of a pod template, for a Job and for each replica of an MPIJob.
std::vector<YAML::Node> containers(const YAML::Node& doc) {
  std::vector<YAML::Node> out;
  auto add = [&](const YAML::Node& pod) {
    for (const auto& c : pod["spec"]["containers"]) out.push_back(c);
  };
  const std::string kind = doc["kind"].as<std::string>();
  if (kind == "Job") add(doc["spec"]["template"]);
  if (kind == "MPIJob") {
    for (const auto& r : doc["spec"]["mpiReplicaSpecs"]) add(r.second["template"]);
  }
  return out;
}

int gpus_requested(const std::vector<YAML::Node>& cs) {
  int n = 0;
  for (const auto& c : cs) {
    if (c["resources"] && c["resources"]["limits"] && c["resources"]["limits"]["nvidia.com/gpu"]) {
      n += c["resources"]["limits"]["nvidia.com/gpu"].as<int>();
    }
  }
  return n;
}

TEST(Deployment, KubernetesManifestsParseAndRequestGpus) {
  const auto job = YAML::LoadAllFromFile(source("scripts/k8s/calibrate-job.yaml"));
  ASSERT_EQ(job.size(), 1u);
  EXPECT_EQ(job[0]["apiVersion"].as<std::string>(), "batch/v1");
  EXPECT_EQ(job[0]["kind"].as<std::string>(), "Job");
  const auto jc = containers(job[0]);
  ASSERT_EQ(jc.size(), 1u);
  EXPECT_EQ(gpus_requested(jc), 8);

  const auto mpi = YAML::LoadAllFromFile(source("scripts/k8s/calibrate-mpijob.yaml"));
  ASSERT_EQ(mpi.size(), 1u);
  EXPECT_EQ(mpi[0]["apiVersion"].as<std::string>(), "kubeflow.org/v2beta1");
  EXPECT_EQ(mpi[0]["kind"].as<std::string>(), "MPIJob");
  EXPECT_EQ(mpi[0]["spec"]["slotsPerWorker"].as<int>(), 8);
  const auto worker = mpi[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"];
  ASSERT_TRUE(worker.IsSequence());
  EXPECT_EQ(worker[0]["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 8);
  EXPECT_EQ(gpus_requested(containers(mpi[0])), 8);  // the launcher asks for none

  // The shell programs inside the manifests parse too.
  int scripts = 0;
  for (const auto& docs : {job, mpi}) {
    for (const auto& c : containers(docs[0])) {
      if (!c["args"]) continue;
      const std::string path = (std::filesystem::path(::testing::TempDir()) / ("k8s-" + std::to_string(scripts++) + ".sh")).string();
      std::ofstream(path) << c["args"][0].as<std::string>();
      EXPECT_EQ(bash_syntax(path), 0) << c["args"][0].as<std::string>();
      EXPECT_NE(c["args"][0].as<std::string>().find("dtsim fit"), std::string::npos);
    }
  }
  EXPECT_EQ(scripts, 2);
}

}  // namespace
