// `dtsim simulate` as a user runs it.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;
using dtsim::testing::slurp;
using dtsim::testing::temp;

std::string example(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/" + name; }

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

TEST(SimulateCli, ReportAndJsonNameAFrameworkOtherThanMegatron) {
  // Issue 14, item 5: the header line and the JSON result say which framework was assumed; the
  // default (megatron) keeps its output as before; --list-params lists the framework constants.
  const std::string json = temp("gpt2-eager.json");
  const Result r = run("simulate " + example("gpt2-124m-eager-1xh100.yaml") + " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# framework: pytorch-eager"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("result").at("framework"), "pytorch-eager");
  const Result m = run("simulate " + example("gpt2-single-gpu.yaml"));
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_EQ(m.out.find("# framework:"), std::string::npos);
  const Result p = run("simulate --list-params");
  for (const char* name : {"framework.pytorch_eager.host_per_kernel", "framework.torch_compile.host_per_kernel",
                           "framework.gemm_unaligned_efficiency", "framework.sdpa_fwd_efficiency", "framework.sdpa_bwd_efficiency",
                           "framework.sdpa_masked_fwd_efficiency", "framework.sdpa_masked_bwd_efficiency", "framework.sdpa_dropout_ops",
                           "memory.cuda_context", "memory.cublas_workspace"}) {
    EXPECT_NE(p.out.find(name), std::string::npos) << name;
  }
}

TEST(SimulateCli, EagerFitsIsDecidedByTheMonitorViewNotTheAllocatorPeak) {
  // GPT-2 eager peaks near 12.6 GiB allocated; a 70 GiB CUDA context puts the monitor's view at
  // allocated x 1.05 (memory.fragmentation) + 70 GiB > 80 GiB: what runs out is the device, so it
  // does not fit although the allocator's peak alone would.
  const std::string json = temp("gpt2-eager-context.json");
  const Result r = run("simulate " + example("gpt2-124m-eager-1xh100.yaml") + " --set 'simulation.params.memory.cuda_context=70 GiB' --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("total = what a monitor such as nvidia-smi shows, which decides fits"), std::string::npos) << r.out;
  const auto peak = nlohmann::json::parse(slurp(json)).at("result").at("memory").at("peak");
  const double allocated = peak.at("allocated_GiB").get<double>();
  EXPECT_LT(allocated, 20.0);
  EXPECT_NEAR(peak.at("total_GiB").get<double>(), allocated * 1.05 + 70.0, 0.01);
  EXPECT_FALSE(peak.at("fits").get<bool>());
  EXPECT_NE(r.out.find("does not fit in GPU memory"), std::string::npos) << r.out;
}

TEST(SimulateCli, ATracedStepRefusesAFramework) {
  // A traced step replays the trace's kernels; training.framework used to be accepted and ignored.
  const Result r = run("simulate " + std::string(DTSIM_SOURCE_DIR) + "/examples/traces/gpt2-124m-b8-s1024-1xh100.yaml" +
                       " --set training.framework=pytorch-eager --set training.global_batch=8");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("training.framework: pytorch-eager has no meaning for a traced step"), std::string::npos) << r.out;
  // Megatron-Core's overlapped parameter gather neither: the trace's data parallelism is PyTorch's.
  const Result g = run("simulate " + std::string(DTSIM_SOURCE_DIR) + "/examples/traces/gpt2-124m-64xa100-ddp.yaml" +
                       " --set parallel.overlap_param_gather=true");
  EXPECT_EQ(g.code, 2) << g.out;
  EXPECT_NE(g.out.find("parallel.overlap_param_gather: a traced step replays PyTorch's data parallelism"), std::string::npos) << g.out;
}

TEST(SimulateCli, FrameworksRefuseTensorParallelism) {
  const Result r = run("simulate " + example("gpt2-124m-eager-1xh100.yaml") +
                       " --set cluster.gpus_per_node=2 --set parallel.tp=2 --set parallel.dp=1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("training.framework"), std::string::npos) << r.out;
}

TEST(SimulateCli, SameInputGivesIdenticalJson) {
  const std::string a = temp("simulate-same-input-a.json"), b = temp("simulate-same-input-b.json");
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

TEST(SimulateCli, EmptySetValueIsAnErrorNotTheDefault) {
  // `--set training.framework=` would otherwise read as null and fall back to the default silently.
  const Result r = run("simulate " + example("resnet50-ddp.yaml") + " --set training.framework=");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--set: training.framework: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("has no value after '='"), std::string::npos) << r.out;
}

TEST(SimulateCli, ARepeatedKeyIsAnErrorAtItsLine) {
  // yaml-cpp keeps both and every lookup finds the first: the second would be ignored silently.
  const std::string f = temp("repeated.yaml");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\n"
                      "model: resnet50\n"
                      "training: {global_batch: 256, micro_batch: 32}\n"
                      "parallel: {dp: 8}\n"
                      "parallel: {dp: 4}\n";
  const Result r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("repeated.yaml:5:1: parallel: is given twice in the same mapping (first at line 4)"), std::string::npos) << r.out;
  // Nested too.
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1, nodes: 2}\nmodel: resnet50\ntraining: {global_batch: 256, micro_batch: 32}\n";
  const Result nested = run("simulate " + f);
  EXPECT_EQ(nested.code, 2);
  EXPECT_NE(nested.out.find("nodes: is given twice"), std::string::npos) << nested.out;
}

