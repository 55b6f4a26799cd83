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
// Data and index maps: atlas_assets/cost/data.py. Parametrization measured on the real panels: docs/cost.md.
functions {
  // A benchmark's prior location and scale: its suite's level and the within-suite sd for a member of a
  // multi-benchmark suite (bench_suite > 0), the population's (top, top_sd) for one that is its own suite.
  vector suite_loc(real top, vector suite, array[] int bench_suite) {
    int J = size(bench_suite);
    vector[J] loc;
    for (j in 1:J) loc[j] = bench_suite[j] == 0 ? top : suite[bench_suite[j]];
    return loc;
  }
  vector suite_scale(real top_sd, real within_sd, array[] int bench_suite) {
    int J = size(bench_suite);
    vector[J] scale;
    for (j in 1:J) scale[j] = bench_suite[j] == 0 ? top_sd : within_sd;
    return scale;
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
  // is sampled as is; 1: anchored on one run of the model's best-measured state: base = the base that run
  // implies (its cost less its state's setting and deviation) + (its evaluator's sigma / its benchmark's
  // lambda) * u, so u has unit scale whatever the noise (a model without runs, e.g. held out, is centred; its
  // anchor fields are then unused).
  vector<lower=0, upper=1>[M - 1] anchored;
  vector[M - 1] anchor_y;                  // weighted mean log10 cost of the anchor run's rows
  array[M - 1] int<lower=1, upper=J> anchor_bench;
  array[M - 1] int<lower=1, upper=E> anchor_eval;
  array[M - 1] int<lower=1, upper=S> anchor_state;  // the anchor run's state (the pinned one where centred)
  array[M - 1] int<lower=0> anchor_harness;         // the run's harness offset index, 0 = none

  // ---- benchmarks in suites --------------------------------------------------
  int<lower=0> G;                          // suites with two or more benchmarks
  array[J] int<lower=0, upper=G> bench_suite;    // 1..G, 0 = a benchmark that is its own suite
  // 1: the benchmark's level is sampled as it is (centred on its suite: its runs determine it), and so is its
  // log spread when it is its own suite; 0: as standardized deviations (non-centred: a benchmark with a
  // handful of runs is mostly its suite, and centred it makes a funnel with the within-suite sd).
  array[J] int<lower=0, upper=1> bench_centred;
  // The benchmark whose spread is 1 while sampling (the one with the most runs): costs are sampled in its
  // units (state_cost_rel) and published on the sum-zero scale (state_cost = state_cost_rel x the geometric
  // mean of the relative spreads). Measured: on the sum-zero scale the spreads of the well-measured
  // benchmarks (ARC-AGI's four) moved in lockstep with every cost they carry, a ridge (docs/cost.md).
  int<lower=1, upper=J> scale_bench;
  // 1: the log spread is sampled as it is (a benchmark that is its own suite, with rich data); 0: as a
  // standardized deviation (a thin one). Members of a multi-benchmark suite (0 here) are sampled in member-mean
  // coordinates, below: ARC-AGI's members differ by ~0.01-0.02 +- 0.012, and centred they made a funnel with
  // the within-suite sd; non-centred on a floating suite level, a stiff direction when that sd was large.
  array[J] int<lower=0, upper=1> spread_centred;

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
  // the benchmarks other than scale_bench, whose log spreads are sampled (lam_free)
  array[J - 1] int lam_free;
  {
    int a = 1;
    for (j in 1:J) {
      if (j != scale_bench) {
        lam_free[a] = j;
        a += 1;
      }
    }
  }
  // Relative log spreads of the members of multi-benchmark suites (positions k in lam_free with bench_suite > 0;
  // the units benchmark is no member: its 0 is no datum) are sampled as their suite's member mean plus
  // orthonormal (Helmert) contrasts: n_mem[g] >= 1 members, n_mem[g] - 1 contrasts per suite. The other
  // benchmarks (their own suite) have their log spread in loglambda_raw: centred (own_cen) or not (own_ncp).
  array[G] int n_mem = rep_array(0, G);
  for (k in 1:(J - 1)) if (bench_suite[lam_free[k]] > 0) n_mem[bench_suite[lam_free[k]]] += 1;
  int C = 0;
  for (g in 1:G) C += n_mem[g] - 1;
  vector[G] sqrt_n_mem;
  for (g in 1:G) sqrt_n_mem[g] = sqrt(n_mem[g]);
  array[J - 1] int free_suite;             // suite of lam_free[k], 0 = its own
  for (k in 1:(J - 1)) free_suite[k] = bench_suite[lam_free[k]];
  matrix[J - 1, C] contrast = rep_matrix(0, J - 1, C);   // columns orthonormal, each summing to 0 within a suite
  {
    int c0 = 0;
    for (g in 1:G) {
      array[n_mem[g]] int mem;
      int i = 0;
      for (k in 1:(J - 1)) {
        if (free_suite[k] == g) {
          i += 1;
          mem[i] = k;
        }
      }
      for (c in 1:(n_mem[g] - 1)) {
        for (r in 1:c) contrast[mem[r], c0 + c] = 1 / sqrt(c * (c + 1.0));
        contrast[mem[c + 1], c0 + c] = -c / sqrt(c * (c + 1.0));
      }
      c0 += n_mem[g] - 1;
    }
  }
  int n_mem_all = 0;
  int n_own_cen = 0;
  for (k in 1:(J - 1)) {
    n_mem_all += free_suite[k] > 0;
    n_own_cen += free_suite[k] == 0 && spread_centred[lam_free[k]] == 1;
  }
  int n_own = J - 1 - n_mem_all;
  array[n_mem_all] int mem_pos;            // positions in lam_free of suite members
  array[n_own] int own_pos;                // ... of benchmarks that are their own suite
  array[n_own_cen] int own_cen;            // positions in own_pos (= in loglambda_raw) sampled centred
  array[n_own - n_own_cen] int own_ncp;
  {
    int a = 1;
    int b = 1;
    int c = 1;
    int d = 1;
    for (k in 1:(J - 1)) {
      if (free_suite[k] > 0) {
        mem_pos[a] = k;
        a += 1;
      } else {
        own_pos[b] = k;
        if (spread_centred[lam_free[k]] == 1) {
          own_cen[c] = b;
          c += 1;
        } else {
          own_ncp[d] = b;
          d += 1;
        }
        b += 1;
      }
    }
  }
  int n_bcen = sum(bench_centred);
  array[n_bcen] int bcen;
  array[J - n_bcen] int bncp;
  {
    int a = 1;
    int b = 1;
    for (j in 1:J) {
      if (bench_centred[j] == 1) {
        bcen[a] = j;
        a += 1;
      } else {
        bncp[b] = j;
        b += 1;
      }
    }
  }
}

parameters {
  // Benchmark level: per benchmark centred on its suite (bench_centred = 1: rich data) or non-centred (0: thin
  // data), per suite non-centred (a suite has a few benchmarks at most). A benchmark that is its own suite is
  // its suite level. Log spreads (relative to scale_bench's, log 0 there): below.
  real ref_mu;
  real<lower=0> ref_suite_sd;
  real<lower=0> ref_within_sd;
  vector[G] ref_suite_z;
  vector[J] bench_ref_raw;                 // the level itself where centred, its z where non-centred
  // Log spreads relative to scale_bench's. A benchmark that is its own suite: loglambda_raw, the spread itself
  // (rich data) or its z (thin). Members of a multi-benchmark suite: the suite's member mean (sampled as it
  // is), the members' standardized contrasts about it, and the suite level about that mean (suite = mean +
  // within_sd / sqrt(n) z): the same prior (suite ~ N(0, suite_sd), members ~ N(suite, within_sd)), in
  // coordinates where neither end of within_sd is a funnel (docs/cost.md: members centred, ARC-AGI's agreeing
  // pairs let within_sd fall to 0; members non-centred, their precisely measured spreads were within_sd x z
  // with the suite level floating +-within_sd: the stiffest direction whenever within_sd was large).
  vector[n_own] loglambda_raw;
  real<lower=0> loglambda_suite_sd;
  real<lower=0> loglambda_within_sd;
  vector[G] loglambda_member_mean;
  vector[C] loglambda_contrast_z;
  vector[G] loglambda_suite_z;
  // State costs, in scale_bench's units (_rel). A model's base is informed by its own runs more than by
  // the population (noise ~0.1-0.3 log10 against a spread of ~0.5 x lambda), so it is never non-centred on
  // the population; with most models seen once, the centred base still inherits its evaluator's noise as
  // its scale (a funnel in sigma), hence the anchored coordinates (anchored_base; measured: docs/cost.md).
  // Deviations and harness offsets are non-centred: their scales are small and each is informed by a run
  // or two. The reference state's model has no base of its own (the reference fixes it).
  real base_mu;
  real<lower=0> base_sd;
  vector[M - 1] base_u;
  ordered[L] ladder_rel;                   // minimal < low < ... < max: more effort costs more
  vector[K] off_rel;                       // free values for settings off the ladder
  real<lower=0> dev_sd;
  vector[D] dev_z;
  real<lower=0> harness_sd;
  vector[H] harness_z;
  // Noise per evaluator.
  vector<lower=0>[E] sigma;
}

transformed parameters {
  vector[G] ref_suite = ref_mu + ref_suite_sd * ref_suite_z;
  vector[G] loglambda_suite = loglambda_member_mean + loglambda_within_sd * loglambda_suite_z ./ sqrt_n_mem;
  vector[J] bench_ref;
  vector[J] loglambda_rel;                 // log spread relative to scale_bench's (0 there)
  {
    vector[J] loc = suite_loc(ref_mu, ref_suite, bench_suite);
    vector[J] scale = suite_scale(ref_suite_sd, ref_within_sd, bench_suite);
    bench_ref[bcen] = bench_ref_raw[bcen];
    bench_ref[bncp] = loc[bncp] + scale[bncp] .* bench_ref_raw[bncp];
    vector[J - 1] free_rel;
    vector[J - 1] member_dev = loglambda_within_sd * (contrast * loglambda_contrast_z);
    free_rel[mem_pos] = loglambda_member_mean[free_suite[mem_pos]] + member_dev[mem_pos];
    free_rel[own_pos[own_cen]] = loglambda_raw[own_cen];
    free_rel[own_pos[own_ncp]] = loglambda_suite_sd * loglambda_raw[own_ncp];
    loglambda_rel[lam_free] = free_rel;
    loglambda_rel[scale_bench] = 0;
  }
  vector[J] lambda_rel = exp(loglambda_rel);
  // the published sum-zero scale: lambda = lambda_rel / g, state_cost = g x state_cost_rel, g their
  // geometric mean; the likelihood sees only lambda x state_cost, the same on either scale
  real log_g = mean(loglambda_rel);
  vector[J] log_lambda = loglambda_rel - log_g;
  vector[J] lambda = exp(log_lambda);
  vector[S] setting_rel;                   // 0 for "default"
  vector[S] deviation_rel;                 // 0 for each model's pinned state
  vector[M] model_base_rel;
  vector[S] state_cost_rel;
  {
    vector[L + 1] ladder_full = append_row(0, ladder_rel);
    vector[K + 1] off_full = append_row(0, off_rel);
    vector[D + 1] dev_full = append_row(0, dev_sd * dev_z);
    setting_rel = ladder_full[ladder1] + off_full[off1];
    deviation_rel = dev_full[dev1];
  }
  vector[H + 1] harness_rel = append_row(0, harness_sd * harness_z);
  {
    vector[M - 1] base_free;
    base_free[cen] = base_u[cen];
    base_free[anc] = (anchor_y[anc] - bench_ref[anchor_bench[anc]]) ./ lambda_rel[anchor_bench[anc]]
                     - setting_rel[anchor_state[anc]] - deviation_rel[anchor_state[anc]]
                     - harness_rel[anchor_harness1[anc]]
                     + sigma[anchor_eval[anc]] ./ lambda_rel[anchor_bench[anc]] .* base_u[anc];
    model_base_rel[free_model] = base_free;
  }
  // the reference state costs 0: its model's base is what makes it so
  model_base_rel[ref_model] = -(setting_rel[ref_state] + deviation_rel[ref_state]);
  state_cost_rel = model_base_rel[state_model] + setting_rel + deviation_rel;
  state_cost_rel[ref_state] = 0;  // what the line above gives up to rounding, exactly
  // on the published scale
  real g = exp(log_g);
  vector[S] state_cost = g * state_cost_rel;
  vector[M] model_base = g * model_base_rel;
  vector[S] setting_effect = g * setting_rel;
  vector[S] deviation = g * deviation_rel;
  vector[L] ladder_effect = g * ladder_rel;
  vector[K] off_effect = g * off_rel;
  vector[H + 1] harness_full = g * harness_rel;
}

model {
  // ---- priors: benchmark level ------------------------------------------------
  ref_mu ~ normal(ref_mu_loc, ref_mu_scale);
  ref_suite_sd ~ normal(0, ref_suite_sd_scale);
  ref_within_sd ~ normal(0, ref_within_sd_scale);
  ref_suite_z ~ std_normal();
  bench_ref_raw[bcen] ~ normal(suite_loc(ref_mu, ref_suite, bench_suite)[bcen],
                               suite_scale(ref_suite_sd, ref_within_sd, bench_suite)[bcen]);
  bench_ref_raw[bncp] ~ std_normal();
  // log spreads relative to scale_bench's: the hierarchical prior on the others' (scale_bench's 0 is no
  // datum for its suite: a fixed 0 with scale within_sd made the same funnel as a centred member)
  loglambda_suite_sd ~ normal(0, loglambda_suite_sd_scale);
  loglambda_within_sd ~ normal(0, loglambda_within_sd_scale);
  // suite levels ~ N(0, suite_sd) and members ~ N(suite, within_sd), in the member-mean coordinates: their
  // Jacobian (within_sd ^ n per suite) cancels the members' normalizing constants, leaving these terms
  loglambda_suite ~ normal(0, loglambda_suite_sd);
  loglambda_suite_z ~ std_normal();
  loglambda_contrast_z ~ std_normal();
  loglambda_raw[own_cen] ~ normal(0, loglambda_suite_sd);
  loglambda_raw[own_ncp] ~ std_normal();

  // ---- priors: state costs (scale_bench's units) -----------------------------------
  base_mu ~ normal(0, base_mu_scale);
  base_sd ~ normal(0, base_sd_scale);
  model_base_rel[free_model] ~ normal(base_mu, base_sd);
  // Jacobian of base_u -> model_base_rel (diagonal given everything else: sigma / lambda_rel where anchored)
  target += sum(log(sigma[anchor_eval[anc]])) - sum(loglambda_rel[anchor_bench[anc]]);
  ladder_rel ~ normal(0, setting_scale);
  off_rel ~ normal(0, setting_scale);
  dev_sd ~ normal(0, dev_sd_scale);
  dev_z ~ std_normal();
  harness_sd ~ normal(0, harness_sd_scale);
  harness_z ~ std_normal();
  // boundary-avoiding (mean sigma_scale): an evaluator whose states are mostly seen once would otherwise
  // let its noise and those states' costs fall into a funnel near sigma = 0 (measured: docs/cost.md)
  sigma ~ gamma(2, 2 / sigma_scale);

  // ---- likelihood: weighted Student-t, vectorized (constants dropped: nu is data) ----
  {
    vector[N] mu = bench_ref[obs_bench] + lambda_rel[obs_bench] .* (state_cost_rel[obs_state] + harness_rel[harness1]);
    vector[N] sd_i = sigma[obs_eval];
    target += dot_product(w, -log(sd_i) - 0.5 * (nu + 1) * log1p(square((y - mu) ./ sd_i) / nu));
  }
}

generated quantities {
  // the published cost index per state: 10 ^ state_cost (x the reference state's cost)
  vector[S] cost_index = exp(log(10) * state_cost);
}
