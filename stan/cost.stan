// The cost model (issue 11; seed 001, "How cost is estimated" and "Cost model details").
//
// A reported cost is dollars per task of one run of one reasoning state on one benchmark. On the log10 scale
//
//   log10 usd_i ~ student_t(nu, bench_ref[j] + lambda[j] * (state_cost[s] + harness[h]), sigma[e]),
//
// each row weighted by 1 / (rows reporting its run), so a run counts once however often it is reported.
//   bench_ref[j]   what the reference state (GPT-5 high) costs per task on benchmark j, priced as its
//                  evaluators price a run (suite level + within-suite deviation)
//   lambda[j] > 0  how much benchmark j stretches cost gaps between states; sum_j log lambda_j = 0
//   state_cost[s]  the state's cost relative to the reference state in log10 units (0 = the same,
//                  1 = ten times); state_cost[reference] = 0 exactly
//                  = model_base[m] + setting_effect[r] + deviation[s]   (deviation = 0 for the model's
//                  pinned state; setting_effect = 0 for "default"; the effort ladder rises monotonically)
//   harness[h]     extra cost of a harnessed run (an agent system, best-of-n) of state s; 0 without one;
//                  one per harnessed state; never published
//   sigma[e]       noise scale of evaluator e (each prices and reports runs its own way)
//
// Compiles under Stan 2.35 (PyStan 3.10): the sum-to-zero vector is built by hand (normalised Helmert
// basis), not with sum_to_zero_vector (2.36+). Data and index maps: atlas_assets/cost/data.py.
functions {
  // x = Q z with Q the K x (K-1) orthonormal Helmert basis of {x : sum(x) = 0}; O(K).
  // Column k of Q: 1/sqrt(k(k+1)) on rows 1..k, -k/sqrt(k(k+1)) on row k+1.
  vector sum_zero(vector z) {
    int K = rows(z) + 1;
    if (K == 1) return rep_vector(0, 1);
    vector[K] x;
    vector[K - 1] a;
    for (k in 1:(K - 1)) a[k] = z[k] / sqrt(k * (k + 1.0));
    x = append_row(reverse(cumulative_sum(reverse(a))), 0);
    for (k in 1:(K - 1)) x[k + 1] -= k * a[k];
    return x;
  }
}

data {
  // ---- sizes and observations ----------------------------------------------
  int<lower=1> N;                          // cost rows
  int<lower=1> S;                          // reasoning states
  int<lower=1> M;                          // models
  int<lower=1> J;                          // benchmarks
  int<lower=1> E;                          // evaluators
  vector[N] y;                             // log10 USD per task
  vector<lower=0>[N] w;                    // 1 / rows of the row's run
  array[N] int<lower=1, upper=S> obs_state;
  array[N] int<lower=1, upper=J> obs_bench;
  array[N] int<lower=1, upper=E> obs_eval;
  array[N] int<lower=0> obs_harness;       // harness offset index (1..H), 0 = no harness

  // ---- states ----------------------------------------------------------------
  array[S] int<lower=1, upper=M> state_model;
  int<lower=0> L;                          // ladder levels present (in ladder order)
  int<lower=0> K;                          // off-ladder settings present (e.g. disabled, enabled)
  array[S] int<lower=0, upper=L> state_ladder;   // 1..L, 0 = not a ladder setting
  array[S] int<lower=0, upper=K> state_off;      // 1..K, 0 = not an off-ladder setting
  int<lower=0> D;                          // states with a deviation (every non-pinned state)
  array[S] int<lower=0, upper=D> state_dev;      // 1..D, 0 = the model's pinned state
  int<lower=0> H;                          // harnessed states
  int<lower=1, upper=S> ref_state;         // GPT-5 high: its state_cost is 0 by construction
  int<lower=1, upper=M> ref_model;
  array[M - 1] int<lower=1, upper=M> free_model;  // every model but the reference state's
  // Coordinates of the free models' bases (atlas_assets/cost/data.py): anchored[m] = 0: centred, the base
  // is sampled as is; 1: anchored on one run of the model's pinned state: base = the base that run implies
  // + (its evaluator's sigma / its benchmark's lambda) * u, so u has unit scale whatever the noise (a model
  // without runs, e.g. held out, is centred; its anchor fields are then unused).
  vector<lower=0, upper=1>[M - 1] anchored;
  vector[M - 1] anchor_y;                  // weighted mean log10 cost of the anchor run's rows
  array[M - 1] int<lower=1, upper=J> anchor_bench;
  array[M - 1] int<lower=1, upper=E> anchor_eval;
  array[M - 1] int<lower=1, upper=S> anchor_state;  // the model's pinned state (no deviation)
  array[M - 1] int<lower=0> anchor_harness;         // the run's harness offset index, 0 = none

  // ---- benchmarks in suites --------------------------------------------------
  int<lower=0> G;                          // suites with two or more benchmarks
  array[J] int<lower=0, upper=G> bench_suite;    // 1..G, 0 = a benchmark that is its own suite

  // ---- priors ------------------------------------------------------------------
  real<lower=1> nu;                        // Student-t degrees of freedom
  real ref_mu_loc;                         // log10 USD per task of the reference state, typical benchmark
  real<lower=0> ref_mu_scale;
  real<lower=0> ref_suite_sd_scale;        // HalfNormal scales
  real<lower=0> ref_within_sd_scale;
  real<lower=0> loglambda_suite_sd_scale;
  real<lower=0> loglambda_within_sd_scale;
  real<lower=0> base_mu_scale;
  real<lower=0> base_sd_scale;
  real<lower=0> setting_scale;             // N(0, .) on each setting effect
  real<lower=0> dev_sd_scale;
  real<lower=0> harness_sd_scale;
  real<lower=0> sigma_scale;               // gamma(2, 2 / scale): mean = scale
}

