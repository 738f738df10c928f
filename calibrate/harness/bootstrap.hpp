// How the processes of one harness run find each other. Without MPI there is one process, which
// drives every local GPU itself; with MPI (dtsim-calibrate-mpi, launched by mpirun or srun) there
// is one process per GPU, across nodes, and NCCL's unique id travels over MPI.
#pragma once

#include <memory>
#include <string>

#include "sim/expected.hpp"

namespace dtsim::harness {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the processes of this node
  virtual int nodes() const = 0;       // distinct hosts
  virtual bool mpi() const = 0;
  // Root's `bytes` bytes at `data` to every process.
  virtual Status broadcast(void* data, std::size_t bytes, int root) = 0;
  // The mean and the largest of a value over the processes.
  virtual double mean(double v) = 0;
  virtual double max(double v) = 0;
  virtual void barrier() = 0;
  // Ends the run of every process (after a fatal error on one).
  virtual void abort(int code) = 0;
};

// The bootstrap this executable was built with (single process, or MPI).
std::unique_ptr<Bootstrap> make_bootstrap(int* argc, char*** argv);
std::string hostname();

}  // namespace dtsim::harness
