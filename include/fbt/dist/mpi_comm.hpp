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
// The two phases are nonblocking collectives (MPI_Ialltoallv, then MPI_Iallgatherv on a duplicate of the
// communicator), so start_allreduce_sum returns at once and progress() moves each started reduction
// along: when its exchange has arrived, the owner's sum is taken and its gather started. Gathers start in
// the order the reductions did (each waits for the ones before it), and the exchanges and the gathers
// each have their own communicator, so every rank issues each communicator's collectives in the same
// order, as MPI requires. allreduce_sum is start_allreduce_sum + wait_all: one code path, so the sums are
// the same bits however a buffer is cut into reductions (each element is still summed in rank order).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
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
    detail::mpi_check(MPI_Comm_dup(c_, &gather_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(gather_, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&gather_);
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  void allreduce_sum(float* x, std::size_t n) override { start_allreduce_sum(x, n), wait_all(); }
  void allreduce_sum(double* x, std::size_t n) override { start_allreduce_sum(x, n), wait_all(); }
  void start_allreduce_sum(float* x, std::size_t n) override { start(x, n); }
  void start_allreduce_sum(double* x, std::size_t n) override { start(x, n); }

  bool progress() override {
    for (auto& p : pending_) {  // in the order started: an exchange not yet arrived holds up the later gathers
      if (p.phase != 0) continue;
      int done = 0;
      detail::mpi_check(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE), "MPI_Test (exchange)");
      if (!done) break;
      p.is_double ? owner_sum(static_cast<double*>(p.x), p) : owner_sum(static_cast<float*>(p.x), p);
      const MPI_Datatype t = p.is_double ? MPI_DOUBLE : MPI_FLOAT;
      detail::mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, t, p.x, p.cnt.data(), p.dsp.data(), t, gather_, &p.req), "MPI_Iallgatherv");
      p.phase = 1;
    }
    while (!pending_.empty() && pending_.front().phase == 1) {
      int done = 0;
      detail::mpi_check(MPI_Test(&pending_.front().req, &done, MPI_STATUS_IGNORE), "MPI_Test (gather)");
      if (!done) break;
      pending_.pop_front();
    }
    return pending_.empty();
  }
  void wait_all() override {
    while (!progress()) {
    }
  }

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
  // One reduction of at most 2^27 elements in flight: phase 0 = the exchange (chunk r of every rank's
  // buffer to rank r), phase 1 = the gather of the owners' sums.
  struct Pending {
    void* x = nullptr;
    bool is_double = false;
    int phase = 0;
    std::vector<int> cnt, dsp, rcnt, rdsp;  // (N) chunk sizes and starts; what arrives from each rank, and where
    std::vector<char> recv;                 // (N, chunk of this rank) every rank's piece of this rank's chunk
    MPI_Request req = MPI_REQUEST_NULL;
  };

  template <class T> void start(T* x, std::size_t n) {
    if (size_ == 1 || n == 0) return;
    const std::size_t kPiece = std::size_t(1) << 27;
    for (std::size_t off = 0; off < n; off += kPiece) start_piece(x + off, std::min(kPiece, n - off));
    progress();
  }
  template <class T> void start_piece(T* x, std::size_t n) {
    const int N = size_;
    pending_.emplace_back();
    Pending& p = pending_.back();
    p.x = x, p.is_double = std::is_same<T, double>::value;
    p.cnt.resize(N), p.dsp.resize(N), p.rcnt.resize(N), p.rdsp.resize(N);
    for (int r = 0; r < N; ++r) {
      const std::size_t lo = n * std::size_t(r) / std::size_t(N), hi = n * std::size_t(r + 1) / std::size_t(N);
      p.dsp[r] = int(lo), p.cnt[r] = int(hi - lo);
    }
    const int mine = p.cnt[rank_];
    for (int r = 0; r < N; ++r) p.rcnt[r] = mine, p.rdsp[r] = r * mine;
    p.recv.resize(std::size_t(mine) * N * sizeof(T));
    const MPI_Datatype t = detail::mpi_type<T>();
    detail::mpi_check(MPI_Ialltoallv(x, p.cnt.data(), p.dsp.data(), t, p.recv.data(), p.rcnt.data(), p.rdsp.data(), t, c_, &p.req),
                      "MPI_Ialltoallv");
  }
  // this rank's chunk := the N pieces summed in rank order 0, 1, ..., N-1
  template <class T> void owner_sum(T* x, const Pending& p) const {
    const int N = size_, mine = p.cnt[rank_];
    const T* recv = reinterpret_cast<const T*>(p.recv.data());
    T* out = x + p.dsp[rank_];
    for (int i = 0; i < mine; ++i) {
      T s = recv[std::size_t(i)];  // rank 0's
      for (int r = 1; r < N; ++r) s += recv[std::size_t(r) * mine + i];
      out[i] = s;
    }
  }

  MPI_Comm c_, gather_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::deque<Pending> pending_;
};

}  // namespace fbt
