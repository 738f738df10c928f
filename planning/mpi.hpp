// MPI for sweeps larger than one machine (OpenMPI's mpirun): a session object that initializes MPI
// only when the process was started by mpirun, so that the same binary runs as one process
// otherwise. Only the thread that created the session calls MPI (MPI_THREAD_FUNNELED).
#pragma once

#include <optional>
#include <string>

#include "sim/expected.hpp"

namespace dtsim::planning {

class MpiSession {
 public:
  // Starts MPI when launched by mpirun (and dtsim was built with MPI). Launched by mpirun without
  // MPI support is an error (every process would run the whole job): see error().
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static bool built_with_mpi();
  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  // Set when the environment says mpirun started us but MPI cannot be used.
  const std::string& error() const { return error_; }

  // Messages between ranks (no-ops when inactive).
  void send(int to, int tag, const std::string& data) const;
  // A message waiting to be received, if any: (source, tag).
  std::optional<std::pair<int, int>> probe() const;
  std::string receive(int from, int tag) const;
  // `data` of rank `root` on every rank.
  void broadcast(std::string& data, int root) const;

 private:
  bool active_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::string error_;
};

}  // namespace dtsim::planning
