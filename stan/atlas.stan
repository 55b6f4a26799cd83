// Benchmark Atlas capability model (see docs/model.md for the prose version
// and the measured parametrization alternatives).
//
// Expected score of reasoning state s = (m, r) on family j:
//   E[u] = c_j + (1 - c_j) * inv_logit(beta_j * (phi_s - b_j)),
//   beta_j = exp(lambda_j),  phi_s = theta_m + gamma_s.
// Must compile under Stan 2.35 (PyStan 3.10) and current CmdStan: no
// sum_to_zero_vector or other post-2.35 features.
//
// Parametrization (measured by bench/bench_fit.py, figures in docs/model.md):
// exact standardisation of the reference capabilities on a sphere (Helmert
// map, shaped radius); difficulty through the family intercept at its data
// centre (`shift_b`); log-discrimination, log-dispersion and shared setting
// effects centred; per-model reasoning terms non-centred; Stan `multiplier`
// preconditioning. Real-size simulated panel (N=2,462, S=460, J=40), 4 x
// (1000 + 1000): step size ~0.13, tree depth 5, 0 divergences, min bulk ESS
// ~970 over theta/phi/beta/b, ~150 s sampling on 2 cores with PyStan
// (all non-centred: step 0.02-0.03, tree depth 7-8, 3x the gradients).
// Production samples through the affine preconditioner below (P_pc > 0):
// every unconstrained block and every positive scale (softplus link) whitened
// by an earlier posterior (its marginal sds and its widest correlated
// directions, a diagonal-plus-low-rank map), then shrunk along its stiff
// directions.

functions {
  // Shapes (a, b) = (kappa p, kappa (1 - p)) of a bounded score's beta or
  // beta-binomial, p = c + (1 - c) inv_logit(eta) with floor c and w = 1 - c;
  // 1 - p is computed as w inv_logit(-eta), so neither loses precision near 1.
  tuple(vector, vector) bounded_shapes(vector eta, vector kap, vector c, vector w) {
    return (kap .* fma(w, inv_logit(eta), c), kap .* (w .* inv_logit(-eta)));
  }

  // Isometric map from R^(n-1) onto the sum-to-zero subspace of R^n using the
  // (normalised) Helmert basis, in O(n): column k of the basis holds
  // 1/sqrt(k(k+1)) in rows 1..k and -k/sqrt(k(k+1)) in row k+1.
  // `w_scaled` is w .* (1 ./ sqrt(k .* (k + 1))), `k` = 1..n-1.
  vector helmert_sum_zero(vector w_scaled, vector k) {
    int n = rows(w_scaled) + 1;
    vector[n] x = append_row(reverse(cumulative_sum(reverse(w_scaled))), 0);
    x[2:n] -= k .* w_scaled;
    return x;
  }

  // Conditional centring (data block, amp_hat): z = sd r prec hat + sqrt(r) u,
  // r = 1 / (1 + sd^2 prec), elementwise; prec = 0 gives z = u.
  vector centred_z(vector u, vector sd, vector hat, vector prec) {
    vector[rows(u)] r = inv(1 + square(sd) .* prec);
    return sd .* r .* prec .* hat + sqrt(r) .* u;
  }

  // log |dz/du| of centred_z: sum of log sqrt(r)
  real centring_log_jacobian(vector sd, vector prec) {
    return -0.5 * sum(log1p(square(sd) .* prec));
  }
}