TEST(SimulateCli, AliasesAreCheckedOnceNotExpanded) {
  // Twelve levels of ten aliases each stand for 10^12 leaves; the repeated-key check walks each
  // anchored node once, so this ends at once with the ordinary errors.
  const std::string f = temp("laughs.yaml");
  std::ofstream out(f);
  out << "l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 12; ++i) {
    out << "l" << i << ": &l" << i << " [";
    for (int j = 0; j < 10; ++j) out << (j ? ", " : "") << "*l" << i - 1;
    out << "]\n";
  }
  out.close();
  const Result r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("l11: unknown field"), std::string::npos) << r.out;
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

TEST(SimulateCli, ContextParallelCommunicationIsChosenAndChecked) {
  // Llama 3 8B, tp 2 x cp 4 over 4 DGX H100 (the bundled example): ring attention hides its K/V
  // passes under attention; the all-gather and all-to-all forms expose theirs, so their steps are
  // longer and show context-parallel communication.
  const std::string base = "simulate " + example("llama3-8b-long-context.yaml");
  double p2p = 0;
  for (const std::string form : {"p2p", "allgather", "a2a"}) {
    const std::string json = temp("cp-" + form + ".json");
    const Result r = run(base + " --set parallel.cp_comm=" + form + " --json " + json);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j.at("config").at("parallel").at("cp_comm"), form);
    const double step = j.at("result").at("step_time_s").get<double>();
    if (form == "p2p") {
      p2p = step;
      EXPECT_EQ(r.out.find("context-parallel communication"), std::string::npos) << r.out;
    } else {
      EXPECT_GT(step, p2p) << form;
      EXPECT_NE(r.out.find("context-parallel communication"), std::string::npos) << r.out;
    }
  }
  Result r = run(base + " --set parallel.cp_comm=ring");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("parallel.cp_comm: unknown value 'ring' (p2p, allgather, a2a)"), std::string::npos) << r.out;
  // Ulysses splits heads over cp: 4 key/value heads per tensor-parallel rank do not split 8 ways.
  const std::string f = temp("ulysses-8.yaml");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 4}\n"
                      "model: llama3-8b\n"
                      "training: {global_batch: 64, micro_batch: 1, seq_len: 32768}\n"
                      "parallel: {tp: 2, cp: 8, dp: 2, sequence_parallel: true,\n"
                      "           cp_comm: a2a}\n";
  r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ulysses-8.yaml:5:12: parallel.cp_comm: cp_comm a2a shards attention heads over cp (8): the 16 query and 4 key/value "
                       "heads on each tensor-parallel rank must both be multiples of it"),
            std::string::npos)
      << r.out;
}

std::string classic(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/examples/classic/" + name; }

double step_of(const std::string& json_path) { return nlohmann::json::parse(slurp(json_path)).at("result").at("step_time_s").get<double>(); }

TEST(ClassicCli, EveryDataParallelImplementationRunsAndDdpScalesBest) {
  // The five data-parallel implementations on one 8x V100 PCIe server: DDP overlaps its
  // all-reduces with backward; DataParallel and the parameter server funnel traffic through GPU 0
  // or the CPUs and lose (the examples' comments say why).
  std::map<std::string, double> step;
  for (const char* impl : {"ddp", "dataparallel", "horovod", "mirrored", "parameter-server"}) {
    const std::string json = temp(std::string("classic-") + impl + ".json");
    const Result r = run("simulate " + classic(std::string("resnet50-8x-v100-pcie-") + impl + ".yaml") + " --json " + json);
    ASSERT_EQ(r.code, 0) << impl << "\n" << r.out;
    step[impl] = step_of(json);
    EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("config").at("parallel").at("dp_impl"), impl);
  }
  for (const char* worse : {"dataparallel", "mirrored", "parameter-server"}) EXPECT_GT(step[worse], step["ddp"]) << worse;
}

