// fbt/train/probe.hpp: linear probes of a model's representations (arXiv:2608.08888 section 4.4, App. F;
// PROBING.md is the spec of record, docs/probing.md the guide).
//
// For each probe item (a token sequence, a label, a probe position p) and each prefill mode, the
// representation of position p is read at every depth of the stack:
//   depth 0        the layer-0 input (after the fuser and N_in: what block 0 reads)
//   depth l        block l-1's output = block l's input (l = 1..L; depth L = the last block's output, before
//                  the final norm)
//   depth L+1      the final norm's output (the state a default model feeds back)
// The prefill modes (decode/policy.hpp PrefillSpec) run the prompt x_0..x_p (later tokens cannot matter):
//   standard       one plain pass (the training forward, model/pass.hpp)
//   fused(k)       a plain pass and k fed-back passes (forward_chain)
//   recurrent      token by token with feedback (the decoder's recurrent prefill, decode/decoder.hpp: the
//                  first p tokens, then x_p as a fed-back step, read by Decoder::observe)
//   recurrent(k)   the last k tokens of x_0..x_p as fed-back steps after a plain pass over the others (the
//                  first p tokens prefilled recurrent(k-1), or standard when k = 1, then x_p as a fed-back step)
// Then per (mode, depth) a multinomial logistic regression with L2 (fit_logistic: L-BFGS in double on
// features z-scored with the training fold's statistics) is scored by k-fold cross-validation that holds
// out whole groups: accuracy = correct held-out predictions / all items, with a Wilson 95% interval and
// the chance level (the share of the most frequent label). Reading items from JSONL and writing the
// result as JSON: train/probe_io.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "../data/probe_tasks.hpp"
#include "../decode/decoder.hpp"
#include "evaluate.hpp"