transformed data {
  // 1-based positions into the "0 first" vectors below (0 = default / pinned / no harness)
  array[S] int ladder1;
  array[S] int off1;
  array[S] int dev1;
  array[N] int harness1;
  for (s in 1:S) {
    ladder1[s] = state_ladder[s] + 1;
    off1[s] = state_off[s] + 1;
    dev1[s] = state_dev[s] + 1;
  }
  for (i in 1:N) harness1[i] = obs_harness[i] + 1;
  array[M - 1] int anchor_harness1;
  for (m in 1:(M - 1)) anchor_harness1[m] = anchor_harness[m] + 1;
  // positions (among the free models) of the anchored and of the centred bases
  int n_anc = 0;
  for (m in 1:(M - 1)) n_anc += anchored[m] > 0.5;
  array[n_anc] int anc;
  array[M - 1 - n_anc] int cen;
  {
    int a = 1;
    int c = 1;
    for (m in 1:(M - 1)) {
      if (anchored[m] > 0.5) {
        anc[a] = m;
        a += 1;
      } else {
        cen[c] = m;
        c += 1;
      }
    }
  }
  // benchmarks that are their own suite, and the members of multi-benchmark suites
  int n_single = 0;
  for (j in 1:J) n_single += bench_suite[j] == 0;
  array[n_single] int single;
  array[J - n_single] int member;
  {
    int a = 1;
    int b = 1;
    for (j in 1:J) {
      if (bench_suite[j] == 0) {
        single[a] = j;
        a += 1;
      } else {
        member[b] = j;
        b += 1;
      }
    }
  }
  array[J - n_single] int member_suite = bench_suite[member];
}

parameters {
  // Benchmark level: centred per benchmark (each has runs of its own), non-centred per suite (a suite
  // has a few benchmarks at most). A benchmark that is its own suite is its suite level.
  real ref_mu;
  real<lower=0> ref_suite_sd;
  real<lower=0> ref_within_sd;
  vector[G] ref_suite_z;
  vector[J] bench_ref;
  // Spreads: log lambda on the sum-to-zero subspace (J - 1 free coordinates); suite levels non-centred.
  vector[J - 1] loglambda_z;
  real<lower=0> loglambda_suite_sd;
  real<lower=0> loglambda_within_sd;
  vector[G] loglambda_suite_z;
  // State costs. A model's base is informed by its own runs more than by the population (noise ~0.1-0.3
  // log10 against a spread of ~0.5 x lambda), so it is never non-centred on the population; with most
  // models seen once, the centred base still inherits its evaluator's noise as its scale (a funnel in
  // sigma), hence the anchored coordinates (anchored_base; measured: docs/cost.md). Deviations and
  // harness offsets are non-centred: their scales are small and each is informed by a run or two. The
  // reference state's model has no base of its own (the reference fixes it).
  real base_mu;
  real<lower=0> base_sd;
  vector[M - 1] base_u;
  ordered[L] ladder_effect;                // minimal < low < ... < max: more effort costs more
  vector[K] off_effect;                    // free values for settings off the ladder
  real<lower=0> dev_sd;
  vector[D] dev_z;
  real<lower=0> harness_sd;
  vector[H] harness_z;
  // Noise per evaluator.
  vector<lower=0>[E] sigma;
}