data {
  // ---- sizes -------------------------------------------------------------
  int<lower=1> N;                       // observations (state x family cells)
  int<lower=1> M;                       // models
  int<lower=1> S;                       // reasoning states
  int<lower=1> J;                       // families
  array[N] int<lower=1, upper=S> obs_state;
  array[N] int<lower=1, upper=J> obs_family;
  array[S] int<lower=1, upper=M> state_model;
  vector<lower=0, upper=1>[J] floor_c;  // guessing floor per family (0 for ratings)

  // ---- capability identification ----------------------------------------
  // Models with an observed default state are the reference population whose
  // capability is standardised to mean 0, sd 1 exactly; the others are free.
  int<lower=3> M_ref;
  array[M_ref] int<lower=1, upper=M> ref_model;
  array[M - M_ref] int<lower=1, upper=M> free_model;
  // setting code of the pinned state of each free model: never 0 (default) in the data build, where a model with a
  // default state is a reference model; 0 where a warm refit places a new reference model as a free one first
  // (model/placement.py with_models_free)
  array[M - M_ref] int<lower=0> free_pin_setting;

  // ---- reasoning effects ---------------------------------------------------
  int<lower=1> L;                        // ladder levels (minimal..max)
  int<lower=0> K_off;                    // off-ladder settings (disabled, enabled)
  // setting of each state: 0 = default, 1..L ladder, L+1..L+K_off off-ladder
  array[S] int<lower=0, upper=L + K_off> state_setting;
  int<lower=0> A;                        // models carrying ladder amplitude/curvature
  array[S] int<lower=0, upper=A> state_amp;  // 0 = no per-model ladder term
  vector[S] d_lin;                       // linear contrast minus the pinned state's
  vector[S] d_quad;                      // quadratic contrast minus the pinned state's
  int<lower=0> D;                        // non-pinned off-ladder states (free deviation)
  array[S] int<lower=0, upper=D> state_dev;  // 0 = no free deviation
  array[D] int<lower=1, upper=K_off> dev_setting;

  // ---- observations, split by likelihood piece ----------------------------
  // countable bounded (beta-binomial), non-zero or in a family with a floor
  int<lower=0> N_bb;
  array[N_bb] int<lower=1, upper=N> bb_idx;
  array[N_bb] int<lower=0> bb_k;
  array[N_bb] int<lower=1> bb_n;
  // countable exact zeros in floor-free families (zero-inflated beta-binomial)
  int<lower=0> N_bbz;
  array[N_bbz] int<lower=1, upper=N> bbz_idx;
  array[N_bbz] int<lower=1> bbz_n;
  // continuous bounded values strictly inside (0, 1) (beta)
  int<lower=0> N_bt;
  array[N_bt] int<lower=1, upper=N> bt_idx;
  vector<lower=0, upper=1>[N_bt] bt_u;
  // continuous exact ones: interval-censored at 1 - one_eps (beta tail)
  int<lower=0> N_one;
  array[N_one] int<lower=1, upper=N> one_idx;
  real<lower=0, upper=0.5> one_eps;
  // log of the cap at which a bounded family's dispersion saturates (0: none): 1 / kappa = exp(-log kappa) +
  // 1 / kappa_max. Past ~1e7 the beta-binomial is a binomial for any item count here and the log-beta differences
  // lose every digit (at kappa ~1e18 the log density came out ~3,800 above the typical set; docs/model.md, stop 27)
  real<lower=0> log_kappa_max;
  // continuous exact zeros (hurdle point mass), floor-free families only
  int<lower=0> N_zero;
  array[N_zero] int<lower=1, upper=N> zero_idx;
  // bounded non-zero observations in floor-free families: they cleared the
  // zero hurdle (countable or continuous)
  int<lower=0> N_nz;
  array[N_nz] int<lower=1, upper=N> nz_idx;
  // ratings, standardised within family
  int<lower=0> N_rt;
  array[N_rt] int<lower=1, upper=N> rt_idx;
  vector[N_rt] rt_y;
  // bounded families carry a dispersion kappa, rating families a residual sd
  int<lower=0> J_b;
  int<lower=0> J_r;
  array[J] int<lower=0, upper=J_b> fam_bpos;   // position among bounded families
  array[J] int<lower=0, upper=J_r> fam_rpos;   // position among rating families

  // ---- prior scales (from config) -----------------------------------------
  real prior_b_mu_loc;
  real<lower=0> prior_b_mu_scale;
  real<lower=0> prior_b_sd_scale;
  real prior_lambda_mu_loc;
  real<lower=0> prior_lambda_mu_scale;
  real<lower=0> prior_lambda_sd_scale;
  real prior_logkappa_mu_loc;
  real<lower=0> prior_logkappa_mu_scale;
  real<lower=0> prior_logkappa_sd_scale;
  real<lower=0> prior_rating_sd_scale;
  real prior_hurdle_a_loc;
  real<lower=0> prior_hurdle_a_scale;
  real<lower=0> prior_hurdle_b_scale;
  real<lower=0> prior_shared_effect_scale;   // HalfNormal scale of the shared-effect sd
  real<lower=0> prior_amp_scale;             // HalfNormal scale of per-model amplitude sd
  real<lower=0> prior_curv_scale;            // HalfNormal scale of per-model curvature sd
  real<lower=0> prior_offdev_scale;          // HalfNormal scale of per-setting deviation sd

  // ---- parametrization switches (measured in docs/model.md) ---------------
  // 1 = non-centred (x = mu + sd * z, z ~ N(0,1)); 0 = centred (x ~ N(mu, sd))
  int<lower=0, upper=1> nc_b;
  // 1 = difficulty sampled through the family's intercept at its own data
  // centre, a_j = beta_j (pbar_j - b_j), pbar_j = mean capability of the
  // states observed on j (removes the b-beta ridge; centred prior on b with
  // its Jacobian). Overrides nc_b.
  int<lower=0, upper=1> shift_b;
  // sparse J x S averaging matrix (CSR) giving pbar = fam_avg * phi
  int<lower=0> n_avg;
  vector[n_avg] avg_w;
  array[n_avg] int<lower=1, upper=S> avg_v;
  array[J + 1] int<lower=1> avg_u;
  int<lower=0, upper=1> nc_lambda;
  int<lower=0, upper=1> nc_logkappa;
  // sd of the radius of the raw capability vector around sqrt(M_ref - 1);
  // 0 = plain std_normal raw vector (radius ~ chi). The radius never reaches
  // the likelihood; shaping it only changes how the sampler sees it.
  real<lower=0> radial_sd;
  // expected posterior scale of each block of parameters: used as Stan's
  // `multiplier` so the sampler starts warmup on roughly unit-scale
  // coordinates (changes the unconstrained coordinates only, not the model)
  real<lower=0> scale_capability;
  real<lower=0> scale_b;
  real<lower=0> scale_lambda;
  real<lower=0> scale_logkappa;
  real<lower=0> scale_shared;

  // ---- affine preconditioner from an earlier posterior (0 = off) ------------
  // The unconstrained blocks listed in transformed parameters, stacked in that
  // order (P_pc = their total length), are x = pc_loc + A pc_z with pc_z the
  // sampled coordinates: pc_loc and A are an earlier fit's posterior mean and
  // a square root of its (shrunk) covariance, carried to this data by name and
  // shrunk along directions where the log density is stiffer than that
  // covariance (atlas_assets/model/precondition.py). A constant Jacobian, so
  // the posterior is unchanged; the sampler sees a near-isotropic posterior in
  // which the slow top-tail direction is one unit coordinate. A comes in one
  // of two forms:
  //  - dense (P_dense = P_pc): A = pc_chol, O(P^2) per gradient;
  //  - diagonal plus low rank (P_dense = 0): A = diag(pc_scale) (I + pc_left
  //    pc_right_t), K_pc directions, O(P K) per gradient (docs/model.md: the
  //    dense product and its copy onto Stan's arena made each gradient
  //    superlinear in the panel's size).
  int<lower=0> P_pc;
  vector[P_pc] pc_loc;
  int<lower=0> P_dense;
  matrix[P_dense, P_dense] pc_chol;
  vector[P_dense > 0 ? 0 : P_pc] pc_scale;
  int<lower=0> K_pc;
  matrix[P_dense > 0 ? 0 : P_pc, K_pc] pc_left;
  matrix[K_pc, P_dense > 0 ? 0 : P_pc] pc_right_t;
  // how the preconditioned block reaches the positive scales: 0 = exp (log
  // scale), 1 = softplus. A scale whose upper tail the likelihood bounds
  // (hurdle_b: P(zero) at very negative eta; curv_sd) meets that bound
  // exponentially on the log scale, and the wall's curvature caps the step
  // size; softplus is log-like near 0 and linear above, so the wall stays
  // polynomial. Either is a change of variables: the posterior is the same.
  int<lower=0, upper=1> scale_softplus;
  // conditional centring of the per-model ladder terms and off-ladder
  // deviations (z = m / sd, m ~ N(0, sd)). With a unit's likelihood for m
  // approximated as N(hat | m, 1 / prec) (fitted to an earlier posterior's
  // draws, precondition.conditional_centring), z given sd is
  // N(sd r prec hat, r), r = 1 / (1 + sd^2 prec), and the sampled coordinate
  // is u = (z - sd r prec hat) / sqrt(r): unit scale at every sd. Plain
  // non-centring (z = u) makes z stiffen as sd^2 prec where a large sd lets
  // the data pin m (the funnel's wide end, which capped the step size,
  // docs/model.md); centring would meet the neck near sd = 0 instead. prec = 0
  // is plain non-centring. A change of variables with its Jacobian: the
  // posterior is unchanged.
  vector[A] amp_hat;
  vector<lower=0>[A] amp_prec;
  vector[A] curv_hat;
  vector<lower=0>[A] curv_prec;
  vector[D] dev_hat;
  vector<lower=0>[D] dev_prec;

  // ---- output switches ------------------------------------------------------
  int<lower=0, upper=1> emit_obs;   // per-observation mu, log_lik, u_rep
}