TEST(ClassicCli, LoaderBoundAndEthernetAndEnergyExamples) {
  const Result loader = run("simulate " + classic("resnet50-imagenet-loader-bound.yaml"));
  ASSERT_EQ(loader.code, 0) << loader.out;
  // 8 GPUs x 8 cores x 100 images/s = 6,400 images/s.
  EXPECT_NE(loader.out.find("6400.00 samples/s"), std::string::npos) << loader.out;
  EXPECT_NE(loader.out.find("INPUT-BOUND by decode"), std::string::npos) << loader.out;

  const std::string eth = temp("eth.json");
  ASSERT_EQ(run("simulate " + classic("resnet50-ethernet-25g.yaml") + " --json " + eth).code, 0);
  const std::string eth_slow = temp("eth-slow.json");
  ASSERT_EQ(run("simulate " + classic("resnet50-ethernet-25g.yaml") + " --set simulation.links.eth-25.efficiency=0.35 --json " + eth_slow).code, 0);
  EXPECT_GT(step_of(eth_slow), step_of(eth));

  const std::string energy = temp("energy.json");
  const Result e = run("simulate " + classic("resnet50-90-epochs-energy.yaml") + " --json " + energy);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("time to train"), std::string::npos) << e.out;
  const auto j = nlohmann::json::parse(slurp(energy));
  const auto& run_j = j.at("result").at("run");
  // 90 epochs of ceil(1,281,167 / 4,096) = 313 steps, plus 90 x 30 s of evaluation.
  EXPECT_EQ(run_j.at("steps").get<double>(), 90.0 * 313);
  EXPECT_NEAR(run_j.at("time_to_train_s").get<double>(), 90 * 313 * j.at("result").at("step_time_s").get<double>() + 2700, 0.01 * 90 * 313);
  EXPECT_GT(run_j.at("energy_kwh").get<double>(), 0);
  EXPECT_EQ(run_j.at("cost").at("currency"), "USD");
}

TEST(ClassicCli, PrecisionTheGpuLacksIsRefusedAtItsLine) {
  // A CNN goes through the same capability check as a transformer: bf16 on a V100 (Volta's tensor
  // cores take fp16 only) names the file, line, field, the GPU and what it has.
  Result r = run("simulate " + classic("resnet50-8x-v100-pcie-ddp.yaml") + " --set training.precision=bf16");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("resnet50-8x-v100-pcie-ddp.yaml:6:48: training.precision: v100-pcie-32g has no bf16 support (its peak rates "
                       "are for fp64, fp32, fp16)"),
            std::string::npos)
      << r.out;
  r = run("simulate " + example("resnet50-ddp.yaml") + " --set training.precision=fp8");  // A100: no fp8
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("a100-sxm4-80g has no fp8 support"), std::string::npos) << r.out;
}

TEST(ClassicCli, BadInputNamesTheField) {
  Result r = run("simulate " + classic("resnet50-8x-v100-pcie-ddp.yaml") + " --set parallel.dp_impl=allgather-sgd");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("parallel.dp_impl: unknown value 'allgather-sgd' (ddp, horovod, no-overlap, mirrored, dataparallel, parameter-server)"),
            std::string::npos)
      << r.out;

  r = run("simulate " + classic("resnet50-8x-v100-pcie-dataparallel.yaml") + " --set cluster.nodes=2 --set parallel.dp=16 --set training.global_batch=1024");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("dp_impl dataparallel runs in one process on one node, but the cluster has 2 nodes"), std::string::npos) << r.out;

  const std::string f = temp("no-size.yaml");
  std::ofstream(f) << "cluster: {node: dgx-a100-80g, nodes: 1}\n"
                      "model: resnet50\n"
                      "training:\n"
                      "  global_batch: 256\n"
                      "  epochs: 90\n"
                      "  data: {read_bandwidth: 2 GB/s, decode_rate: 100, cores_per_gpu: 8}\n"
                      "parallel: {dp: 8}\n";
  r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":6:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a dataset needs its size"), std::string::npos) << r.out;

  r = run("simulate " + classic("resnet50-90-epochs-energy.yaml") + " --set training.data=imagenet-22k");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown dataset preset 'imagenet-22k' (did you mean 'imagenet-1k'?)"), std::string::npos) << r.out;

  r = run("simulate " + classic("resnet50-90-epochs-energy.yaml") + " --set training.tokens=1e12");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("give one of tokens, samples or epochs"), std::string::npos) << r.out;

  r = run("simulate " + classic("resnet50-90-epochs-energy.yaml") + " --set energy.pue=0.8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("energy.pue"), std::string::npos) << r.out;

  // The power model's watts go through the unit parser: a power must be finite, carry a unit and
  // lie in its range (a GPU's up to 10 kW, a node's overhead up to 1 MW), and the idle draw cannot
  // exceed the busy one. Each is refused at the energy line (17) and field.
  for (const auto& [set, says] : std::vector<std::pair<std::string, std::string>>{
           {"'energy.gpu_max=inf W'", "energy.gpu_max: 'inf W' is not a finite power"},
           {"'energy.node_overhead=3300'", "energy.node_overhead: '3300' has no unit"},
           {"'energy.gpu_max=2 MW'", "energy.gpu_max: 2 MW is not a GPU's power (1 W to 10 kW)"},
           {"'energy.node_overhead=2 MW'", "energy.node_overhead: 2 MW is not a node's power beyond its GPUs (0 W to 1 MW)"},
           {"'energy.gpu_idle=450 W'", "energy.gpu_idle: 450 W is above gpu_max (400 W)"}}) {
    r = run("simulate " + classic("resnet50-90-epochs-energy.yaml") + " --set " + set);
    EXPECT_EQ(r.code, 2) << set;
    EXPECT_NE(r.out.find("resnet50-90-epochs-energy.yaml:17:"), std::string::npos) << set << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << set << r.out;
  }
}

