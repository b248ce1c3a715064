// fbt/dist/mpi_comm.hpp: the MPI communicator (dist/comm.hpp's contract over MPI_COMM_WORLD).
//
// The only fbt header that includes <mpi.h>; link fbt::mpi (CMake: MPI found, FBT_HAVE_MPI). Open MPI from
// Debian: apt-get install libopenmpi-dev openmpi-bin; run with `mpirun -np N program ...`.
//
// allreduce_sum is a fixed-order reduction, so a run is bit-identical at a given N:
//   1. reduce-scatter: the n elements are cut into N contiguous chunks; rank r owns chunk r. Every rank
//      sends chunk r of its buffer to rank r (MPI_Alltoallv), and rank r adds the N pieces in rank order
//      0, 1, ..., N-1 (a fixed left-to-right sum, whatever order the messages arrived in);
//   2. allgather: every rank receives every owner's summed chunk (MPI_Allgatherv).
// Each rank sends and receives 2 (N-1)/N of the buffer, as a ring all-reduce does. Large buffers go in
// pieces of at most 2^27 elements (MPI counts are int).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "comm.hpp"

namespace fbt {

namespace detail {
template <class T> MPI_Datatype mpi_type();
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }

inline void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(std::string("MPI: ") + what + " failed: " + std::string(msg, std::size_t(len)));
  }
}
}  // namespace detail

/// Initialises MPI for its lifetime (MPI_Init_thread, funneled: fbt's worker threads never call MPI) and
/// finalises it after; harmless when MPI is already initialised by the caller (then it does not finalise).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      detail::mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_ = true;
    }
    // errors come back as codes (mpi_check), not as an abort inside MPI
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiSession() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owns_ && !fin) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(MPI_Comm c = MPI_COMM_WORLD) : c_(c) {
    detail::mpi_check(MPI_Comm_rank(c_, &rank_), "MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(c_, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  void allreduce_sum(float* x, std::size_t n) override { ordered_allreduce(x, n); }
  void allreduce_sum(double* x, std::size_t n) override { ordered_allreduce(x, n); }

  void broadcast(std::string& bytes, int root) override {
    long long len = (long long)bytes.size();
    detail::mpi_check(MPI_Bcast(&len, 1, MPI_LONG_LONG, root, c_), "MPI_Bcast (length)");
    bytes.resize(std::size_t(len));
    for (long long off = 0; off < len;) {
      const int piece = int(std::min<long long>(len - off, 1 << 30));
      detail::mpi_check(MPI_Bcast(&bytes[std::size_t(off)], piece, MPI_CHAR, root, c_), "MPI_Bcast");
      off += piece;
    }
  }

  void agree(bool ok, const std::string& message) override {
    int bad = ok ? size_ : rank_;  // the lowest failing rank wins
    int first = size_;
    detail::mpi_check(MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, c_), "MPI_Allreduce (agree)");
    if (first == size_) return;
    std::string msg = rank_ == first ? message : std::string();
    broadcast(msg, first);
    throw Error("rank " + std::to_string(first) + " of " + std::to_string(size_) + ": " + msg);
  }

  void barrier() override { detail::mpi_check(MPI_Barrier(c_), "MPI_Barrier"); }

 private:
  template <class T> void ordered_allreduce(T* x, std::size_t n) {
    if (size_ == 1 || n == 0) return;
    const std::size_t kPiece = std::size_t(1) << 27;
    for (std::size_t off = 0; off < n; off += kPiece) ordered_piece(x + off, std::min(kPiece, n - off));
  }
  template <class T> void ordered_piece(T* x, std::size_t n) {
    const int N = size_;
    std::vector<int> cnt(N), dsp(N);
    for (int r = 0; r < N; ++r) {
      const std::size_t lo = n * std::size_t(r) / std::size_t(N), hi = n * std::size_t(r + 1) / std::size_t(N);
      dsp[r] = int(lo), cnt[r] = int(hi - lo);
    }
    const int mine = cnt[rank_];
    std::vector<T>& recv = scratch<T>();
    recv.resize(std::size_t(mine) * N);
    std::vector<int> rcnt(N, mine), rdsp(N);
    for (int r = 0; r < N; ++r) rdsp[r] = r * mine;
    const MPI_Datatype t = detail::mpi_type<T>();
    // 1. every rank's piece of chunk `rank_` arrives here, rank r's at recv[r * mine]
    detail::mpi_check(MPI_Alltoallv(x, cnt.data(), dsp.data(), t, recv.data(), rcnt.data(), rdsp.data(), t, c_), "MPI_Alltoallv");
    T* out = x + dsp[rank_];
    for (int i = 0; i < mine; ++i) {
      T s = recv[std::size_t(i)];  // rank 0's
      for (int r = 1; r < N; ++r) s += recv[std::size_t(r) * mine + i];
      out[i] = s;
    }
    // 2. every owner's sum to every rank (in place)
    detail::mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, t, x, cnt.data(), dsp.data(), t, c_), "MPI_Allgatherv");
  }
  template <class T> std::vector<T>& scratch();

  MPI_Comm c_;
  int rank_ = 0, size_ = 1;
  std::vector<float> fscratch_;
  std::vector<double> dscratch_;
};
template <> inline std::vector<float>& MpiComm::scratch<float>() { return fscratch_; }
template <> inline std::vector<double>& MpiComm::scratch<double>() { return dscratch_; }

}  // namespace fbt