transformed data {
  vector[M_ref - 1] helm_k = linspaced_vector(M_ref - 1, 1, M_ref - 1);
  vector[M_ref - 1] helm_scale = inv_sqrt(helm_k .* (helm_k + 1));
  real ref_scale = sqrt(M_ref - 1.0);
  vector[J] log1m_floor = log1m(floor_c);
  int N_out = emit_obs ? N : 0;
  // 1-based positions into the zero-padded effect vectors below
  array[S] int set1;
  array[S] int amp1;
  array[S] int dev1;
  array[M - M_ref] int free_pin1;
  int use_pc = P_pc > 0;
  // SCALE_ORDER: b_sd, lambda_sd, logkappa_sd, hurdle_b, shared_sd, amp_sd,
  // curv_sd, offdev_sd[1:K_off], rating_sd[1:J_r] (shared with precondition.py)
  int n_scale = 7 + K_off + J_r;
  if (use_pc && P_pc != (M_ref - 1) + (M - M_ref) + 2 * J + J_b + L + K_off + 4 + n_scale + 2 * A + D)
    reject("P_pc must equal the stacked length of the preconditioned blocks");
  if (P_dense != 0 && P_dense != P_pc)
    reject("P_dense must be 0 (diagonal plus low-rank map) or P_pc (dense map)");
  for (m in 1:(M - M_ref)) free_pin1[m] = free_pin_setting[m] + 1;
  for (s in 1:S) {
    set1[s] = state_setting[s] + 1;
    amp1[s] = state_amp[s] + 1;
    dev1[s] = state_dev[s] + 1;
  }

  // ---- the bounded likelihood's data, laid out once -------------------------
  // Per observation: its dispersion's position, its family's floor c and 1 - c.
  array[N_bb] int bb_fam = fam_bpos[obs_family[bb_idx]];
  vector[N_bb] bb_c = floor_c[obs_family[bb_idx]];
  vector[N_bb] bb_w = 1 - bb_c;
  array[N_bt] int bt_fam = fam_bpos[obs_family[bt_idx]];
  vector[N_bt] bt_c = floor_c[obs_family[bt_idx]];
  vector[N_bt] bt_w = 1 - bt_c;
  vector[N_bt] bt_log_u = log(bt_u);
  vector[N_bt] bt_log1m_u = log1m(bt_u);
  // Beta-binomial kernel, with a + b = kappa:
  //   lbeta(k + a, n - k + b) - lbeta(a, b)
  //     = [lgamma(k + a) - lgamma(a)] + [lgamma(n - k + b) - lgamma(b)] - [lgamma(n + kappa) - lgamma(kappa)],
  // and lgamma(x + k) - lgamma(x) = lgamma(k) - lbeta(x, k) for a count k >= 1 (0 at k = 0). Up to constants it is
  // -lbeta(a, k) - lbeta(b, n - k) + lbeta(kappa, n): two log-betas of one parameter and a count per observation,
  // the third once per (item count, family) pair. Stan's beta_binomial computes two log-betas of two parameters
  // and six digammas per observation; the same draws come out 14% faster per gradient (docs/model.md, stop 28).
  array[N_bb] int bb_pair;               // (item count, family) pair of each observation
  array[N_bb] int pair_n_tmp;
  array[N_bb] int pair_fam_tmp;
  int n_pair = 0;
  int n_kpos = 0;
  int n_nkpos = 0;
  for (i in 1:N_bb) {
    if (bb_k[i] > bb_n[i]) reject("bb_k[", i, "] = ", bb_k[i], " correct of bb_n[", i, "] = ", bb_n[i], " items");
    int found = 0;
    for (h in 1:n_pair)
      if (pair_n_tmp[h] == bb_n[i] && pair_fam_tmp[h] == bb_fam[i]) found = h;
    if (found == 0) {
      n_pair += 1;
      pair_n_tmp[n_pair] = bb_n[i];
      pair_fam_tmp[n_pair] = bb_fam[i];
      found = n_pair;
    }
    bb_pair[i] = found;
    n_kpos += bb_k[i] > 0;
    n_nkpos += bb_n[i] > bb_k[i];
  }
  vector[n_pair] pair_n;
  array[n_pair] int pair_fam;
  for (h in 1:n_pair) { pair_n[h] = pair_n_tmp[h]; pair_fam[h] = pair_fam_tmp[h]; }
  vector[n_pair] pair_count = rep_vector(0, n_pair);
  for (i in 1:N_bb) pair_count[bb_pair[i]] += 1;
  // observations with k >= 1 correct, and with n - k >= 1 wrong, and those counts
  array[n_kpos] int kpos_idx;
  vector[n_kpos] kpos_k;
  array[n_nkpos] int nkpos_idx;
  vector[n_nkpos] nkpos_nk;
  {
    int u = 0;
    int v = 0;
    for (i in 1:N_bb) {
      if (bb_k[i] > 0) { u += 1; kpos_idx[u] = i; kpos_k[u] = bb_k[i]; }
      if (bb_n[i] > bb_k[i]) { v += 1; nkpos_idx[v] = i; nkpos_nk[v] = bb_n[i] - bb_k[i]; }
    }
  }
}

