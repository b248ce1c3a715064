// tests/layers/test_any_piece.cpp: the slots, AnyFuser<T> and AnyBlock<T> (fbt/layers/any_piece.hpp, adapters and
// registries in fbt/model/pieces.hpp), over AnyBackend<T> (fbt/backend/any.hpp). Checks:
// - a model whose pieces sit in slots computes what the model of the same concrete types computes, bit for bit
//   (double): every pass's loss and every gradient of a K = 3 step with jitter, prefixes and a document boundary,
//   for every built-in fuser, and the decoder's logits in soft mode;
// - a slot holds a copy of its piece (a copied model's pieces are its own), get_if reads the piece as its type
//   and is null for another;
// - the registries: the library's pieces in order, a piece registered by a macro known at the first look-up, the
//   same type again a no-op, a second type under a taken name refused naming both origins, an unknown name refused
//   with the names known and how to add one;
// - the backend seen through AnyBackend is the backend itself (its name, its operations).
#include <gtest/gtest.h>

#include <cstring>

#include "common/errors.hpp"
#include "common/io_test.hpp"
#include "common/tiny_model.hpp"
#include "fbt/decode/decoder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_any_piece {

using namespace fbt;
using namespace fbt_test;

namespace {

/// u = e + s (a fuser of this file, registered by the macro when the file is loaded).
template <class T> struct SumFuser {
  using Scalar = T;
  static constexpr const char* name = "test_sum";
  int D = 0;
  struct Cache {};
  explicit SumFuser(const FuserArgs& a) : D(a.hidden_size) {}
  void declare(const ParamRegistry<T>&) {}
  template <class Be> void alloc(const Be&, Carver<T>&, Carver<T>&, Cache&, int, bool) const {}
  template <class Be> void forward(Be& be, const Weights<T>&, Cache&, const T* s, const T* e, const T*, T* u, int N) const {
    be.copy(u, e, std::size_t(N) * D);
    be.add(u, s, std::size_t(N) * D);
  }
  template <class Be>
  void backward(Be& be, const Weights<T>&, const Cache&, const T*, const T*, const T*, const T* du, T* ds, T* de, T*, int N) const {
    be.add(de, du, std::size_t(N) * D);
    if (ds) be.add(ds, du, std::size_t(N) * D);
  }
};
FBT_REGISTER_FUSER(SumFuser);

/// Another fuser type under a taken name.
template <class T> struct ImpostorFuser : SumFuser<T> {
  static constexpr const char* name = "glu";
  using SumFuser<T>::SumFuser;
};

template <class Typed> void same_as_typed(const std::string& fuser) {
  SCOPED_TRACE(fuser);
  const ModelConfig c = tiny_config(fuser);
  Typed typed(c, 3);
  Model<double> erased(c, 3);
  ASSERT_EQ(typed.params.size(), erased.params.size());
  randomize(typed, 4);
  std::memcpy(erased.params.values(), typed.params.values(), typed.params.size() * sizeof(double));
  TinyBatch tb = tiny_batch(2, 9, c.vocab_size, 5);
  tb.doc_start[9 + 4] = 1;
  std::vector<int> prefix(3 * 2, 1);
  auto run = [&](auto& m) {
    Rng rng(6);
    StepOptions o;
    o.K = fuser == "none" ? 1 : 3, o.sigma = 0.02, o.rng = &rng, o.prefix = prefix.data();
    Workspace<std::decay_t<decltype(m)>> ws;
    m.params.zero_grad();
    return multipass_step(m, ws, tb.batch(true), o);
  };
  const StepStats a = run(typed), b = run(erased);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(std::memcmp(typed.params.grads(), erased.params.grads(), typed.params.size() * sizeof(double)), 0) << "every gradient, bit for bit";
  if (fuser == "none") return;
  // KV-cached decoding in soft mode: the same logits at every step
  Decoder<Typed> dt(typed);
  Decoder<Model<double>> de(erased);
  std::vector<double> lt(c.vocab_size), le(c.vocab_size);
  auto st = dt.new_sequence(16, DecodeModeSpec::parse("soft"));
  auto se = de.new_sequence(16, DecodeModeSpec::parse("soft"));
  const std::vector<int> prompt{1, 2, 3};
  dt.prefill(st, prompt.data(), 3, lt.data());
  de.prefill(se, prompt.data(), 3, le.data());
  EXPECT_EQ(lt, le);
  for (int t = 0; t < 4; ++t) {
    const int tok = t + 4;
    auto* pt = &st;
    auto* pe = &se;
    dt.step(&pt, 1, &tok, lt.data());
    de.step(&pe, 1, &tok, le.data());
    EXPECT_EQ(lt, le) << "step " << t;
  }
}

}  // namespace