namespace fbt {

// ---------------------------------------------------------------------------------------- classifier

/// \brief A multinomial logistic regression: class scores W x + b, W (C, F), b (C).
struct LogisticModel {
  Eigen::MatrixXd W;  // (C, F)
  Eigen::VectorXd b;  // (C)
  int iterations = 0;
  double grad_norm = 0;
  int predict(const Eigen::VectorXd& x) const {  // x (F)
    Eigen::VectorXd s = W * x + b;
    int k = 0;
    s.maxCoeff(&k);
    return k;
  }
};

/// \brief Fits a multinomial logistic regression minimising  lambda/2 ||W||^2 + sum_i -log softmax(W x_i + b)[y_i]
/// (the intercept b unpenalised) with L-BFGS (10 pairs, Armijo backtracking) until the gradient's max-norm is
/// below tol or max_iter iterations. X (n, F), y (n) in [0, C).
inline LogisticModel fit_logistic(const Eigen::MatrixXd& X, const std::vector<int>& y, int C, double lambda = 1.0, int max_iter = 500,
                                  double tol = 1e-6) {
  const int n = int(X.rows()), F = int(X.cols()), np = C * (F + 1);
  FBT_ASSERT(int(y.size()) == n && n > 0 && C >= 2, "fit_logistic: needs n > 0 rows, n labels and C >= 2 classes");
  // theta = [vec(W) column-major (C*F), b (C)]
  auto loss_grad = [&](const Eigen::VectorXd& th, Eigen::VectorXd& g) {
    Eigen::Map<const Eigen::MatrixXd> W(th.data(), C, F);
    Eigen::Map<const Eigen::VectorXd> b(th.data() + C * F, C);
    Eigen::MatrixXd S = (X * W.transpose()).rowwise() + b.transpose();  // (n, C) scores
    double loss = 0.5 * lambda * W.squaredNorm();
    for (int i = 0; i < n; ++i) {  // S becomes softmax - onehot, the gradient of the loss wrt the scores
      const double mx = S.row(i).maxCoeff();
      const double lse = mx + std::log((S.row(i).array() - mx).exp().sum());
      loss += lse - S(i, y[i]);
      S.row(i) = (S.row(i).array() - lse).exp();
      S(i, y[i]) -= 1.0;
    }
    g.resize(np);
    Eigen::Map<Eigen::MatrixXd> gW(g.data(), C, F);
    gW = S.transpose() * X + lambda * W;                  // (C, F)
    Eigen::Map<Eigen::VectorXd>(g.data() + C * F, C) = S.colwise().sum().transpose();
    return loss;
  };
  Eigen::VectorXd th = Eigen::VectorXd::Zero(np), g(np), g2(np);
  double f = loss_grad(th, g);
  std::vector<Eigen::VectorXd> ss, yy;
  std::vector<double> rho;
  LogisticModel out;
  int it = 0;
  for (; it < max_iter && g.lpNorm<Eigen::Infinity>() >= tol; ++it) {
    // two-loop recursion: d = -H g
    Eigen::VectorXd q = g;
    std::vector<double> alpha(ss.size());
    for (int j = int(ss.size()) - 1; j >= 0; --j) alpha[j] = rho[j] * ss[j].dot(q), q -= alpha[j] * yy[j];
    if (!ss.empty()) q *= ss.back().dot(yy.back()) / yy.back().squaredNorm();
    for (std::size_t j = 0; j < ss.size(); ++j) q += ss[j] * (alpha[j] - rho[j] * yy[j].dot(q));
    Eigen::VectorXd d = -q;
    if (d.dot(g) >= 0) d = -g, ss.clear(), yy.clear(), rho.clear();  // not a descent direction: restart
    double step = 1.0, f2 = 0;
    Eigen::VectorXd th2;
    for (int ls = 0; ls < 60; ++ls, step *= 0.5) {
      th2 = th + step * d;
      f2 = loss_grad(th2, g2);
      if (f2 <= f + 1e-4 * step * d.dot(g)) break;
    }
    const Eigen::VectorXd s = th2 - th, yv = g2 - g;
    th = th2, f = f2, g = g2;
    if (s.dot(yv) > 1e-12) {
      ss.push_back(s), yy.push_back(yv), rho.push_back(1.0 / s.dot(yv));
      if (ss.size() > 10) ss.erase(ss.begin()), yy.erase(yy.begin()), rho.erase(rho.begin());
    }
  }
  out.W = Eigen::Map<const Eigen::MatrixXd>(th.data(), C, F);
  out.b = Eigen::Map<const Eigen::VectorXd>(th.data() + C * F, C);
  out.iterations = it, out.grad_norm = g.lpNorm<Eigen::Infinity>();
  return out;
}

/// The Wilson score interval of k successes in n trials at z (1.96: 95%).
inline std::pair<double, double> wilson_interval(long k, long n, double z = 1.96) {
  if (n <= 0) return {0.0, 1.0};
  const double p = double(k) / n, z2 = z * z, den = 1 + z2 / n;
  const double mid = (p + z2 / (2.0 * n)) / den, half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / den;
  return {std::max(0.0, mid - half), std::min(1.0, mid + half)};
}

/// \brief Held-out accuracy of a probe by grouped k-fold cross-validation: the distinct group ids are
/// shuffled by Rng(seed) and dealt round-robin into `folds` folds; each fold is predicted by a probe fitted
/// on the others (features z-scored with the training folds' mean and standard deviation). Returns the
/// number of correct held-out predictions (every item is held out once).
inline long probe_cv_correct(const Eigen::MatrixXd& X, const std::vector<int>& y, const std::vector<std::int64_t>& group, int C, int folds,
                             double lambda, std::uint64_t seed) {
  const int n = int(X.rows()), F = int(X.cols());
  std::vector<std::int64_t> ids(group.begin(), group.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  FBT_ASSERT(int(ids.size()) >= folds && folds >= 2, "probe: " + std::to_string(ids.size()) + " groups cannot make " + std::to_string(folds) + " folds");
  Rng rng(seed);
  for (std::size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng.below(i)]);
  std::map<std::int64_t, int> fold_of;
  for (std::size_t i = 0; i < ids.size(); ++i) fold_of[ids[i]] = int(i % folds);
  long correct = 0;
  for (int f = 0; f < folds; ++f) {
    std::vector<int> tr, te;
    for (int i = 0; i < n; ++i) (fold_of[group[i]] == f ? te : tr).push_back(i);
    Eigen::MatrixXd Xtr(tr.size(), F);
    std::vector<int> ytr(tr.size());
    for (std::size_t i = 0; i < tr.size(); ++i) Xtr.row(i) = X.row(tr[i]), ytr[i] = y[tr[i]];
    const Eigen::RowVectorXd mu = Xtr.colwise().mean();
    Eigen::RowVectorXd sd = ((Xtr.rowwise() - mu).array().square().colwise().sum() / double(tr.size())).sqrt();
    for (int j = 0; j < F; ++j) sd[j] = sd[j] > 1e-12 ? sd[j] : 1.0;  // a constant feature stays 0
    Xtr = (Xtr.rowwise() - mu).array().rowwise() / sd.array();
    const LogisticModel lm = fit_logistic(Xtr, ytr, C, lambda);
    for (int i : te) correct += lm.predict(((X.row(i) - mu).array() / sd.array()).matrix().transpose()) == y[i];
  }
  return correct;
}

// ---------------------------------------------------------------------------------------- items

/// A probe item as token ids: what the model reads, the label's class index and the probe position.
struct ProbeExample {
  std::vector<int> tokens;
  int label = 0;
  int position = 0;  ///< token index in tokens
  std::int64_t group = 0;  ///< items of one group are held out together (any 64-bit id)
  std::string setting;
};

/// \brief Probe items of a built-in task as token ids (ByteTokenizer::encode_document: kSep + bytes),
/// labels numbered in order of first appearance into `classes`.
inline std::vector<ProbeExample> probe_examples(const std::vector<ProbeItem>& items, std::vector<std::string>& classes) {
  std::vector<ProbeExample> out;
  for (const ProbeItem& it : items) {
    ProbeExample e;
    e.tokens = ByteTokenizer::encode_document(it.text);
    e.position = it.position < 0 ? int(e.tokens.size()) - 1 : it.position + 1;
    auto c = std::find(classes.begin(), classes.end(), it.label);
    e.label = int(c - classes.begin());
    if (c == classes.end()) classes.push_back(it.label);
    e.group = it.group, e.setting = it.setting;
    out.push_back(std::move(e));
  }
  return out;
}

// ---------------------------------------------------------------------------------------- features

/// \brief The representation of each example's probe position at depths 0..L+1 under prefill `mode`
/// (standard, fused(k) or recurrent; not policy): out[depth] (n, D). The host model, on the CPU.
template <class M> std::vector<Eigen::MatrixXd> probe_features(const M& m, const std::vector<ProbeExample>& ex, const PrefillSpec& mode, int sep = kSep) {
  using T = typename M::Scalar;
  const int n = int(ex.size()), D = m.D, L = m.L;
  FBT_ASSERT(mode.kind != PrefillSpec::kPolicy, "probe_features: name the prefill (standard, fused(k) or recurrent)");
  FBT_ASSERT(mode.kind == PrefillSpec::kStandard || m.feedback(), "prefill " + mode.describe() + " needs a feedback fuser (the model's fuser is none)");
  std::vector<Eigen::MatrixXd> out(L + 2, Eigen::MatrixXd(n, D));
  auto put = [&](int depth, int i, const T* row) {
    for (int d = 0; d < D; ++d) out[depth](i, d) = double(row[d]);
  };
  CpuBackend<T> be;
  Workspace<M> ws;
  Decoder<M> dec(m, sep);
  int capture = -1;  // the example whose last step the decoder's observer records
  dec.observe = [&](int depth, const T* rows, int) {
    if (capture >= 0) put(depth, capture, rows);
  };
  // recurrent(k): x_0..x_{p-1} prefilled recurrent(k-1) (standard for k = 1), then x_p as the k-th fed-back step
  PrefillSpec before = mode;
  if (mode.kind == PrefillSpec::kRecurrent && mode.k == 1) before = PrefillSpec::parse("standard");
  else if (mode.kind == PrefillSpec::kRecurrent && mode.k > 1) before.k = mode.k - 1;
  const DecodeModeSpec rec = DecodeModeSpec::parse("soft").with_prefill(before);
  std::vector<T> logits(m.V);
  std::vector<int> all_depths(L + 2);
  for (int l = 0; l <= L + 1; ++l) all_depths[l] = l;
  std::vector<T> states;  // (L + 2, P, D) one example's states at every depth
  for (int i = 0; i < n; ++i) {
    const ProbeExample& e = ex[i];
    const int P = e.position + 1;  // causal: x_0..x_p decide position p
    FBT_ASSERT(e.position >= 0 && e.position < int(e.tokens.size()), "probe example " + std::to_string(i) + ": position outside the tokens");
    if (mode.kind == PrefillSpec::kRecurrent && P > 1) {
      auto s = dec.new_sequence(P, rec);
      dec.prefill(s, e.tokens.data(), P - 1, logits.data());
      auto* sp = &s;
      capture = i;
      dec.step(&sp, 1, &e.tokens[P - 1], logits.data());  // a soft step: x_p fused with the exact state of p-1
      capture = -1;
      continue;
    }
    const int passes = mode.kind == PrefillSpec::kFused ? 1 + mode.k : 1;
    std::vector<std::uint8_t> docs(P, 0);
    for (int t = 0; t < P; ++t) docs[t] = t == 0 || e.tokens[t] == sep;
    states.resize(all_depths.size() * std::size_t(P) * D);  // (L + 2, P, D)
    pass_hidden_states(states.data(), be, ws, m, Batch{1, P, e.tokens.data(), nullptr, docs.data()}, passes, all_depths);
    for (int l = 0; l <= L + 1; ++l) put(l, i, states.data() + (std::size_t(l) * P + P - 1) * D);
  }
  return out;
}

// ---------------------------------------------------------------------------------------- the probe

struct ProbeOptions {
  std::vector<std::string> modes = {"standard", "fused(1)", "recurrent"};  ///< prefills (PrefillSpec::parse)
  int folds = 4;
  double lambda = 1.0;       ///< L2 weight (1/C of sklearn's C = 1)
  std::uint64_t seed = 1;    ///< the fold assignment
  bool per_setting = true;   ///< also fit one probe per setting (N, m/W) when the items have several
};

struct ProbeCell {
  std::string mode, setting;  ///< setting "" = all items pooled
  int depth = 0;
  long correct = 0, n = 0;
  double accuracy = 0, lo = 0, hi = 0;
};

struct ProbeResult {
  std::vector<std::string> classes;
  double chance = 0;  ///< share of the most frequent label
  int depths = 0;     ///< L + 2
  std::vector<ProbeCell> cells;
  std::vector<std::string> skipped;  ///< modes the model cannot run (a baseline's feedback prefills)
};

/// \brief Refuses (fbt::Error, one line) a set of probe items no probe can be scored on, before any feature is
/// computed: fewer than 2 classes (a one-class probe is right by construction: accuracy 1 at chance 1), fewer
/// distinct groups than folds, in all the items or (per_setting) in one setting's.
inline void check_probe_items(const std::vector<ProbeExample>& ex, const std::vector<std::string>& classes, const ProbeOptions& o) {
  if (ex.empty()) throw Error("probe: no items");
  if (classes.size() < 2)
    throw Error("probe: the items have " + std::to_string(classes.size()) + " class" + (classes.empty() ? "es" : " (" + detail::excerpt(classes[0]) + ")") +
                ": a probe needs at least 2 (one class is predicted right by construction, accuracy 1 at chance 1)");
  if (o.folds < 2) throw Error("probe: folds must be >= 2, got " + std::to_string(o.folds));
  std::map<std::string, std::set<std::int64_t>> groups;  // "" = all items
  for (const auto& e : ex) {
    groups[""].insert(e.group);
    if (o.per_setting) groups[e.setting].insert(e.group);
  }
  const bool several = groups.size() > 2 || (groups.size() == 2 && !groups.count(""));
  for (const auto& g : groups) {
    if (!g.first.empty() && !several) continue;
    if (int(g.second.size()) < o.folds)
      throw Error("probe: " + (g.first.empty() ? std::string("the items hold ") : "setting \"" + detail::excerpt(g.first) + "\" holds ") +
                  std::to_string(g.second.size()) + " distinct group(s), fewer than the " + std::to_string(o.folds) +
                  " folds of the cross-validation (give more items or groups, or fewer folds)");
  }
}

/// \brief Probes a model: features per (mode, depth), grouped cross-validated accuracy, Wilson intervals.
template <class M> ProbeResult run_probe(const M& m, const std::vector<ProbeExample>& ex, const std::vector<std::string>& classes, const ProbeOptions& o,
                                         int sep = kSep) {
  ProbeResult r;
  r.classes = classes, r.depths = m.L + 2;
  const int n = int(ex.size()), C = std::max<int>(2, int(classes.size()));
  std::vector<int> y(n), count(C, 0);
  std::vector<std::int64_t> group(n);
  std::vector<std::string> settings;
  for (int i = 0; i < n; ++i) {
    y[i] = ex[i].label, group[i] = ex[i].group, ++count[y[i]];
    if (std::find(settings.begin(), settings.end(), ex[i].setting) == settings.end()) settings.push_back(ex[i].setting);
  }
  r.chance = double(*std::max_element(count.begin(), count.end())) / n;
  check_probe_items(ex, classes, o);  // before any feature is computed: a bad set is refused at once
  for (const std::string& ms : o.modes) {
    const PrefillSpec p = PrefillSpec::parse(ms);
    if (p.kind != PrefillSpec::kStandard && !m.feedback()) {
      r.skipped.push_back(p.describe());
      continue;
    }
    const std::vector<Eigen::MatrixXd> feats = probe_features(m, ex, p, sep);
    for (int dpt = 0; dpt < r.depths; ++dpt) {
      auto cell = [&](const std::string& setting, const std::vector<int>& rows) {
        Eigen::MatrixXd X(rows.size(), m.D);
        std::vector<int> yy(rows.size());
        std::vector<std::int64_t> gg(rows.size());
        for (std::size_t i = 0; i < rows.size(); ++i) X.row(i) = feats[dpt].row(rows[i]), yy[i] = y[rows[i]], gg[i] = group[rows[i]];
        ProbeCell c;
        c.mode = p.describe(), c.setting = setting, c.depth = dpt, c.n = long(rows.size());
        c.correct = probe_cv_correct(X, yy, gg, C, o.folds, o.lambda, o.seed);
        c.accuracy = double(c.correct) / c.n;
        std::tie(c.lo, c.hi) = wilson_interval(c.correct, c.n);
        r.cells.push_back(c);
      };
      std::vector<int> all(n);
      for (int i = 0; i < n; ++i) all[i] = i;
      cell("", all);
      if (o.per_setting && settings.size() > 1)
        for (const std::string& s : settings) {
          std::vector<int> rows;
          for (int i = 0; i < n; ++i)
            if (ex[i].setting == s) rows.push_back(i);
          cell(s, rows);
        }
    }
  }
  return r;
}

}  // namespace fbt