parameters {
  // With the preconditioner on (P_pc > 0) the unconstrained blocks are sampled
  // through pc_z and their *_p declarations below have length 0; off, they are
  // sampled directly (with Stan `multiplier` preconditioning) and pc_z is empty.
  vector[P_pc] pc_z;
  // capability: direction on the sphere of standardised reference capabilities
  vector<multiplier=scale_capability>[use_pc ? 0 : M_ref - 1] theta_ref_raw_p;
  // capability of the pinned state of each model without an observed
  // default (what the data measure); its theta is this minus the shared
  // effect of the pinned setting, so a weakly identified shared effect does
  // not drag every such model's parameter along with it
  vector<multiplier=scale_capability>[use_pc ? 0 : M - M_ref] pin_free_p;
  // family difficulty, log-discrimination, log-dispersion: hierarchical
  // Normal, centred or non-centred per the nc_* switches
  vector[use_pc ? 0 : 1] b_mu_p;
  vector<multiplier=scale_b>[use_pc ? 0 : J] b_raw_p;
  vector[use_pc ? 0 : 1] lambda_mu_p;
  vector<multiplier=scale_lambda>[use_pc ? 0 : J] lambda_raw_p;
  vector[use_pc ? 0 : 1] logkappa_mu_p;
  vector<multiplier=scale_logkappa>[use_pc ? 0 : J_b] logkappa_raw_p;
  // zero hurdle: logit P(zero) = hurdle_a - hurdle_b * beta_j (phi - b_j)
  vector[use_pc ? 0 : 1] hurdle_a_p;
  // reasoning: shared effects per setting (default = 0), per-model ladder
  // amplitude / curvature, per-state off-ladder deviation
  vector<multiplier=scale_shared>[use_pc ? 0 : L + K_off] shared_effect_p;
  // (conditionally centred coordinates u, see amp_hat above)
  vector[use_pc ? 0 : A] amp_u_p;
  vector[use_pc ? 0 : A] curv_u_p;
  vector[use_pc ? 0 : D] dev_u_p;
  // every positive scale, in SCALE_ORDER (transformed data): the population
  // sds of b, lambda and log kappa, the hurdle slope, the reasoning sds, the
  // off-ladder deviation sd per setting and the residual sd per rating family.
  // With the preconditioner on they are sampled on the log scale inside pc_z:
  // their logs move linearly with the block (amp_sd's log was 83% explained
  // by it), which a diagonal metric outside the block cannot follow.
  vector<lower=0>[use_pc ? 0 : n_scale] scale_p;
}

