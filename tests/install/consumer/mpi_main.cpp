// A consumer of the installed fbt::mpi: the MPI communicator's rank-order sum and one distributed K-pass
// step of a tiny model, from the installed headers. Run directly (a 1-rank world) or under mpirun.
#include <cstdio>
#include <vector>

#include "fbt/dist/distributed_step.hpp"
#include "fbt/dist/mpi_comm.hpp"
#include "fbt/model/model.hpp"

int main(int argc, char** argv) {
  fbt::MpiSession session(&argc, &argv);
  fbt::MpiComm comm;
  std::vector<double> x{1.0 + comm.rank(), 2.0};
  comm.allreduce_sum(x.data(), x.size());
  const double want = comm.size() + comm.size() * (comm.size() - 1) / 2.0;
  if (x[0] != want || x[1] != 2.0 * comm.size()) {
    std::fprintf(stderr, "mpi_consumer: the sum is %g, %g\n", x[0], x[1]);
    return 1;
  }
  fbt::ModelConfig c;
  c.vocab_size = 11, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 16, c.max_position_embeddings = 16, c.fuser = "glu";
  fbt::Model<float> m(c, 1);
  std::vector<int> tok(4 * 6), tgt(4 * 6);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = int(i % 11), tgt[i] = int((i + 1) % 11);
  fbt::StepOptions o;
  o.K = 2;
  fbt::DistributedStepper<fbt::Model<float>> ds(m, comm, 1);
  fbt::StepStats st;
  m.params.zero_grad();
  ds.step(fbt::Batch{4, 6, tok.data(), tgt.data(), nullptr}, o, st);
  std::printf("mpi_consumer: rank %d of %d, K = 2 loss %.4f %.4f\n", comm.rank(), comm.size(), st.loss[0], st.loss[1]);
  return st.loss[0] > 0 ? 0 : 1;
}
