// fbt/dist/comm.hpp: the communicator contract of data-parallel training, and the one-process one.
//
// Data parallelism in fbt: every rank draws the same global batch (same seed, same data order), runs the
// K-pass step on its share of the rows, and the gradients are summed over the ranks before clipping and the
// optimizer step, which every rank then takes identically. What a communicator must provide:
//
//   rank(), size()
//   allreduce_sum(x, n)      x (n) := the sum over ranks of x, in rank order 0, 1, ..., N-1 on every element,
//                            so a run is bit-identical at a given N whatever the network does (a plain
//                            MPI_Allreduce may add in any order)
//   broadcast(bytes, root)   root's bytes to every rank
//   agree(ok, message)       collective: if any rank passes ok = false, every rank throws fbt::Error naming
//                            the first such rank and its message (so an error on one rank stops all of them,
//                            with that rank's words, instead of leaving the others waiting)
//   barrier()
// and, for reducing gradients while the backward still runs (dist/distributed_step.hpp), optionally:
//   start_allreduce_sum(x, n)  begins allreduce_sum(x, n) and returns; x holds the sum (the same bits as
//                            allreduce_sum) once wait_all() returns and must not be touched before; every
//                            rank starts the same reductions in the same order
//   progress()               lets the started reductions advance (call it between pieces of other work);
//                            true when none is left
//   wait_all()               returns when every started reduction is done
// whose defaults reduce at once (start_allreduce_sum is allreduce_sum), so a communicator that has no
// nonblocking collectives still works, without the overlap.
//
// LocalComm is the one-process communicator (size 1; every operation is the identity). The MPI one is
// dist/mpi_comm.hpp, which alone includes <mpi.h>: nothing else in fbt depends on MPI.
#pragma once

#include <string>

#include "../config.hpp"

namespace fbt {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// x (n) := sum over ranks of x, each element summed in rank order (deterministic).
  virtual void allreduce_sum(float* x, std::size_t n) = 0;
  virtual void allreduce_sum(double* x, std::size_t n) = 0;
  /// bytes := root's bytes on every rank.
  virtual void broadcast(std::string& bytes, int root) = 0;
  /// Collective: throws fbt::Error on every rank when any rank's ok is false (the first such rank's message).
  virtual void agree(bool ok, const std::string& message) = 0;
  virtual void barrier() = 0;
  virtual const char* name() const = 0;

  /// Begins allreduce_sum(x, n); x is the sum once wait_all() returns (default: at once).
  virtual void start_allreduce_sum(float* x, std::size_t n) { allreduce_sum(x, n); }
  virtual void start_allreduce_sum(double* x, std::size_t n) { allreduce_sum(x, n); }
  /// Advances the started reductions; true when none is left.
  virtual bool progress() { return true; }
  /// Returns when every started reduction is done.
  virtual void wait_all() {}
};

/// One process: size 1, every collective the identity.
class LocalComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void broadcast(std::string&, int) override {}
  void agree(bool ok, const std::string& message) override {
    if (!ok) throw Error(message);
  }
  void barrier() override {}
  const char* name() const override { return "local"; }
};

}  // namespace fbt