transformed parameters {
  vector[G] ref_suite = ref_mu + ref_suite_sd * ref_suite_z;
  vector[J] log_lambda = sum_zero(loglambda_z);
  vector[J] lambda = exp(log_lambda);
  vector[G] loglambda_suite = loglambda_suite_sd * loglambda_suite_z;
  vector[S] setting_effect;                // 0 for "default"
  vector[S] deviation;                     // 0 for each model's pinned state
  vector[M] model_base;
  vector[S] state_cost;
  {
    vector[L + 1] ladder_full = append_row(0, ladder_effect);
    vector[K + 1] off_full = append_row(0, off_effect);
    vector[D + 1] dev_full = append_row(0, dev_sd * dev_z);
    setting_effect = ladder_full[ladder1] + off_full[off1];
    deviation = dev_full[dev1];
  }
  vector[H + 1] harness_full = append_row(0, harness_sd * harness_z);
  {
    vector[M - 1] base_free;
    base_free[cen] = base_u[cen];
    base_free[anc] = (anchor_y[anc] - bench_ref[anchor_bench[anc]]) ./ lambda[anchor_bench[anc]]
                     - setting_effect[anchor_state[anc]] - harness_full[anchor_harness1[anc]]
                     + sigma[anchor_eval[anc]] ./ lambda[anchor_bench[anc]] .* base_u[anc];
    model_base[free_model] = base_free;
  }
  // the reference state costs 0: its model's base is what makes it so
  model_base[ref_model] = -(setting_effect[ref_state] + deviation[ref_state]);
  state_cost = model_base[state_model] + setting_effect + deviation;
  state_cost[ref_state] = 0;  // what the line above gives up to rounding, exactly
}

model {
  // ---- priors: benchmark level ------------------------------------------------
  ref_mu ~ normal(ref_mu_loc, ref_mu_scale);
  ref_suite_sd ~ normal(0, ref_suite_sd_scale);
  ref_within_sd ~ normal(0, ref_within_sd_scale);
  ref_suite_z ~ std_normal();
  bench_ref[single] ~ normal(ref_mu, ref_suite_sd);
  bench_ref[member] ~ normal(ref_suite[member_suite], ref_within_sd);
  // log lambda: a density on the J-vector restricted to its sum-zero subspace (the map is an isometry,
  // so no Jacobian); the constraint itself fixes the scale of state_cost.
  loglambda_suite_sd ~ normal(0, loglambda_suite_sd_scale);
  loglambda_within_sd ~ normal(0, loglambda_within_sd_scale);
  loglambda_suite_z ~ std_normal();
  log_lambda[single] ~ normal(0, loglambda_suite_sd);
  log_lambda[member] ~ normal(loglambda_suite[member_suite], loglambda_within_sd);

  // ---- priors: state costs ------------------------------------------------------
  base_mu ~ normal(0, base_mu_scale);
  base_sd ~ normal(0, base_sd_scale);
  model_base[free_model] ~ normal(base_mu, base_sd);
  // Jacobian of base_u -> model_base (diagonal given everything else: sigma / lambda where anchored)
  target += sum(log(sigma[anchor_eval[anc]])) - sum(log_lambda[anchor_bench[anc]]);
  ladder_effect ~ normal(0, setting_scale);
  off_effect ~ normal(0, setting_scale);
  dev_sd ~ normal(0, dev_sd_scale);
  dev_z ~ std_normal();
  harness_sd ~ normal(0, harness_sd_scale);
  harness_z ~ std_normal();
  // boundary-avoiding (mean sigma_scale): an evaluator whose states are mostly seen once would otherwise
  // let its noise and those states' costs fall into a funnel near sigma = 0 (measured: docs/cost.md)
  sigma ~ gamma(2, 2 / sigma_scale);

  // ---- likelihood: weighted Student-t, vectorized (constants dropped: nu is data) ----
  {
    vector[N] mu = bench_ref[obs_bench] + lambda[obs_bench] .* (state_cost[obs_state] + harness_full[harness1]);
    vector[N] sd_i = sigma[obs_eval];
    target += dot_product(w, -log(sd_i) - 0.5 * (nu + 1) * log1p(square((y - mu) ./ sd_i) / nu));
  }
}

generated quantities {
  // the published cost index per state: 10 ^ state_cost (x the reference state's cost)
  vector[S] cost_index = exp(log(10) * state_cost);
}
