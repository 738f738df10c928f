// One process per GPU under MPI (mpirun, or srun with PMIx): rank, node-local rank, hosts, and
// the broadcast of NCCL's unique id.
#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

#include "calibrate/harness/bootstrap.hpp"

namespace dtsim::harness {

namespace {

class Mpi final : public Bootstrap {
 public:
  Mpi(int* argc, char*** argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
    char name[256] = {};
    const std::string h = hostname();
    std::strncpy(name, h.c_str(), sizeof name - 1);
    std::vector<char> all(static_cast<std::size_t>(size_) * sizeof name);
    MPI_Allgather(name, sizeof name, MPI_CHAR, all.data(), sizeof name, MPI_CHAR, MPI_COMM_WORLD);
    std::set<std::string> hosts;
    for (int i = 0; i < size_; ++i) hosts.insert(std::string(all.data() + static_cast<std::size_t>(i) * sizeof name));
    nodes_ = static_cast<int>(hosts.size());
  }
  ~Mpi() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int nodes() const override { return nodes_; }
  bool mpi() const override { return true; }
  Status broadcast(void* data, std::size_t bytes, int root) override {
    if (MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS) return Error("MPI_Bcast failed");
    return {};
  }
  double mean(double v) override {
    double s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return s / size_;
  }
  double max(double v) override {
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, nodes_ = 1;
};

}  // namespace

std::unique_ptr<Bootstrap> make_bootstrap(int* argc, char*** argv) { return std::make_unique<Mpi>(argc, argv); }

}  // namespace dtsim::harness