TEST(ClassicCli, OneSweepComparesTheImplementations) {
  // examples/sweeps/dp-impl-resnet50-scaling.yaml: weak scaling from 1 to 8 GPUs of one PCIe
  // server per implementation. DDP keeps over 90% of its one-GPU throughput per GPU; nn.DataParallel
  // and a single parameter-server shard fall below 60% (their traffic all crosses GPU 0's or one
  // socket's PCIe links, and DataParallel's transfers block the step).
  const std::string out = temp("dp-impl.jsonl");
  std::filesystem::remove(out);
  const Result r = run("sweep " + std::string(DTSIM_SOURCE_DIR) + "/examples/sweeps/dp-impl-resnet50-scaling.yaml -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::map<std::string, std::map<int, double>> per_gpu;  // impl -> gpus -> samples/s per GPU
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("result")) continue;
    ASSERT_EQ(j.at("status"), "ok") << line;
    const int gpus = j.at("axes").at("gpus").get<int>();
    per_gpu[j.at("axes").at("parallel.dp_impl").get<std::string>()][gpus] =
        j.at("result").at("throughput").at("samples_per_s").get<double>() / gpus;
  }
  ASSERT_EQ(per_gpu.size(), 5u);
  const auto efficiency = [&](const std::string& impl) { return per_gpu[impl][8] / per_gpu[impl][1]; };
  EXPECT_GT(efficiency("ddp"), 0.9);
  EXPECT_GT(efficiency("horovod"), 0.9);
  EXPECT_LT(efficiency("dataparallel"), 0.6);
  EXPECT_LT(efficiency("parameter-server"), 0.6);
  EXPECT_LT(efficiency("mirrored"), efficiency("ddp"));
}

}  // namespace

namespace {

TEST(SimulateCli, DropoutSettingsAreCheckedAtTheirLine) {
  const std::string f = temp("bad-dropout.yaml");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\n"
                      "model: gpt3-1.3b\n"
                      "training: {global_batch: 8, dropout: 1.5, dropout_rng: sha256, dropout_mask: kept, head_layout: sideways}\n";
  const Result r = run("simulate " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training.dropout:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'sha256' is not one of: philox, hash"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'kept' is not one of: stored, regenerated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'sideways' is not one of: permute, split"), std::string::npos) << r.out;
  // Valid values run, and 0 removes dropout: the step gets no slower than with dropout 0.1.
  const std::string g = temp("dropout.yaml");
  auto step = [&](const std::string& extra) {
    std::ofstream(g) << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-1.3b\n"
                        "training: {global_batch: 8, attention: standard" << extra << "}\n";
    const Result ok = run("simulate " + g + " --json " + temp("dropout.json"));
    EXPECT_EQ(ok.code, 0) << ok.out;
    std::ifstream in(temp("dropout.json"));
    return nlohmann::json::parse(in)["result"]["step_time_s"].get<double>();
  };
  const double none = step(", dropout: 0"), philox = step(", dropout: 0.1"), hash = step(", dropout: 0.1, dropout_rng: hash");
  EXPECT_LT(none, philox);
  EXPECT_LT(philox, hash);  // a 64-bit hash per element costs more than Philox's bytes
  // dtsim-validate's head layout (Q, K, V and the context copied at its kernels' measured rates)
  // is slower than Megatron-LM's one context copy at the stream rate.
  EXPECT_LT(philox, step(", dropout: 0.1, head_layout: split"));
  // With flash attention there are no layout copies: the setting runs and says it does nothing.
  const std::string fl = temp("head-layout-flash.yaml");
  std::ofstream(fl) << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-1.3b\ntraining: {global_batch: 8, head_layout: split}\n";
  const Result n = run("simulate " + fl);
  EXPECT_EQ(n.code, 0) << n.out;
  EXPECT_NE(n.out.find("training.head_layout split has no effect"), std::string::npos) << n.out;
}