TEST(AnyPiece, ErasedModelComputesWhatTheTypedModelComputes) {
  same_as_typed<Model<double, GluFuser<double>, DecoderBlock<double>>>("glu");
  same_as_typed<Model<double, GatedAddFuser<double>, DecoderBlock<double>>>("gated_add");
  same_as_typed<Model<double, ConcatFuser<double>, DecoderBlock<double>>>("concat");
  same_as_typed<Model<double, NoFuser<double>, DecoderBlock<double>>>("none");
}

TEST(AnyPiece, SlotsHoldCopiesAndReadTheirPieceByType) {
  const ModelConfig c = tiny_config("glu");
  Model<double> a(c, 1);
  ASSERT_NE(a.fuser().get_if<GluFuser<double>>(), nullptr);
  EXPECT_EQ(a.fuser().get_if<ConcatFuser<double>>(), nullptr);
  EXPECT_STREQ(a.fuser().type_name(), "glu");
  EXPECT_TRUE(a.feedback());
  ASSERT_NE(a.blocks[0].get_if<DecoderBlock<double>>(), nullptr);
  EXPECT_EQ(a.blocks[0].type_name(), "decoder");
  Model<double> b = a;  // a copy: its pieces are its own
  EXPECT_NE(b.fuser().get_if<GluFuser<double>>(), a.fuser().get_if<GluFuser<double>>());
  EXPECT_EQ(b.fuser().get_if<GluFuser<double>>()->w_u, a.fuser().get_if<GluFuser<double>>()->w_u);
  EXPECT_FALSE(Model<double>(tiny_config("none"), 1).feedback());
  // a slot of the default: the baseline's NoFuser
  EXPECT_STREQ(AnyFuser<float>().type_name(), "none");
  EXPECT_FALSE(AnyFuser<float>().feedback());
}

TEST(AnyPiece, RegistriesKnowPiecesByName) {
  const auto names = fuser_registry<double>().names();
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4), (std::vector<std::string>{"none", "glu", "gated_add", "concat"}));
  // FBT_REGISTER_FUSER above: known at the first look-up, for float and double
  EXPECT_TRUE(fuser_registry<double>().known("test_sum"));
  EXPECT_TRUE(fuser_registry<float>().known("test_sum"));
  Model<double> m(tiny_config("test_sum"), 1);
  EXPECT_STREQ(m.fuser().type_name(), "test_sum");
  EXPECT_EQ(m.params.size(), Model<double>(tiny_config("none"), 1).params.size() + std::size_t(tiny_config().hidden_size))
      << "N_in's gain and no tensor of its own";
  // the same type again: nothing; another type under a taken name: refused naming both
  EXPECT_NO_THROW(register_fuser<GluFuser<double>>());
  EXPECT_FBT_ERROR(register_fuser<ImpostorFuser<double>>(), "two fuser types are named \"glu\"", "this program");
  // an unknown name: the names this program knows and how to add one
  EXPECT_FBT_ERROR(Model<double>(tiny_config("gru"), 1), "unknown fuser \"gru\" (this program knows: none, glu, gated_add, concat", "--plugin",
                   "fbt.register_fuser");
  EXPECT_FBT_ERROR(block_registry<float>().info("nosuch"), "unknown block \"nosuch\"", "decoder");
}

TEST(AnyPiece, AnyBackendIsTheBackendItSees) {
  CpuBackend<float> cpu;
  BackendRef<CpuBackend<float>> ref(cpu);
  AnyBackend<float>& any = ref;
  EXPECT_STREQ(any.backend_name(), "cpu");
  EXPECT_EQ(any.attention_state_size(2, 5, 3), CpuBackend<float>::attention_state_size(2, 5, 3));
  std::vector<float> y{1, 2, 3}, x{10, 20, 30};
  any.add(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33}));
  std::vector<float> C(4, 0), A{1, 2, 3, 4}, B{1, 0, 0, 1};
  any.gemm(C.data(), 2, A.data(), 2, false, B.data(), 2, false, 2, 2, 2, false);  // C = A I
  EXPECT_EQ(C, A);
  // with_any_backend: a backend that is one already is passed as it is, another through a BackendRef
  with_any_backend(any, [&](AnyBackend<float>& a) { EXPECT_EQ(&a, &any); });
  with_any_backend(cpu, [&](AnyBackend<float>& a) { EXPECT_STREQ(a.backend_name(), "cpu"); });
}

}  // namespace test_layers_any_piece
