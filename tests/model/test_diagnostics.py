"""The convergence gates on constructed posteriors: a value that cannot be computed fails, naming the parameter."""

import arviz as az
import numpy as np

from atlas_assets.model.diagnostics import fit_diagnostics, format_summary


def posterior(rng, *, stuck_family: int | None = None, with_energy: bool = True, chains: int = 4, draws: int = 500):
    """Well-mixed iid draws (every gate passes) unless a parameter is made to stick."""
    b = rng.standard_normal((chains, draws, 3))
    if stuck_family is not None:
        b[:, :, stuck_family] = 0.7  # a sampler that never moved this coordinate
    stats = {"diverging": np.zeros((chains, draws), dtype=bool), "tree_depth": np.full((chains, draws), 3)}
    if with_energy:
        stats["energy"] = rng.standard_normal((chains, draws)) * 3
    return az.from_dict(
        posterior={"theta": rng.standard_normal((chains, draws, 5)), "b": b},
        sample_stats=stats,
        coords={"family": ["gpqa", "arc_agi_2", "mmlu"]},
        dims={"b": ["family"]},
    )


def test_well_mixed_posterior_passes_every_gate():
    diagnostics = fit_diagnostics(posterior(np.random.default_rng(1)))
    assert diagnostics["passes"], diagnostics["failures"]
    assert diagnostics["failures"] == {}


def test_a_stuck_parameter_fails_rhat_and_ess_with_its_name():
    diagnostics = fit_diagnostics(posterior(np.random.default_rng(2), stuck_family=1))
    assert not diagnostics["passes"]
    for gate in ("rhat", "ess_bulk", "ess_tail"):
        assert not diagnostics["checks"][gate]
        assert "b[arc_agi_2]" in diagnostics["nonfinite"][gate]
        assert "b[arc_agi_2]" in diagnostics["failures"][gate]


def test_an_uncomputable_ebfmi_fails_its_gate_with_the_reason():
    diagnostics = fit_diagnostics(posterior(np.random.default_rng(3), with_energy=False))
    assert not diagnostics["checks"]["ebfmi"]
    assert not diagnostics["passes"]
    assert "E-BFMI could not be computed" in diagnostics["failures"]["ebfmi"]


def test_summary_line_survives_when_nothing_could_be_computed():
    rng = np.random.default_rng(4)
    idata = az.from_dict(
        posterior={"b": np.full((2, 50, 2), 1.5)},
        sample_stats={"diverging": np.zeros((2, 50), dtype=bool)},
    )
    diagnostics = fit_diagnostics(idata)
    assert not diagnostics["passes"]
    line = format_summary(diagnostics)
    assert "n/a" in line and "failing" in line and "b[0]" in line