// training.attention flash1 (FlashAttention 1 and its Triton port, as MosaicML's MPT benchmarks
// ran): the fused kernel at half of FlashAttention-2's rate. The step is longer by exactly the
// attention kernels' extra time: on one A100 without communication, forward + backward attention
// FLOPs F take F_fwd / (peak 0.30) + F_bwd / (peak 0.225) instead of F_fwd / (peak 0.6) +
// F_bwd / (peak 0.45), i.e. twice as long; memory is flash's. A bad value lists the three.
TEST(SimulateCli, FirstGenerationFlashAttentionDoublesTheAttentionKernelsOnly) {
  const std::string f = temp("flash1.yaml");
  auto run_with = [&](const std::string& attention) {
    std::ofstream(f) << "cluster: {node: dgx-a100-80g, nodes: 1, gpus_per_node: 1}\nmodel: gpt3-1.3b\n"
                        "training: {global_batch: 1, micro_batch: 1, seq_len: 2048, attention: " << attention << "}\n";
    const Result r = run("simulate " + f + " --json " + temp("flash1.json"));
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream in(temp("flash1.json"));
    return nlohmann::json::parse(in)["result"];
  };
  const auto v2 = run_with("flash"), v1 = run_with("flash1");
  // gpt3-1.3b: 24 layers, 16 heads of 128, causal: forward attention FLOPs per layer
  // 4 x 16 x 2048 x 2048 x 128 / 2 = 17.18 GFLOP; backward 2.5x that.
  const double fwd = 24 * 4.0 * 16 * 2048 * 2048 * 128 / 2, peak = 312e12;
  const double extra = fwd / (peak * 0.30) + 2.5 * fwd / (peak * 0.225) - fwd / (peak * 0.6) - 2.5 * fwd / (peak * 0.45);
  // The JSON gives step times to the microsecond: two roundings.
  EXPECT_NEAR(v1["step_time_s"].get<double>() - v2["step_time_s"].get<double>(), extra, 2e-6);
  EXPECT_EQ(v1["memory"].dump(), v2["memory"].dump());
  std::ofstream(f) << "cluster: {node: dgx-a100-80g, nodes: 1}\nmodel: gpt3-1.3b\ntraining: {global_batch: 8, attention: flash2}\n";
  const Result bad = run("simulate " + f);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("training.attention: unknown value 'flash2' (flash, flash1, standard)"), std::string::npos) << bad.out;
}

// The GPT-3 175B example with `set` (--set options) added: its output and its --json document.
std::pair<std::string, nlohmann::json> gpt3_example_with(const std::string& set, const std::string& name) {
  const std::string json = temp(name);
  const Result r = run("simulate " + example("gpt3-175b-a100.yaml") + set + " --json " + json);
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(json);
  return std::make_pair(r.out, nlohmann::json::parse(in));
}

// Setting `key` true on the GPT-3 175B example shortens its step, and the JSON echoes the key
// only when it is set.
void expect_shortens_and_echoes(const std::string& key) {
  const auto [off_out, off] = gpt3_example_with("", key + "-off.json");
  const auto [on_out, on] = gpt3_example_with(" --set parallel." + key + "=true", key + "-on.json");
  EXPECT_LT(on["result"]["step_time_s"].get<double>(), off["result"]["step_time_s"].get<double>()) << key;
  EXPECT_FALSE(off["config"]["parallel"].contains(key)) << key;
  EXPECT_TRUE(on["config"]["parallel"][key].get<bool>()) << key;
}

// A configuration `yaml` (written to `name`) is refused with exit code 2, naming the file's line
// `line` and the key `key`.
void expect_refused_at(const std::string& name, const std::string& yaml, int line, const std::string& key) {
  const std::string file = temp(name);
  std::ofstream(file) << yaml;
  const Result r = run("simulate " + file);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(file + ":" + std::to_string(line)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(key), std::string::npos) << r.out;
}

// A configuration `yaml` (written to `name`) runs (exit 0) and its output says `note`.
void expect_noted(const std::string& name, const std::string& yaml, const std::string& note) {
  const std::string file = temp(name);
  std::ofstream(file) << yaml;
  const Result r = run("simulate " + file);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(note), std::string::npos) << r.out;
}