transformed parameters {
  // ---- the unconstrained blocks, sampled directly or through pc_z ---------
  vector[M_ref - 1] theta_ref_raw;
  vector[M - M_ref] pin_free;
  real b_mu;
  vector[J] b_raw;
  real lambda_mu;
  vector[J] lambda_raw;
  real logkappa_mu;
  vector[J_b] logkappa_raw;
  real hurdle_a;
  vector[L + K_off] shared_effect;
  vector[A] amp_z;        // per-model ladder terms / off-ladder deviations over their sd
  vector[A] curv_z;
  vector[D] dev_z;
  real<lower=0> b_sd;
  real<lower=0> lambda_sd;
  real<lower=0> logkappa_sd;
  real<lower=0> hurdle_b;
  real<lower=0> shared_sd;
  real<lower=0> amp_sd;
  real<lower=0> curv_sd;
  vector<lower=0>[K_off] offdev_sd;
  vector<lower=0>[J_r] rating_sd;
  {
    vector[n_scale] scales;
    vector[A] amp_u;
    vector[A] curv_u;
    vector[D] dev_u;
    if (use_pc) {
      // stacking order: shared with precondition.BLOCKS in Python
      vector[P_pc] x;
      if (P_dense > 0)
        x = pc_loc + pc_chol * pc_z;
      else if (K_pc > 0)
        x = pc_loc + pc_scale .* (pc_z + pc_left * (pc_right_t * pc_z));
      else
        x = pc_loc + pc_scale .* pc_z;
      int at = 1;
      theta_ref_raw = x[at:(at + M_ref - 2)]; at += M_ref - 1;
      pin_free = x[at:(at + M - M_ref - 1)]; at += M - M_ref;
      b_raw = x[at:(at + J - 1)]; at += J;
      lambda_raw = x[at:(at + J - 1)]; at += J;
      logkappa_raw = x[at:(at + J_b - 1)]; at += J_b;
      shared_effect = x[at:(at + L + K_off - 1)]; at += L + K_off;
      b_mu = x[at]; lambda_mu = x[at + 1]; logkappa_mu = x[at + 2]; hurdle_a = x[at + 3]; at += 4;
      scales = scale_softplus ? log1p_exp(x[at:(at + n_scale - 1)]) : exp(x[at:(at + n_scale - 1)]);
      at += n_scale;
      // trailing blocks may be empty (a panel without per-model ladder terms or off-ladder
      // deviations): a slice starting past the end is out of range even when empty
      if (A > 0) { amp_u = x[at:(at + A - 1)]; curv_u = x[(at + A):(at + 2 * A - 1)]; }
      at += 2 * A;
      if (D > 0) dev_u = x[at:(at + D - 1)];
    } else {
      theta_ref_raw = theta_ref_raw_p;
      pin_free = pin_free_p;
      b_mu = b_mu_p[1];
      b_raw = b_raw_p;
      lambda_mu = lambda_mu_p[1];
      lambda_raw = lambda_raw_p;
      logkappa_mu = logkappa_mu_p[1];
      logkappa_raw = logkappa_raw_p;
      hurdle_a = hurdle_a_p[1];
      shared_effect = shared_effect_p;
      amp_u = amp_u_p;
      curv_u = curv_u_p;
      dev_u = dev_u_p;
      scales = scale_p;
    }
    b_sd = scales[1]; lambda_sd = scales[2]; logkappa_sd = scales[3]; hurdle_b = scales[4];
    shared_sd = scales[5]; amp_sd = scales[6]; curv_sd = scales[7];
    // (a slice starting past the end is out of range even when empty)
    if (K_off > 0) offdev_sd = scales[8:(7 + K_off)];
    if (J_r > 0) rating_sd = scales[(8 + K_off):n_scale];
    amp_z = centred_z(amp_u, rep_vector(amp_sd, A), amp_hat, amp_prec);
    curv_z = centred_z(curv_u, rep_vector(curv_sd, A), curv_hat, curv_prec);
    dev_z = centred_z(dev_u, offdev_sd[dev_setting], dev_hat, dev_prec);
  }
  vector[M] theta;        // model base capability (default-state equivalent)
  vector[S] phi;          // capability of each reasoning state
  vector[J] b;
  vector[J] beta = exp(nc_lambda ? lambda_mu + lambda_sd * lambda_raw : lambda_raw);
  vector[J_b] kappa;
  {
    vector[J_b] log_kappa = nc_logkappa ? logkappa_mu + logkappa_sd * logkappa_raw : logkappa_raw;
    kappa = exp(log_kappa_max > 0 ? log_kappa - log1p_exp(log_kappa - log_kappa_max) : log_kappa);
  }
  {
    // exact standardisation: mean 0 and sd 1 over the reference models
    vector[M_ref] x = helmert_sum_zero(theta_ref_raw .* helm_scale, helm_k);
    theta[ref_model] = x * (ref_scale / norm2(theta_ref_raw));
    // reasoning effect of each state: shared part + per-model part; the
    // pinned state of each model has d_lin = d_quad = 0 and no deviation
    vector[L + K_off + 1] shared_full = append_row(0, shared_effect);
    theta[free_model] = pin_free - shared_full[free_pin1];
    vector[A + 1] amp_full = append_row(0, amp_sd * amp_z);
    vector[A + 1] curv_full = append_row(0, curv_sd * curv_z);
    vector[D + 1] dev_full = append_row(0, offdev_sd[dev_setting] .* dev_z);
    phi = theta[state_model] + shared_full[set1]
          + amp_full[amp1] .* d_lin + curv_full[amp1] .* d_quad
          + dev_full[dev1];
  }
  if (shift_b)
    b = csr_matrix_times_vector(J, S, avg_w, avg_v, avg_u, phi) - b_raw ./ beta;
  else
    b = nc_b ? b_mu + b_sd * b_raw : b_raw;
}

