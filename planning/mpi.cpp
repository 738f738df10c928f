#include "planning/mpi.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#ifdef DTSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace dtsim::planning {

namespace {

// The world size mpirun announces to the processes it starts (OpenMPI; PMIx and PMI for others).
int launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  }
  if (std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr) return 2;
  return 0;
}

}  // namespace

bool MpiSession::built_with_mpi() {
#ifdef DTSIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

MpiSession::MpiSession() {
  const int launched = launched_size();
  if (launched == 0) return;
#ifdef DTSIM_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    error_ = "MPI_Init_thread failed";
    return;
  }
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#else
  if (launched > 1) {
    error_ = fmt::format("started by mpirun ({} processes), but this dtsim was built without MPI (DTSIM_ENABLE_MPI): "
                         "run it as one process, or rebuild with OpenMPI (scripts/deps installs it)",
                         launched);
  }
#endif
}

MpiSession::~MpiSession() {
#ifdef DTSIM_HAVE_MPI
  if (active_) MPI_Finalize();
#endif
}

void MpiSession::send(int to, int tag, const std::string& data) const {
#ifdef DTSIM_HAVE_MPI
  if (!active_) return;
  MPI_Send(data.data(), static_cast<int>(data.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
#else
  (void)to, (void)tag, (void)data;
#endif
}

std::optional<std::pair<int, int>> MpiSession::probe() const {
#ifdef DTSIM_HAVE_MPI
  if (!active_) return std::nullopt;
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return std::nullopt;
  return std::make_pair(st.MPI_SOURCE, st.MPI_TAG);
#else
  return std::nullopt;
#endif
}

std::string MpiSession::receive(int from, int tag) const {
#ifdef DTSIM_HAVE_MPI
  if (!active_) return {};
  MPI_Status st;
  MPI_Probe(from, tag, MPI_COMM_WORLD, &st);
  int count = 0;
  MPI_Get_count(&st, MPI_CHAR, &count);
  std::string data(static_cast<std::size_t>(count), '\0');
  MPI_Recv(data.data(), count, MPI_CHAR, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return data;
#else
  (void)from, (void)tag;
  return {};
#endif
}

void MpiSession::broadcast(std::string& data, int root) const {
#ifdef DTSIM_HAVE_MPI
  if (!active_) return;
  unsigned long long n = data.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
  data.resize(static_cast<std::size_t>(n));
  if (n > 0) MPI_Bcast(data.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD);
#else
  (void)data, (void)root;
#endif
}

}  // namespace dtsim::planning
