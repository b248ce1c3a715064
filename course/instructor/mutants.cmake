# course/instructor/mutants.cmake: the mutants of the exercises' solutions, as substitutions.
#
# A mutant is the solution course/instructor/solutions/<name>.hpp with one deliberate bug. It is not kept
# as a copy: exercises/CMakeLists.txt generates it at configure time (into the build directory) from the
# solution and the substitution below, and fails the configure when the text to replace is not found
# exactly once (so a changed solution cannot silently produce a mutant without its bug).
#
#   fbt_course_mutant(<name> <bug> <expected output> <text> <replacement> [<text2> <replacement2>])
#
# The ctest test exercises.<name>.mutant_<bug> runs the checker on the mutant and passes when its output
# matches <expected output> (a regular expression): the diagnosis that names this bug. This is what proves
# that a check can fail, and that it tells the bugs apart.

# ---- E1, the backward of the concat fuser ---------------------------------------------------------------
fbt_course_mutant(concat_backward no_mean "diagnosis: the RMSNorm backward misses its mean term"
  [==[      dxr[c] += r[n] * (dyr[c] * gain[c] - xhat * proj);]==]
  [==[      dxr[c] += r[n] * dyr[c] * gain[c];  // BUG: no mean term
      (void)xhat, (void)proj;]==])