model {
  // the scales inside pc_z: Jacobian of exp (what <lower=0> adds itself), or
  // of softplus: d softplus(u) / du = inv_logit(u) = 1 - exp(-softplus(u))
  if (use_pc) {
    vector[n_scale] all_scales = append_row(
      [b_sd, lambda_sd, logkappa_sd, hurdle_b, shared_sd, amp_sd, curv_sd]',
      append_row(offdev_sd, rating_sd));
    if (scale_softplus)
      target += sum(log1m_exp(-all_scales));
    else
      target += sum(log(all_scales));
  }

  // ---- priors: capability ------------------------------------------------
  // Any density of the raw vector that depends on it only through its norm
  // makes the standardised direction uniform on its sphere; the radius is a
  // nuisance the likelihood never sees. std_normal gives a chi radius (sd
  // ~0.7), much wider than the angular posterior scale, so by default the
  // radius is given N(sqrt(d), radial_sd) instead (the -(d-1) log r term
  // turns the radial density into a density on R^d).
  if (radial_sd > 0) {
    real r = norm2(theta_ref_raw);
    target += normal_lpdf(r | ref_scale, radial_sd) - (M_ref - 2) * log(r);
  } else {
    theta_ref_raw ~ std_normal();
  }
  // N(0, 1) on the base capability of free models (a shift of pin_free by
  // another parameter: unit Jacobian)
  theta[free_model] ~ std_normal();

  // ---- priors: family populations (partial pooling, non-centred) ---------
  b_mu ~ normal(prior_b_mu_loc, prior_b_mu_scale);
  b_sd ~ normal(0, prior_b_sd_scale);
  if (shift_b) {
    // b is a function of (b_raw, beta, phi); |db/db_raw| = 1 / beta
    b ~ normal(b_mu, b_sd);
    target += -sum(log(beta));
  } else if (nc_b) {
    b_raw ~ std_normal();
  } else {
    b_raw ~ normal(b_mu, b_sd);
  }
  lambda_mu ~ normal(prior_lambda_mu_loc, prior_lambda_mu_scale);
  lambda_sd ~ normal(0, prior_lambda_sd_scale);
  if (nc_lambda) lambda_raw ~ std_normal(); else lambda_raw ~ normal(lambda_mu, lambda_sd);
  logkappa_mu ~ normal(prior_logkappa_mu_loc, prior_logkappa_mu_scale);
  logkappa_sd ~ normal(0, prior_logkappa_sd_scale);
  if (nc_logkappa) logkappa_raw ~ std_normal(); else logkappa_raw ~ normal(logkappa_mu, logkappa_sd);
  // boundary-avoiding gamma(2, 2 / s) (mean s): a rating family with few
  // models otherwise lets its residual sd and the capabilities it rates
  // fall into a funnel near sd = 0 (measured: divergences, docs/model.md)
  rating_sd ~ gamma(2, 2 / prior_rating_sd_scale);
  hurdle_a ~ normal(prior_hurdle_a_loc, prior_hurdle_a_scale);
  hurdle_b ~ normal(0, prior_hurdle_b_scale);

  // ---- priors: reasoning effects (HalfNormal scales from config) ---------
  shared_sd ~ normal(0, prior_shared_effect_scale);
  shared_effect ~ normal(0, shared_sd);   // centred: every effect is well informed
  amp_sd ~ normal(0, prior_amp_scale);
  curv_sd ~ normal(0, prior_curv_scale);
  amp_z ~ std_normal();
  curv_z ~ std_normal();
  offdev_sd ~ normal(0, prior_offdev_scale);
  dev_z ~ std_normal();
  // Jacobian of the conditional centring, dz/du = sqrt(r) per term
  target += centring_log_jacobian(rep_vector(amp_sd, A), amp_prec)
            + centring_log_jacobian(rep_vector(curv_sd, A), curv_prec)
            + centring_log_jacobian(offdev_sd[dev_setting], dev_prec);

  // ---- likelihood ----------------------------------------------------------
  // (_lupmf / _lupdf drop constant terms such as log binomial coefficients:
  // the per-observation log_lik in generated quantities keeps them)
  {
    // linear predictor of every observation: beta_j (phi_s - b_j)
    vector[N] eta = beta[obs_family] .* (phi[obs_state] - b[obs_family]);

    // countable scores: beta-binomial on (correct, items) with the shapes of
    // bounded_shapes; the kernel is laid out in transformed data
    if (N_bb > 0) {
      tuple(vector[N_bb], vector[N_bb]) ab = bounded_shapes(eta[bb_idx], kappa[bb_fam], bb_c, bb_w);
      target += dot_product(pair_count, lbeta(kappa[pair_fam], pair_n))
                - sum(lbeta(ab.1[kpos_idx], kpos_k)) - sum(lbeta(ab.2[nkpos_idx], nkpos_nk));
    }
    // countable exact zeros in floor-free families: zero-inflated, because a
    // true 0/n is possible under the beta-binomial as well as from the zero
    // process (refusals, harness failures, hopelessly hard items)
    if (N_bbz > 0) {
      array[N_bbz] int jf = obs_family[bbz_idx];
      vector[N_bbz] kap = kappa[fam_bpos[jf]];
      vector[N_bbz] e = eta[bbz_idx];
      vector[N_bbz] a = inv_logit(e) .* kap;
      vector[N_bbz] bq = inv_logit(-e) .* kap;
      // log P(0 | n, a, b) = lbeta(a, b + n) - lbeta(a, b)
      vector[N_bbz] lp0 = lbeta(a, bq + to_vector(bbz_n)) - lbeta(a, bq);
      vector[N_bbz] lz = log_inv_logit(hurdle_a - hurdle_b * e);
      vector[N_bbz] lnz = log1m_inv_logit(hurdle_a - hurdle_b * e) + lp0;
      target += sum(fmax(lz, lnz) + log1p_exp(-abs(lz - lnz)));
    }
    // continuous scores strictly inside (0, 1): beta with the same shapes,
    // a log u + b log(1 - u) - lbeta(a, b) up to constants
    if (N_bt > 0) {
      tuple(vector[N_bt], vector[N_bt]) ab = bounded_shapes(eta[bt_idx], kappa[bt_fam], bt_c, bt_w);
      target += dot_product(ab.1, bt_log_u) + dot_product(ab.2, bt_log1m_u) - sum(lbeta(ab.1, ab.2));
    }
    // continuous exact ones: the reported 1 stands for u >= 1 - one_eps; by
    // symmetry P(u >= 1 - eps) = P(1 - u <= eps) with 1 - u ~ beta(b, a)
    if (N_one > 0) {
      array[N_one] int jf = obs_family[one_idx];
      tuple(vector[N_one], vector[N_one]) ab = bounded_shapes(eta[one_idx], kappa[fam_bpos[jf]], floor_c[jf],
                                                               1 - floor_c[jf]);
      target += beta_lcdf(rep_vector(one_eps, N_one) | ab.2, ab.1);
    }
    // zero hurdle, tied to the same comparison: P(zero) rises as phi falls
    // below b_j. Continuous zeros are the point mass; non-zero bounded scores
    // in floor-free families cleared the hurdle.
    if (N_zero > 0)
      target += log_inv_logit(hurdle_a - hurdle_b * eta[zero_idx]);
    if (N_nz > 0)
      target += log1m_inv_logit(hurdle_a - hurdle_b * eta[nz_idx]);
    // ratings: Normal on the standardised scale around beta_j (phi - b_j)
    if (N_rt > 0)
      target += normal_lupdf(rt_y | eta[rt_idx], rating_sd[fam_rpos[obs_family[rt_idx]]]);
  }
}

