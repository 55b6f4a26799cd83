"""Where leapfrog steps go unstable: the stiffest direction of the log density at a draw, found from gradients alone."""

import numpy as np
import pytest

from atlas_assets.model import curvature, precondition
from tests.model.test_precondition import random_low_rank_map, small_cmdstan_input, small_panel


def test_the_largest_curvature_of_a_gaussian_is_its_largest_precision_eigenvalue():
    rng = np.random.default_rng(3)
    basis = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    eigenvalues = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 40.0])
    precision = basis @ np.diag(eigenvalues) @ basis.T
    points = rng.standard_normal((3, 6))
    lam, direction = curvature.largest_curvature(lambda x: -x @ precision, points)
    assert np.allclose(lam, 40.0, rtol=1e-3)
    assert np.allclose(np.abs(direction @ basis[:, -1]), 1.0, atol=1e-3)


def test_the_curvature_is_read_where_each_draw_sits():
    # log p(u, z) = -u^2 / 2 - exp(2u) z^2 / 2, a funnel: z's precision exp(2u) is the stiffness at its wide end
    # (u = 2: exp(4) ~ 54.6, along z) and nothing at its neck (u = -1: the u direction's 1)
    def gradient(x):
        u, z = x[:, 0], x[:, 1]
        return np.stack([-u - np.exp(2 * u) * z ** 2, -np.exp(2 * u) * z], axis=1)

    lam, direction = curvature.largest_curvature(gradient, np.array([[2.0, 0.0], [-1.0, 0.0]]), step=1e-6)
    assert lam[0] == pytest.approx(np.exp(4.0), rel=1e-3) and lam[1] == pytest.approx(1.0, rel=1e-3)
    assert abs(direction[0, 1]) == pytest.approx(1.0, abs=1e-3)
    # a step of 0.3 is unstable where 0.3^2 lam > 4: at the wide end only
    assert curvature.unstable_share(lam, 0.3) == 0.5
    assert curvature.unstable_share(lam, 0.25) == 0.0


def test_every_sampled_coordinate_gets_the_name_of_what_it_is():
    from atlas_assets.model.stan_data import build_stan_data

    config, observations = small_panel()
    si = build_stan_data(observations, config)
    names = precondition.coordinate_names(si)
    sizes = precondition.block_sizes(si.data)
    assert len(names) == sum(sizes.values()) == len(set(names))
    scales = names[sum(sizes[b] for b in precondition.BLOCKS[:precondition.BLOCKS.index("log_scale")]):][
        :sizes["log_scale"]]
    assert scales[:7] == list(precondition.SCALARS)
    assert [s for s in scales if s.startswith("offdev_sd")] == ["offdev_sd[disabled]", "offdev_sd[enabled]"]
    assert f"b_raw[{si.families.family.iat[0]}]" in names
    # under conditional centring the per-model and per-state coordinates are u, not z
    centred = precondition.coordinate_names(si, centred=True)
    assert [a for a, b in zip(names, centred) if a != b] == [n for n in names if n.startswith(("amp_z", "curv_z",
                                                                                                  "dev_z"))]
    assert all(n.startswith(("amp_u[", "curv_u[", "dev_u[")) for n, z in zip(centred, names) if n != z)


def test_a_direction_is_carried_to_the_programs_coordinates_through_the_map():
    rng = np.random.default_rng(5)
    P = 5
    right = np.linalg.qr(rng.standard_normal((P, 1)))[0]
    pc = precondition.Preconditioner(loc=np.zeros(P), matched=np.ones(P, bool), draws=np.zeros((2, P)),
                                     scale=np.full(P, 0.1), left=2.0 * right, right=right)
    # along the map's own direction a unit z moves x by (1 + 2) in posterior sds; across it by 1
    moved = curvature.in_posterior_sds(pc, right.T)
    assert np.allclose(np.abs(moved), np.abs(right.T))
    dense = precondition.Preconditioner(loc=np.zeros(P), matched=np.ones(P, bool), draws=np.zeros((2, P)),
                                        chol=np.diag([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert np.allclose(curvature.in_posterior_sds(dense, np.eye(P)[[2]]), np.eye(P)[[2]])


@pytest.mark.cmdstan
def test_the_programs_stiffest_direction_is_the_top_eigenpair_of_its_full_hessian():
    # against the whole Hessian of the real program at one point: P gradients at x + h e_i, one batched call
    from atlas_assets.model.engines import log_density_gradients
    from atlas_assets.model.stan_data import stan_file

    config, stan_input = small_cmdstan_input("the program's gradients come from CmdStan's log_prob")
    low_rank, z = random_low_rank_map(stan_input, seed=2)
    data = {**stan_input.data, **low_rank.data()}

    def gradient(points):
        return log_density_gradients(stan_file(config), data, points, engine="cmdstanpy")[1]

    point = z[:1]
    h = 1e-5
    P = point.shape[1]
    hessian = -(gradient(point + h * np.eye(P)) - gradient(point)) / h
    eigenvalues, vectors = np.linalg.eigh((hessian + hessian.T) / 2)
    top = np.argmax(np.abs(eigenvalues))
    lam, direction = curvature.largest_curvature(gradient, point, iterations=60, step=h)
    assert lam[0] == pytest.approx(eigenvalues[top], rel=0.02)
    assert abs(direction[0] @ vectors[:, top]) > 0.98