fbt_course_mutant(concat_backward no_gain "diagnosis: the RMSNorm backward misses the gain"
  [==[    for (int c = 0; c < D; ++c) proj += dyr[c] * gain[c] * xr[c] * r[n];]==]
  [==[    (void)gain;
    for (int c = 0; c < D; ++c) proj += dyr[c] * xr[c] * r[n];  // BUG: no gain]==]
  [==[      dxr[c] += r[n] * (dyr[c] * gain[c] - xhat * proj);]==]
  [==[      dxr[c] += r[n] * (dyr[c] - xhat * proj);  // BUG: no gain]==])
fbt_course_mutant(concat_backward swap_halves "diagnosis: the two halves of W_c are swapped"
  [==[        dw[c] += d * cache.ns[std::size_t(n) * D + c];      // left half: the state part
        dw[D + c] += d * cache.ng[std::size_t(n) * D + c];  // right half: the embedding part
        dns[std::size_t(n) * D + c] += d * w[c];
        dng[std::size_t(n) * D + c] += d * w[D + c];]==]
  [==[        dw[c] += d * cache.ng[std::size_t(n) * D + c];  // BUG: halves swapped
        dw[D + c] += d * cache.ns[std::size_t(n) * D + c];
        dns[std::size_t(n) * D + c] += d * w[D + c];
        dng[std::size_t(n) * D + c] += d * w[c];]==])
fbt_course_mutant(concat_backward overwrite "diagnosis: your backward overwrites \\(=\\) instead of accumulating \\(\\+=\\): ds, de"
  [==[      dxr[c] += r[n] * (dyr[c] * gain[c] - xhat * proj);]==]
  [==[      dxr[c] = r[n] * (dyr[c] * gain[c] - xhat * proj);  // BUG: = instead of +=]==])

# ---- E2, the backward of a K-pass chain -----------------------------------------------------------------
set(FBT_COURSE_CHAIN_CARRY_LOOP [==[    if (j > 0)
      for (int b = 0; b < p.B; ++b)
        for (int t = 1; t < p.T_; ++t)  // t = 0 had no source; t-1 never leaves sequence b
          for (int k = 0; k < D; ++k) carry[(std::size_t(b) * p.T_ + t - 1) * D + k] += dS[(std::size_t(b) * p.T_ + t) * D + k];]==])
set(FBT_COURSE_CHAIN_DZ [==[    for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = (c * R[i] + carry[i]) * (T(1) - H[i] * H[i]);]==])
fbt_course_mutant(chain_backward no_carry "diagnosis: your gradient does not reach earlier passes"
  "${FBT_COURSE_CHAIN_CARRY_LOOP}"
  [==[    // BUG: no carry for pass j-1]==])
fbt_course_mutant(chain_backward leak "diagnosis: the carry leaks across sequences"
  "${FBT_COURSE_CHAIN_CARRY_LOOP}"
  [==[    if (j > 0)  // BUG: over all rows, across the sequence boundaries
      for (int n = 1; n < N; ++n)
        for (int k = 0; k < D; ++k) carry[std::size_t(n - 1) * D + k] += dS[std::size_t(n) * D + k];]==])
fbt_course_mutant(chain_backward wrong_way "diagnosis: the shift goes the wrong way"
  "${FBT_COURSE_CHAIN_CARRY_LOOP}"
  [==[    if (j > 0)  // BUG: t -> t+1 instead of t -> t-1
      for (int b = 0; b < p.B; ++b)
        for (int t = 0; t + 1 < p.T_; ++t)
          for (int k = 0; k < D; ++k) carry[(std::size_t(b) * p.T_ + t + 1) * D + k] += dS[(std::size_t(b) * p.T_ + t) * D + k];]==])
fbt_course_mutant(chain_backward no_shift "diagnosis: the carry is not shifted"
  "${FBT_COURSE_CHAIN_CARRY_LOOP}"
  [==[    if (j > 0)  // BUG: no shift
      for (std::size_t i = 0; i < carry.size(); ++i) carry[i] += dS[i];]==])
fbt_course_mutant(chain_backward forwards "diagnosis: the passes are walked forwards"
  [==[  for (int j = p.K - 1; j >= 0; --j) {]==]
  [==[  for (int j = 0; j < p.K; ++j) {  // BUG: forwards]==])
fbt_course_mutant(chain_backward no_weight "diagnosis: the pass weight is missing"
  "${FBT_COURSE_CHAIN_DZ}"
  [==[    for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = (R[i] + carry[i]) * (T(1) - H[i] * H[i]);  // BUG: no c_j]==])
fbt_course_mutant(chain_backward after_deriv "diagnosis: the carry is added after tanh'"
  "${FBT_COURSE_CHAIN_DZ}"
  [==[    for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = c * R[i] * (T(1) - H[i] * H[i]) + carry[i];  // BUG: carry after tanh']==])
fbt_course_mutant(chain_backward weight_on_carry "diagnosis: the pass weight c_j multiplies the carry too"
  "${FBT_COURSE_CHAIN_DZ}"
  [==[    for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = c * (R[i] + carry[i]) * (T(1) - H[i] * H[i]);  // BUG: c_j on the carry]==])
fbt_course_mutant(chain_backward no_reset "diagnosis: the carry is not reset between passes"
  [==[    std::fill(carry.begin(), carry.end(), T(0));]==]
  [==[    // BUG: the carry is not reset: pass j-1 also receives what pass j received]==])
fbt_course_mutant(chain_backward overwrite "diagnosis: dX is overwritten \\(=\\), not accumulated \\(\\+=\\)"
  [==[          dX[std::size_t(n) * D + k] += d * p.A[std::size_t(o) * D + k];]==]
  [==[          dX[std::size_t(n) * D + k] = d * p.A[std::size_t(o) * D + k];  // BUG: = instead of +=]==])

# ---- E5, the gated residual fuser -----------------------------------------------------------------------
fbt_course_mutant(gated_residual ds_gate "diagnosis: ds misses the gate's state half"
  [==[    fbt::linear_backward(be, ds, w.grad + w_g, c.dz, s, w.value + w_g, N, D, D, 2 * D);          // z: state half]==]
  [==[    fbt::linear_backward(be, (T*)nullptr, w.grad + w_g, c.dz, s, w.value + w_g, N, D, D, 2 * D);  // BUG: ds misses dz W_gs]==])
fbt_course_mutant(gated_residual gate_sign "diagnosis: the sigmoid's derivative has the wrong sign"
  [==[      c.dz[i] = du[i] * c.a[i] * c.g[i] * (T(1) - c.g[i]);  // dLoss/dz     (N, D)]==]
  [==[      c.dz[i] = -du[i] * c.a[i] * c.g[i] * (T(1) - c.g[i]);  // BUG: wrong sign]==])
fbt_course_mutant(gated_residual de_residual "diagnosis: de misses the residual path"
  [==[      de[i] += du[i];                                      // u = e + ...]==]
  [==[      // BUG: the residual path de += du is missing]==])
fbt_course_mutant(gated_residual overwrite "diagnosis: de is overwritten \\(=\\), not accumulated \\(\\+=\\)"
  [==[      de[i] += du[i];                                      // u = e + ...]==]
  [==[      de[i] = du[i];  // BUG: = instead of +=]==])
fbt_course_mutant(gated_residual gate_in_temp "diagnosis: \\(a\\) passes, \\(b\\) fails: is a cache slice in temp"
  [==[    c.a = keep.take(ND), c.g = keep.take(ND);]==]
  [==[    c.a = keep.take(ND), c.g = temp.take(ND);  // BUG: the gate, which backward reads, in temp]==])

# ---- E6, the backward of the GLU fuser ------------------------------------------------------------------
fbt_course_mutant(glu_backward no_sigmoid_deriv "diagnosis: the sigmoid's derivative is missing"
  [==[    dpre[i] = du[i] * cache.a[i] * gate * (T(1) - gate);  // sigmoid'(pre) = gate (1 - gate)]==]
  [==[    dpre[i] = du[i] * cache.a[i];  // BUG: no sigmoid'(pre)]==])
fbt_course_mutant(glu_backward swap_inputs "diagnosis: the inputs of the two matrices are swapped in dW_U and dW_G"
  [==[        g.w_u[std::size_t(o) * D + c] += da_no * s[std::size_t(n) * D + c];]==]
  [==[        g.w_u[std::size_t(o) * D + c] += da_no * cache.ng[std::size_t(n) * D + c];  // BUG: W_G's input]==]
  [==[        g.w_g[std::size_t(o) * D + c] += dp_no * cache.ng[std::size_t(n) * D + c];]==]
  [==[        g.w_g[std::size_t(o) * D + c] += dp_no * s[std::size_t(n) * D + c];  // BUG: W_U's input]==])
fbt_course_mutant(glu_backward transpose_wu "diagnosis: dW_U is transposed"
  [==[        g.w_u[std::size_t(o) * D + c] += da_no * s[std::size_t(n) * D + c];]==]
  [==[        g.w_u[std::size_t(c) * D + o] += da_no * s[std::size_t(n) * D + c];  // BUG: transposed]==])
fbt_course_mutant(glu_backward no_mean "diagnosis: the RMSNorm backward of N_g misses its mean term"
  [==[      de[std::size_t(n) * D + c] += r * (dngr[c] * p.g_g[c] - ehat * proj);]==]
  [==[      de[std::size_t(n) * D + c] += r * dngr[c] * p.g_g[c];  // BUG: no mean term
      (void)proj;]==])
fbt_course_mutant(glu_backward no_gain "diagnosis: the RMSNorm backward of N_g misses the gain g_g"
  [==[    for (int c = 0; c < D; ++c) proj += dngr[c] * p.g_g[c] * er[c] * r / T(D);]==]
  [==[    for (int c = 0; c < D; ++c) proj += dngr[c] * er[c] * r / T(D);  // BUG: no gain]==]
  [==[      de[std::size_t(n) * D + c] += r * (dngr[c] * p.g_g[c] - ehat * proj);]==]
  [==[      de[std::size_t(n) * D + c] += r * (dngr[c] - ehat * proj);  // BUG: no gain]==])
fbt_course_mutant(glu_backward overwrite "diagnosis: de is overwritten \\(=\\), not accumulated \\(\\+=\\)"
  [==[      de[std::size_t(n) * D + c] += r * (dngr[c] * p.g_g[c] - ehat * proj);]==]
  [==[      de[std::size_t(n) * D + c] = r * (dngr[c] * p.g_g[c] - ehat * proj);  // BUG: = instead of +=]==])