generated quantities {
  // per-observation expected score (unit scale; ratings: standardised scale),
  // pointwise log-likelihood and one posterior predictive draw on the same
  // scale as u (countable draws are correct / items). Off unless emit_obs.
  vector[N_out] mu_obs;
  vector[N_out] log_lik;
  vector[N_out] u_rep;
  if (emit_obs) {
    vector[N] eta = beta[obs_family] .* (phi[obs_state] - b[obs_family]);
    array[N] int kind = rep_array(0, N);      // 1 bb, 2 bbz, 3 beta, 4 one, 5 zero, 6 rating
    array[N] int n_items = rep_array(0, N);
    array[N] int k_obs = rep_array(0, N);
    vector[N] u_obs = rep_vector(0, N);
    array[N] int hurdled = rep_array(0, N);
    for (i in 1:N_bb) { kind[bb_idx[i]] = 1; n_items[bb_idx[i]] = bb_n[i]; k_obs[bb_idx[i]] = bb_k[i]; }
    for (i in 1:N_bbz) { kind[bbz_idx[i]] = 2; n_items[bbz_idx[i]] = bbz_n[i]; hurdled[bbz_idx[i]] = 1; }
    for (i in 1:N_bt) { kind[bt_idx[i]] = 3; u_obs[bt_idx[i]] = bt_u[i]; }
    for (i in 1:N_one) kind[one_idx[i]] = 4;
    for (i in 1:N_zero) { kind[zero_idx[i]] = 5; hurdled[zero_idx[i]] = 1; }
    for (i in 1:N_nz) hurdled[nz_idx[i]] = 1;
    for (i in 1:N_rt) { kind[rt_idx[i]] = 6; u_obs[rt_idx[i]] = rt_y[i]; }
    for (i in 1:N) {
      int j = obs_family[i];
      if (kind[i] == 6) {
        real sd_r = rating_sd[fam_rpos[j]];
        mu_obs[i] = eta[i];
        log_lik[i] = normal_lpdf(u_obs[i] | eta[i], sd_r);
        u_rep[i] = normal_rng(eta[i], sd_r);
      } else {
        real kap = kappa[fam_bpos[j]];
        real p = floor_c[j] + (1 - floor_c[j]) * inv_logit(eta[i]);
        real q = exp(log1m_floor[j] + log1m_inv_logit(eta[i]));
        real h = hurdle_a - hurdle_b * eta[i];
        // expected score includes the zero process where it applies
        mu_obs[i] = hurdled[i] ? inv_logit(-h) * p : p;
        if (kind[i] == 1)
          log_lik[i] = beta_binomial_lpmf(k_obs[i] | n_items[i], p * kap, q * kap);
        else if (kind[i] == 2)
          log_lik[i] = log_mix(inv_logit(h), 0,
                               beta_binomial_lpmf(0 | n_items[i], p * kap, q * kap));
        else if (kind[i] == 3)
          log_lik[i] = beta_lpdf(u_obs[i] | p * kap, q * kap);
        else if (kind[i] == 4)
          log_lik[i] = beta_lcdf(one_eps | q * kap, p * kap);
        else
          log_lik[i] = log_inv_logit(h);
        if (hurdled[i] && kind[i] != 5 && kind[i] != 2)
          log_lik[i] += log1m_inv_logit(h);
        // predictive draw
        if (hurdled[i] && bernoulli_logit_rng(h)) {
          u_rep[i] = 0;
        } else if (kind[i] == 1 || kind[i] == 2) {
          u_rep[i] = beta_binomial_rng(n_items[i], p * kap, q * kap) * 1.0 / n_items[i];
        } else {
          real draw = beta_rng(p * kap, q * kap);
          u_rep[i] = draw >= 1 - one_eps ? 1 : draw;
        }
      }
    }
  }
}