// parallel.overlap_param_gather (Megatron-Core's --overlap-param-gather): the GPT-3 175B example
// (zero 1, interleaved 1F1B over 128 nodes) moves its parameter all-gather under the next forward
// pass, so its exposed data-parallel time and its step shrink, and the JSON echoes the setting;
// without the distributed optimizer it is noted as without effect; a bad value is refused at its
// line.
TEST(SimulateCli, OverlappedParamGatherShortensTheStepAndIsCheckedAtItsLine) {
  expect_shortens_and_echoes("overlap_param_gather");
  const auto [plain_out, plain] =
      gpt3_example_with(" --set parallel.overlap_param_gather=true --set parallel.zero=0", "gather-zero0.json");
  EXPECT_NE(plain_out.find("parallel.overlap_param_gather has no effect with zero 0"), std::string::npos) << plain_out;
  expect_refused_at("gather-bad.yaml",
                    "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-1.3b\ntraining: {global_batch: 16}\n"
                    "parallel: {zero: 1, overlap_param_gather: sometimes}\n",
                    4, "parallel.overlap_param_gather");
}

// parallel.separate_gather_group: the Llama 2 7B FSDP example with short sequences (one
// micro-batch of 512 tokens: each layer's gather and reduce-scatter outlast its backward compute)
// runs its gathers beside the reduce-scatters instead of after them on the group's one stream, so
// its step shrinks, and the JSON echoes the setting; without ZeRO-3 or an overlapped gather it is
// noted as without effect; a bad value is refused at its line.
TEST(SimulateCli, SeparateGatherGroupShortensACommunicationBoundFsdpStepAndIsCheckedAtItsLine) {
  auto fsdp = [](const std::string& set, const std::string& name) {
    const std::string json = temp(name);
    const Result r = run("simulate " + example("llama2-7b-fsdp.yaml") + " --set training.seq_len=512 --set training.micro_batch=1" + set + " --json " + json);
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream in(json);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json shared = fsdp("", "fsdp-shared.json"), separate = fsdp(" --set parallel.separate_gather_group=true", "fsdp-separate.json");
  EXPECT_LT(separate["result"]["step_time_s"].get<double>(), shared["result"]["step_time_s"].get<double>());
  EXPECT_FALSE(shared["config"]["parallel"].contains("separate_gather_group"));
  EXPECT_TRUE(separate["config"]["parallel"]["separate_gather_group"].get<bool>());
  const auto [plain_out, plain] = gpt3_example_with(" --set parallel.separate_gather_group=true", "gather-group-zero1.json");
  EXPECT_NE(plain_out.find("parallel.separate_gather_group has no effect without overlapped parameter all-gathers"), std::string::npos) << plain_out;
  expect_refused_at("gather-group-bad.yaml",
                    "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-1.3b\ntraining: {global_batch: 16}\n"
                    "parallel: {zero: 3, separate_gather_group: sometimes}\n",
                    4, "parallel.separate_gather_group");
}

// parallel.param_gather_start: echoed in the JSON when given; without the overlapped gather it is
// noted as without effect; aligned without the interleaved schedule is noted as running as
// first-use (Megatron-LM forces --align-param-gather off there; a plan may pick the schedule); an
// unknown value is refused at its line.
TEST(SimulateCli, ParamGatherStartIsEchoedNotedAndCheckedAtItsLine) {
  const auto [step_out, step] = gpt3_example_with(" --set parallel.overlap_param_gather=true --set parallel.param_gather_start=step", "gather-step.json");
  EXPECT_EQ(step["config"]["parallel"]["param_gather_start"].get<std::string>(), "step");
  const auto [plain_out, plain] = gpt3_example_with(" --set parallel.param_gather_start=step", "gather-start-alone.json");
  EXPECT_NE(plain_out.find("parallel.param_gather_start has no effect without an overlapped parameter all-gather"), std::string::npos) << plain_out;
  expect_noted("gather-aligned-1f1b.yaml",
               "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-1.3b\ntraining: {global_batch: 16}\n"
               "parallel: {pp: 2, zero: 1, overlap_param_gather: true, param_gather_start: aligned}\n",
               "parallel.param_gather_start: aligned runs as first-use");
  expect_refused_at("gather-start-bad.yaml",
                    "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-1.3b\ntraining: {global_batch: 16}\n"
                    "parallel: {zero: 1, overlap_param_gather: true, param_gather_start: soon}\n",
                    4, "parallel.param_gather_start");
}

// parallel.overlap_p2p (Megatron-Core's overlap_p2p_comm): the GPT-3 175B example (interleaved
// 1F1B, pp 8 over 128 nodes) no longer blocks its stages on their pipeline sends, so its exposed
// pipeline communication and its step shrink, and the JSON echoes the setting; with pp 1 it is
// noted as without effect; a bad value is refused at its line.
TEST(SimulateCli, OverlappedPipelineSendsShortenTheStepAndAreCheckedAtTheirLine) {
  expect_shortens_and_echoes("overlap_p2p");
  expect_noted("p2p-pp1.yaml",
               "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-1.3b\ntraining: {global_batch: 8}\n"
               "parallel: {tp: 8, overlap_p2p: true}\n",
               "parallel.overlap_p2p has no effect with pp = 1");
  expect_refused_at("p2p-bad.yaml",
                    "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-1.3b\ntraining: {global_batch: 16}\n"
                    "parallel: {pp: 2, overlap_p2p: sometimes}\n",
                    4, "parallel.overlap_p2p");
}

// parallel.tp_overlap: on one DGX H100 with tp 8 and sequence parallelism, each step hides more
// tensor-parallel communication than the one before (none, then Megatron's asynchronous backward,
// then Transformer Engine's userbuffers) while the compute stays the same; the JSON echoes the
// setting; a bad value and userbuffers without sequence parallelism are refused with the field.
TEST(SimulateCli, TensorParallelOverlapHidesCommunicationInOrder) {
  const std::string f = temp("tp-overlap.yaml");
  auto run_with = [&](const std::string& overlap) {
    std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-13b\n"
                        "training: {global_batch: 4, micro_batch: 1, seq_len: 2048}\n"
                        "parallel: {tp: 8, sequence_parallel: true, tp_overlap: " << overlap << "}\n";
    const Result r = run("simulate " + f + " --json " + temp("tp-overlap.json"));
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream in(temp("tp-overlap.json"));
    return nlohmann::json::parse(in);
  };
  const auto none = run_with("none"), async = run_with("backward"), ub = run_with("userbuffers");
  auto step = [](const nlohmann::json& j) { return j["result"]["step_time_s"].get<double>(); };
  auto tp = [](const nlohmann::json& j) { return j["result"]["breakdown"]["tp_comm_s"].get<double>(); };
  EXPECT_GT(step(none), step(async));
  EXPECT_GT(step(async), step(ub));
  EXPECT_GT(tp(none), tp(async));
  EXPECT_GT(tp(async), tp(ub));
  EXPECT_EQ(none["config"]["parallel"]["tp_overlap"], "none");
  EXPECT_EQ(ub["config"]["parallel"]["tp_overlap"], "userbuffers");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-13b\ntraining: {global_batch: 4}\n"
                      "parallel: {tp: 8, tp_overlap: full}\n";
  const Result bad = run("simulate " + f);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find(f + ":4"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("parallel.tp_overlap: unknown value 'full' (none, backward, userbuffers)"), std::string::npos) << bad.out;
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-13b\ntraining: {global_batch: 4}\n"
                      "parallel: {tp: 8, tp_overlap: userbuffers}\n";
  const Result no_sp = run("simulate " + f);
  EXPECT_EQ(no_sp.code, 2) << no_sp.out;
  EXPECT_NE(no_sp.out.find("needs sequence_parallel: true"), std::string::npos) << no_sp.out;
}

// training.cross_entropy: Megatron-LM's unfused loss adds 38 - 10 bytes per logit forward and
// 14 - 6 backward over the fused kernel (program_test.cpp counts them); on one H100 for GPT-2's
// 50,257-entry vocabulary the step grows, the JSON echoes it, and a bad value is refused.
TEST(SimulateCli, UnfusedCrossEntropyLengthensTheStepAndIsChecked) {
  const std::string f = temp("ce.yaml");
  auto run_with = [&](const std::string& ce) {
    std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\n"
                        "training: {global_batch: 8, micro_batch: 8, seq_len: 1024, cross_entropy: " << ce << "}\n";
    const Result r = run("simulate " + f + " --json " + temp("ce.json"));
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream in(temp("ce.json"));
    return nlohmann::json::parse(in);
  };
  const auto fused = run_with("fused"), unfused = run_with("unfused");
  EXPECT_GT(unfused["result"]["step_time_s"].get<double>(), fused["result"]["step_time_s"].get<double>());
  EXPECT_EQ(unfused["config"]["training"]["cross_entropy"], "unfused");
  std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\n"
                      "training: {global_batch: 8, cross_entropy: apex}\n";
  const Result bad = run("simulate " + f);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find(f + ":3"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("'apex' is not one of: fused, unfused"), std::string::npos) << bad.out;
}

// training.fp8_recipe: current scaling's maximum passes lengthen an fp8 step; the recipe is echoed,
// a bad value is refused at its line, and setting it without fp8 is noted as without effect.
TEST(SimulateCli, Fp8RecipeCurrentScalingLengthensTheStepAndIsChecked) {
  const std::string f = temp("fp8.yaml");
  auto run_with = [&](const std::string& training) {
    std::ofstream(f) << "cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\n"
                        "training: {global_batch: 8, micro_batch: 8, seq_len: 1024, " << training << "}\n";
    return run("simulate " + f + " --json " + temp("fp8.json"));
  };
  auto step = [&](const std::string& training) {
    const Result r = run_with(training);
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream in(temp("fp8.json"));
    return nlohmann::json::parse(in);
  };
  const auto delayed = step("precision: fp8"), current = step("precision: fp8, fp8_recipe: current");
  EXPECT_GT(current["result"]["step_time_s"].get<double>(), delayed["result"]["step_time_s"].get<double>());
  EXPECT_EQ(delayed["config"]["training"]["fp8_recipe"], "delayed");
  EXPECT_EQ(current["config"]["training"]["fp8_recipe"], "current");
  const Result bad = run_with("precision: fp8, fp8_recipe: mxfp8");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find(f + ":3"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("training.fp8_recipe"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("unknown value 'mxfp8' (delayed, current)"), std::string::npos) << bad.out;
  const Result noted = run_with("fp8_recipe: current");
  EXPECT_EQ(noted.code, 0) << noted.out;
  EXPECT_NE(noted.out.find("training.fp8_recipe current has no effect: precision is bf16"), std::string::npos) << noted.out;
}

}  // namespace

// A step graph written with --dump-graph and run with --graph gives the same step; an edited graph
// changes it; a broken or mismatched graph file is refused with its name.
TEST(SimulateCli, DumpedGraphRunsToTheSameStepAndAnEditChangesIt) {
  const std::string graph = temp("gpipe-graph.json");
  // Every tensor-parallel collective blocking, so that all compute is in compute ops (no compute
  // beside an overlapped collective, which runs slower while the collective lasts).
  const std::string cfg = example("gpt3-13b-gpipe.yaml") + " --set parallel.tp_overlap=none";
  const Result a = run("simulate " + cfg + " --dump-graph " + graph + " --json " + temp("built.json"));
  ASSERT_EQ(a.code, 0) << a.out;
  auto g = nlohmann::json::parse(slurp(graph));
  EXPECT_EQ(g.at("format"), "dtsim-step-graph");
  const Result b = run("simulate " + cfg + " --graph " + graph + " --json " + temp("given.json"));
  ASSERT_EQ(b.code, 0) << b.out;
  const auto built = nlohmann::json::parse(slurp(temp("built.json"))).at("result");
  const auto given = nlohmann::json::parse(slurp(temp("given.json"))).at("result");
  EXPECT_EQ(built.at("step_time_s"), given.at("step_time_s"));
  EXPECT_NE(b.out.find("--graph"), std::string::npos) << "the report says the graph was given";
  // Every compute op of every stage twice as long: the compute time doubles.
  for (auto& stage : g.at("kinds")[0].at("stages")) {
    for (auto& op : stage.at("ops")) {
      if (op.at("kind") == "compute") op["duration_ps"] = 2 * op.at("duration_ps").get<std::int64_t>();
    }
  }
  std::ofstream(temp("slow-graph.json")) << g.dump();
  const Result c = run("simulate " + cfg + " --graph " + temp("slow-graph.json") + " --json " + temp("slow.json"));
  ASSERT_EQ(c.code, 0) << c.out;
  const auto slow = nlohmann::json::parse(slurp(temp("slow.json"))).at("result");
  EXPECT_NEAR(slow.at("breakdown").at("compute_s").get<double>(), 2 * built.at("breakdown").at("compute_s").get<double>(),
              1e-6 * built.at("breakdown").at("compute_s").get<double>());
}

TEST(SimulateCli, BrokenGraphFilesAreRefusedWithTheirName) {
  const std::string cfg = example("gpt3-13b-gpipe.yaml");
  const std::string graph = temp("graph-for-errors.json");
  ASSERT_EQ(run("simulate " + cfg + " --dump-graph " + graph).code, 0);
  const std::string text = slurp(graph);
  std::ofstream(temp("truncated-graph.json")) << text.substr(0, text.size() / 2);
  Result r = run("simulate " + cfg + " --graph " + temp("truncated-graph.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("truncated-graph.json: malformed JSON at byte"), std::string::npos) << r.out;
  std::ofstream(temp("foreign-graph.json")) << R"({"traceEvents": []})";
  r = run("simulate " + cfg + " --graph " + temp("foreign-graph.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("foreign-graph.json: format: missing"), std::string::npos) << r.out;
  // The graph is for 4 stages; the configuration with 2 is another shape.
  r = run("simulate " + cfg + " --graph " + graph + " --set parallel.pp=2 --set parallel.dp=2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("graph-for-errors.json: the graph has 4 pipeline stages where the configuration has 2"), std::string::npos) << r.out;
  r = run("simulate " + cfg + " --graph " + temp("no-such-graph.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
}
