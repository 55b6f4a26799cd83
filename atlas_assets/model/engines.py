"""One interface to NUTS through CmdStanPy (production) or PyStan (fallback).

    fit_model(stan_file, data, chains=4, warmup=1000, draws=1000, seed=...,
              engine="auto", init=0.5, adapt_delta=0.8, max_treedepth=10,
              log=print, coords=None, dims=None, save_warmup=False) -> FitResult

Engine selection: `engine` argument, else env ATLAS_STAN_ENGINE, else "auto":
CmdStanPy when a CmdStan installation is found, PyStan otherwise. Where
CmdStan is looked for (`cmdstan_location()`), first found wins:
  1. env CMDSTAN (an existing installation; honoured as is);
  2. the project's own `.cmdstan/cmdstan-*` (env ATLAS_CMDSTAN_HOME moves it),
     used only when `make setup` (atlas_assets/model/cmdstan_setup.py) finished
     it -- then `cmdstanpy.set_cmdstan_path()` points CmdStanPy there, which also
     sets CMDSTAN for child processes (the Dagster fit subprocess);
  3. cmdstanpy's default, the newest `~/.cmdstan/cmdstan-*`.
A candidate counts only with a `makefile` and an executable `bin/stanc`.
`cmdstan_status()` says what was found or why nothing was; the fit log says it.

Both engines return the same ArviZ InferenceData: `posterior` (every Stan
parameter, transformed parameter and generated quantity, shaped
(chain, draw, ...)) and `sample_stats` with ArviZ's names: lp,
acceptance_rate, step_size, tree_depth, n_steps, diverging, energy.

Compiled models are cached by the sha256 of the Stan source:
- CmdStanPy: the source is copied to <cache>/<sha256[:16]>-<build>/<name>.stan
  and compiled there once (cache dir: env ATLAS_STAN_CACHE, default
  ~/.cache/atlas_stan); <build> is a short hash of the CmdStan installation
  (path and version), so an executable is never reused across CmdStan builds.
  Concurrent compiles of one program wait for each other (a file lock).
- PyStan: httpstan caches the compiled extension by a hash of the program
  code (httpstan.models.calculate_model_name); `FitResult.compiled_from_cache`
  reports whether that cache was hit.

PyStan runs chains in httpstan's process pool (fork); those workers outlive
the call and keep a parent process from exiting under some executors.
Call `shutdown_pystan_workers()` when done (fit_process does), or run the
fit in its own process (fit_process is the entry point for that).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

LogFn = Callable[[str], None]

STAT_NAMES = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}


@dataclass
class FitResult:
    idata: Any                      # arviz.InferenceData
    engine: str                     # "pystan" | "cmdstanpy"
    compile_seconds: float
    sample_seconds: float
    n_gradient_evals: int | None    # leapfrog steps summed over chains (warmup included when saved)
    compiled_from_cache: bool
    stan_sha256: str
    settings: dict = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    # the affine map (precondition.Preconditioner) the main fit sampled through, None for the plain program: with
    # the Stan input it gives the program's data, in whose coordinates pc_z the draws were taken (in memory only)
    preconditioner: Any = None


def _noop(msg: str) -> None:
    pass


def stan_source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _stanc_ok(path: Path) -> bool:
    return (path / "makefile").is_file() and os.access(path / "bin" / "stanc", os.X_OK)


def cmdstan_location() -> tuple[str | None, str]:
    """(CmdStan path or None, how it was found or why none was); see module doc."""
    from atlas_assets.model.cmdstan_setup import default_cmdstan, project_cmdstan_home, project_local_cmdstan

    env = os.environ.get("CMDSTAN")
    local = project_local_cmdstan()
    if env:
        if not _stanc_ok(Path(env)):
            return None, f"CMDSTAN={env} holds no makefile and bin/stanc"
        same = local is not None and os.path.realpath(env) == os.path.realpath(local)
        return env, "project-local (make setup)" if same else "env CMDSTAN"
    if local is not None:
        import cmdstanpy

        cmdstanpy.set_cmdstan_path(str(local))  # also CMDSTAN, for child processes
        return str(local), "project-local (make setup)"
    default = default_cmdstan()
    if default is not None and _stanc_ok(default):
        return str(default), "cmdstanpy default (~/.cmdstan)"
    return None, (f"CMDSTAN unset, no finished CmdStan in {project_cmdstan_home()} (run `make setup`), "
                  "none in ~/.cmdstan")


def cmdstan_status() -> str:
    path, how = cmdstan_location()
    return f"CmdStan {path} ({how})" if path else f"no CmdStan: {how}"


def cmdstan_available() -> bool:
    path, _ = cmdstan_location()
    if path is None:
        return False
    try:
        import cmdstanpy

        if os.path.normpath(cmdstanpy.cmdstan_path()) != os.path.normpath(path):
            cmdstanpy.set_cmdstan_path(path)
        return True
    except Exception:
        return False


def select_engine(engine: str | None = "auto") -> str:
    choice = (engine or "auto").lower()
    if choice == "auto":
        choice = os.environ.get("ATLAS_STAN_ENGINE", "auto").lower() or "auto"
    if choice == "auto":
        return "cmdstanpy" if cmdstan_available() else "pystan"
    if choice not in {"cmdstanpy", "pystan"}:
        raise ValueError(f"unknown Stan engine {choice!r}")
    if choice == "cmdstanpy" and not cmdstan_available():
        raise RuntimeError(f"engine 'cmdstanpy' requested but {cmdstan_status()}")
    return choice


def fit_model(
    stan_file: str | Path,
    data: Mapping[str, Any],
    *,
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    seed: int = 1,
    engine: str | None = "auto",
    init: float | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = 0.5,
    adapt_delta: float = 0.8,
    max_treedepth: int = 10,
    log: LogFn | None = None,
    coords: Mapping[str, Sequence] | None = None,
    dims: Mapping[str, Sequence[str]] | None = None,
    save_warmup: bool = False,
    parallel_chains: int | None = None,
    adapt: Mapping[str, Any] | None = None,
    metric: str = "diag_e",
) -> FitResult:
    """Compile (cached) and sample `stan_file` with NUTS; see module doc.

    `adapt` (optional) shapes warmup: `step_size` (the first step size, e.g. an earlier fit's, instead of 1),
    `init_buffer`, `window`, `term_buffer` (Stan's windowed adaptation: iterations before the first metric
    window, the first window's length, iterations of step-size-only adaptation at the end); `engaged: False`
    (CmdStan): no adaptation at all, so warmup iterations are a burn-in at `step_size` and the metric.

    `metric`: "diag_e" (Stan's default: a diagonal metric adapted in warmup windows) or "unit_e" (the identity,
    never adapted; warmup adapts the step size only), for coordinates an affine preconditioner already whitened.
    PyStan (httpstan) offers diag_e only: there "unit_e" falls back to diag_e, and the log says so."""
    log = log or _noop
    source = Path(stan_file).read_text()
    chosen = select_engine(engine)
    adapt = {k: v for k, v in (adapt or {}).items() if v is not None}
    unknown = set(adapt) - {"step_size", "init_buffer", "window", "term_buffer", "engaged"}
    if unknown:
        raise ValueError(f"unknown adaptation settings {sorted(unknown)}")
    if adapt.get("engaged") is False and ("step_size" not in adapt or chosen != "cmdstanpy"):
        raise ValueError("adaptation off (engaged: False) needs a step_size and the CmdStan engine")
    if metric not in ("diag_e", "unit_e"):
        raise ValueError(f"unknown metric {metric!r} (diag_e | unit_e)")
    settings = dict(
        chains=chains, warmup=warmup, draws=draws, seed=seed, adapt_delta=adapt_delta,
        max_treedepth=max_treedepth, save_warmup=save_warmup, **({"adapt": adapt} if adapt else {}),
        **({"metric": metric} if metric != "diag_e" else {}),
    )
    log(f"engine: {chosen}; {chains} chains x ({warmup} warmup + {draws} draws), seed {seed}")
    log(f"engine: {cmdstan_status()}" + ("" if chosen == "cmdstanpy" else "; PyStan runs the fit"))
    if chosen == "pystan":
        if metric != "diag_e":
            # the nearest httpstan offers: one long metric window (a diagonal estimated from most of warmup
            # moves little from the identity on whitened coordinates) instead of Stan's first short ones
            if warmup >= 100 and not {"init_buffer", "window", "term_buffer"} & set(adapt):
                adapt = {**adapt, "init_buffer": 25, "window": warmup - 75, "term_buffer": 50}
            log(f"PyStan: httpstan samples with diag_e only; {metric} requested, diag_e used with windows "
                f"{ {k: adapt[k] for k in ('init_buffer', 'window', 'term_buffer') if k in adapt} }")
        res = _fit_pystan(source, data, chains, warmup, draws, seed, init, adapt_delta,
                          max_treedepth, log, save_warmup, adapt)
    else:
        res = _fit_cmdstanpy(Path(stan_file), source, data, chains, warmup, draws, seed, init,
                             adapt_delta, max_treedepth, log, save_warmup, parallel_chains, adapt, metric)
    posterior, stats, warm_stats, compile_s, sample_s, cached, messages = res
    # switched-off outputs (zero-length vectors) carry nothing
    posterior = {k: v for k, v in posterior.items() if v.size > 0}
    idata = to_inference_data(posterior, stats, warm_stats, coords=coords, dims=dims)
    n_steps = int(stats["n_steps"].sum()) + (int(warm_stats["n_steps"].sum()) if warm_stats else 0)
    ndiv = int(stats["diverging"].sum())
    log(f"sampling done in {sample_s:.1f}s; {ndiv} divergences; {n_steps} leapfrog steps")
    return FitResult(
        idata=idata,
        engine=chosen,
        compile_seconds=compile_s,
        sample_seconds=sample_s,
        n_gradient_evals=n_steps,
        compiled_from_cache=cached,
        stan_sha256=stan_source_hash(source),
        settings=settings,
        messages=messages,
    )


def log_density_gradients(stan_file: str | Path, data: Mapping[str, Any], unconstrained: np.ndarray,
                          engine: str | None = "auto", log: LogFn | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log density (n,), gradient (n, dim)) at each row of `unconstrained` (n, dim), Jacobian included, up to a
    constant, through the engine that samples: CmdStan's `log_prob` method in one call for all rows, or PyStan's
    `log_prob` / `grad_log_prob` per row."""
    log = log or _noop
    unconstrained = np.atleast_2d(np.asarray(unconstrained, dtype=float))
    if select_engine(engine) == "pystan":
        model = _pystan_build(Path(stan_file).read_text(), _jsonable(dict(data)), log)
        return (np.array([model.log_prob(row.tolist()) for row in unconstrained]),
                np.array([model.grad_log_prob(row.tolist()) for row in unconstrained]))
    with CmdStanLogDensity(stan_file, data, log) as density:
        return density(unconstrained)


class CmdStanLogDensity:
    """The program's log density and gradient (Jacobian included, up to a constant) at batches of unconstrained
    points, through CmdStan's `log_prob` method: the executable is found and the data are written once, so a caller
    that evaluates many small batches (model/placement.py: ~20 batches of ~16 points) does not pay for them each time
    (measured on the real panel: 0.11 s of data writing and ~0.05 s of lookup per call, against 0.05 s to run one
    point). Use as a context manager; calling it returns (log density (n,), gradient (n, dim))."""

    def __init__(self, stan_file: str | Path, data: Mapping[str, Any], log: LogFn | None = None):
        import tempfile

        import cmdstanpy.utils

        log = log or _noop
        self.model, _, _ = cmdstan_executable(Path(stan_file), Path(stan_file).read_text(), log)
        self._tmp = tempfile.TemporaryDirectory(prefix="atlas_logprob_")
        self.data_file = Path(self._tmp.name) / "data.json"
        cmdstanpy.utils.write_stan_json(str(self.data_file), _jsonable(dict(data)))

    def __enter__(self) -> "CmdStanLogDensity":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._tmp.cleanup()

    def __call__(self, unconstrained: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import json
        import subprocess

        import pandas as pd

        unconstrained = np.atleast_2d(np.asarray(unconstrained, dtype=float))
        params_file, out_file = (Path(self._tmp.name) / n for n in ("params.json", "out.csv"))
        # CmdStan reads an array of arrays in column-major order and then takes the points as consecutive runs of
        # `dim` values: lay the rows out so that that reading returns them (measured on a two-parameter program,
        # tests/model/test_engines.py; passing the rows as they are scrambles every point but the first value)
        n, dim = unconstrained.shape
        laid_out = unconstrained.reshape(-1).reshape(dim, n).T
        params_file.write_text(json.dumps({"params_r": laid_out.tolist()}))
        run = subprocess.run([str(self.model.exe_file), "log_prob", f"unconstrained_params={params_file}", "jacobian=1",
                              "data", f"file={self.data_file}", "output", f"file={out_file}", "sig_figs=18"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"CmdStan log_prob failed ({run.returncode}): {run.stderr.strip()[-500:]}")
        values = pd.read_csv(out_file, comment="#", float_precision="round_trip").to_numpy(dtype=float)
        return values[:, 0], values[:, 1:]  # lp__, then one column per unconstrained coordinate


def to_inference_data(posterior: dict, stats: dict, warm_stats: dict | None = None, *, coords=None, dims=None):
    """ArviZ InferenceData from {name: (chain, draw, ...)} dicts."""
    import arviz as az

    coords = dict(coords or {})
    dims = {k: list(v) for k, v in (dims or {}).items() if k in posterior}
    # drop dims whose coordinate length does not match (e.g. empty switches)
    for name, dd in list(dims.items()):
        shape = posterior[name].shape[2:]
        if len(dd) != len(shape) or any(d in coords and len(coords[d]) != n for d, n in zip(dd, shape)):
            dims.pop(name)
    used = {d for dd in dims.values() for d in dd}
    coords = {k: list(v) for k, v in coords.items() if k in used}
    kwargs = dict(posterior=posterior, sample_stats=stats, coords=coords, dims=dims)
    if warm_stats:
        kwargs["warmup_sample_stats"] = warm_stats
        kwargs["save_warmup"] = True
    return az.from_dict(**kwargs)


# --------------------------------------------------------------------------- PyStan


def shutdown_pystan_workers(wait: bool = True) -> None:
    """Shut httpstan's process pool down so no sampling worker outlives us.

    A fresh (empty) pool replaces it, so a later fit in the same process
    still works; the new pool starts no process until it is used."""
    import sys

    stub = sys.modules.get("httpstan.services_stub")
    if stub is None:  # PyStan never sampled here: nothing to stop
        return
    old = stub.executor
    try:
        old.shutdown(wait=wait, cancel_futures=True)
    except Exception:
        pass
    try:
        import concurrent.futures
        import multiprocessing as mp

        stub.executor = concurrent.futures.ProcessPoolExecutor(
            mp_context=mp.get_context("fork"), initializer=stub.init_worker
        )
    except Exception:
        pass


def _pystan_init_payloads(init, chains: int) -> tuple[list[dict], float]:
    if init is None:
        return [dict() for _ in range(chains)], 2.0
    if isinstance(init, (int, float)):
        return [dict() for _ in range(chains)], float(init)
    if isinstance(init, Mapping):
        return [dict(init) for _ in range(chains)], 2.0
    init = list(init)
    if len(init) != chains:
        raise ValueError("init must give one dict per chain")
    return [dict(x) for x in init], 2.0


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, Mapping):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def pystan_is_cached(source: str) -> bool:
    import httpstan.cache
    import httpstan.models

    name = httpstan.models.calculate_model_name(source)
    return name in httpstan.cache.list_model_names()


def _patient_stanc() -> None:
    """httpstan runs stanc (with --warn-pedantic) under a 1-second timeout; on 2 loaded cores the pedantic pass
    of stan/atlas.stan takes 1-2.5 s, and the build fails with a bare TimeoutExpired. Give that one call a
    generous timeout (httpstan.compile looks `subprocess.run` up on its module at call time)."""
    import subprocess
    import types

    import httpstan.compile

    if getattr(httpstan.compile.subprocess, "atlas_patient", False):
        return
    shim = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")})
    shim.run = lambda *args, **kwargs: subprocess.run(*args, **{**kwargs, "timeout": 300})
    shim.atlas_patient = True
    httpstan.compile.subprocess = shim


def _patient_pystan_client() -> None:
    """PyStan talks to httpstan through an aiohttp session with aiohttp's default 300 s total timeout; a cold PyStan
    build of stan/cost.stan on 2 loaded cores took ~7 min, and stan.build failed with a bare TimeoutError while
    httpstan went on compiling. No client timeout: httpstan's build and the sampler bound the wait."""
    import functools
    import types

    import aiohttp
    import aiohttp.web
    import stan.common

    if getattr(stan.common.aiohttp, "atlas_patient", False):
        return
    stan.common.aiohttp = types.SimpleNamespace(
        web=aiohttp.web, atlas_patient=True,
        ClientSession=functools.partial(aiohttp.ClientSession, timeout=aiohttp.ClientTimeout(total=None)))


def _discard_interrupted_pystan_build(source: str, log: LogFn) -> None:
    """httpstan writes a model's stderr.log after its extension is built; a build killed in between (the timeout
    above, a kill) leaves the folder without it, and every later build of the program then fails with an opaque
    '500 Internal Server Error' (FileNotFoundError on stderr.log inside httpstan). Such a folder is removed, so the
    program is built again; one touched in the last 15 minutes may be another process's build under way, and is
    left alone."""
    import shutil

    import httpstan.cache
    import httpstan.models

    folder = httpstan.cache.model_directory(httpstan.models.calculate_model_name(source))
    if not folder.exists() or (folder / "stderr.log").exists():
        return
    newest = max([p.stat().st_mtime for p in folder.rglob("*")] + [folder.stat().st_mtime])
    if time.time() - newest > 15 * 60:
        log(f"PyStan: {folder} is an interrupted build (no stderr.log): removed, building again")
        shutil.rmtree(folder)


@contextlib.contextmanager
def exclusive_lock(path: Path):
    """Hold an exclusive lock on the file `path` (created if missing) for the block; another process asking for
    it waits. Compiles of one Stan program, by CmdStan or by PyStan, go one at a time through it."""
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def pystan_build_lock_path(source: str) -> Path:
    """The file whose lock a process holds while it builds (or loads) `source` with PyStan, beside httpstan's cache."""
    import httpstan.cache
    import httpstan.models

    folder = httpstan.cache.cache_directory()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{httpstan.models.calculate_model_name(source).replace('/', '_')}.lock"


def _pystan_build(source: str, data: dict, log: LogFn, seed: int | None = None):
    """stan.build with the PyStan guards every caller needs (stanc and client without timeouts, an interrupted
    build discarded, one build of a program at a time): sampling and the gradients at given points go through this
    one door. httpstan builds straight into its cache folder, so two processes building one program at once (two
    test workers, two fold refits) would write the same files: the second waits on a file lock, as CmdStan
    compiles do (`cmdstan_executable`), and then finds the program built."""
    import stan

    _patient_stanc()
    _patient_pystan_client()
    with exclusive_lock(pystan_build_lock_path(source)):
        _discard_interrupted_pystan_build(source, log)
        return stan.build(source, data=data, **({} if seed is None else {"random_seed": seed}))


def _fit_pystan(source, data, chains, warmup, draws, seed, init, adapt_delta, max_treedepth, log, save_warmup,
                adapt=None):
    import stan.common
    import stan.fit

    data = _jsonable(dict(data))
    cached = pystan_is_cached(source)
    log("PyStan: compiled model found in httpstan cache" if cached else "PyStan: compiling (not cached)")
    t0 = time.perf_counter()
    model = _pystan_build(source, data, log, seed=int(seed))
    compile_s = time.perf_counter() - t0
    log(f"PyStan: build took {compile_s:.1f}s")

    inits, radius = _pystan_init_payloads(init, chains)
    base = {
        "function": "stan::services::sample::hmc_nuts_diag_e_adapt",
        "data": data,
        "random_seed": int(seed),
        "num_warmup": int(warmup),
        "num_samples": int(draws),
        "num_thin": 1,
        "save_warmup": bool(save_warmup),
        "delta": float(adapt_delta),
        "max_depth": int(max_treedepth),
        "init_radius": radius,
        "refresh": max(1, (warmup + draws) // 20),
        # the service's own names for Stan's windowed adaptation and first step size
        **{k: int(adapt[k]) for k in ("init_buffer", "window", "term_buffer") if k in (adapt or {})},
        **({"stepsize": float(adapt["step_size"])} if "step_size" in (adapt or {}) else {}),
    }
    payloads = [dict(base, chain=c + 1, init=inits[c]) for c in range(chains)]
    it_re = re.compile(r"Iteration:\s+(\d+)\s+/\s+(\d+)")

    async def run() -> list[bytes]:
        outputs: list[bytes] = []
        async with stan.common.HttpstanClient() as client:
            ops = []
            for p in payloads:
                resp = await client.post(f"/{model.model_name}/fits", json=p)
                if resp.status != 201:
                    raise RuntimeError(f"httpstan refused the fit: {resp.content[:500]!r}")
                ops.append(resp.json())
            seen: dict[int, int] = {}
            while not all(op["done"] for op in ops):
                for c, op in enumerate(ops):
                    if op["done"]:
                        continue
                    resp = await client.get(f"/{op['name']}")
                    op.update(resp.json())
                    msg = (op.get("metadata") or {}).get("progress")
                    if msg:
                        found = it_re.findall(msg)
                        if found:
                            i, n = map(int, found[-1])
                            if seen.get(c) != i:
                                seen[c] = i
                                phase = "warmup" if i <= warmup else "sampling"
                                log(f"chain {c + 1}: iteration {i}/{n} ({phase})")
                await asyncio.sleep(0.25)
            for c, op in enumerate(ops):
                fit_name = op["result"].get("name")
                if fit_name is None:
                    raise RuntimeError(f"chain {c + 1} failed: {op['result'].get('message')}")
                resp = await client.get(f"/{fit_name}")
                if resp.status != 200:
                    raise RuntimeError(f"chain {c + 1}: cannot read fit: {resp.content[:300]!r}")
                outputs.append(resp.content)
                # httpstan keeps seeded fits on disk; never reuse or accumulate them
                await client.delete(f"/{fit_name}")
        return outputs

    t1 = time.perf_counter()
    outputs = asyncio.run(run())
    sample_s = time.perf_counter() - t1
    messages = _pystan_messages(outputs)
    fit = stan.fit.Fit(
        tuple(outputs), chains, model.param_names, model.constrained_param_names, model.dims,
        warmup, draws, 1, bool(save_warmup),
    )
    raw = fit._draws  # (rows, draws, chains)
    n_warm = warmup if save_warmup else 0
    posterior = {}
    for name, shape in zip(model.param_names, model.dims):
        idx = list(fit._parameter_indexes(name))
        block = raw[idx] if idx else np.empty((0,) + raw.shape[1:])
        arr = np.transpose(block, (2, 1, 0))[:, n_warm:, :]  # chain, draw, flat
        posterior[name] = arr.reshape(arr.shape[:2] + tuple(shape), order="F") if shape else arr[..., 0]
        if shape and arr.shape[2] == 0:
            posterior[name] = np.empty(arr.shape[:2] + tuple(shape))
    stats, warm = {}, {}
    for stan_name, az_name in STAT_NAMES.items():
        if stan_name in fit.sample_and_sampler_param_names:
            k = fit.sample_and_sampler_param_names.index(stan_name)
            arr = raw[k].T  # chain, draw
            stats[az_name] = _stat_cast(az_name, arr[:, n_warm:])
            if save_warmup:
                warm[az_name] = _stat_cast(az_name, arr[:, :n_warm])
    del fit, outputs
    return posterior, stats, (warm or None), compile_s, sample_s, cached, messages


def _stat_cast(name: str, arr: np.ndarray) -> np.ndarray:
    if name == "diverging":
        return arr.astype(bool)
    if name in {"tree_depth", "n_steps"}:
        return arr.astype(np.int64)
    return np.asarray(arr, dtype=float)


def _pystan_messages(outputs: Sequence[bytes]) -> list[str]:
    """Non-progress logger messages (warnings such as rejected proposals)."""
    import json

    out: list[str] = []
    for raw in outputs:
        for line in raw.splitlines():
            if b'"logger"' not in line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            text = str(msg.get("values", [""])[0])
            if text.startswith("info:Iteration") or text.startswith("info: Elapsed") or not text.strip("info: "):
                continue
            if text.startswith("info:" + " " * 15):
                continue
            out.append(text)
    # keep it short: distinct messages only
    return list(dict.fromkeys(out))[:50]


# --------------------------------------------------------------------------- CmdStanPy


# CmdStan writes draws as CSV text, 6 significant digits by default; 18 keeps every bit of the
# double, so CmdStanPy's draws are PyStan's, bit for bit (same Stan 2.35, same seed: the same
# trajectories; checked on atlas.stan). Costs ~2.3x the CSV (43 vs 19 KB per draw at real size,
# in a temporary folder) and ~0.7 ms parsing per draw. env ATLAS_CMDSTAN_SIG_FIGS overrides.
SIG_FIGS = int(os.environ.get("ATLAS_CMDSTAN_SIG_FIGS", "18"))


def cmdstan_cache_dir() -> Path:
    return Path(os.environ.get("ATLAS_STAN_CACHE", Path.home() / ".cache" / "atlas_stan"))


def cmdstan_build_id() -> str:
    """Short hash of the CmdStan installation in use (real path and version)."""
    import cmdstanpy

    path = os.path.realpath(cmdstanpy.cmdstan_path())
    version = ".".join(map(str, cmdstanpy.cmdstan_version() or ()))
    return hashlib.sha256(f"{path}\n{version}".encode()).hexdigest()[:8]


def cmdstan_executable(stan_path: Path, source: str, log: LogFn = _noop):
    """(CmdStanModel, compile seconds, from cache): compiled once per source hash and CmdStan build."""
    import cmdstanpy

    if not cmdstan_available():  # also points CmdStanPy at the project-local CmdStan
        raise RuntimeError(cmdstan_status())
    digest = stan_source_hash(source)
    cache = cmdstan_cache_dir() / f"{digest[:16]}-{cmdstan_build_id()}"
    cache.mkdir(parents=True, exist_ok=True)
    cached_src = cache / stan_path.name
    exe = cached_src.with_suffix("")
    t0 = time.perf_counter()
    with exclusive_lock(cache / ".lock"):  # another process compiling the same program: wait for it
        if not cached_src.exists() or cached_src.read_text() != source:
            cached_src.write_text(source)
        cached = exe.exists()
        log("CmdStanPy: executable found in cache" if cached else f"CmdStanPy: compiling into {cache}")
        model = cmdstanpy.CmdStanModel(stan_file=str(cached_src), exe_file=str(exe) if cached else None)
    return model, time.perf_counter() - t0, cached


def _fit_cmdstanpy(stan_path, source, data, chains, warmup, draws, seed, init, adapt_delta,
                   max_treedepth, log, save_warmup, parallel_chains, adapt=None, metric="diag_e"):
    import tempfile

    adapt = adapt or {}
    model, compile_s, cached = cmdstan_executable(stan_path, source, log)
    log(f"CmdStanPy: {'cached executable' if cached else 'compile took'} {compile_s:.1f}s")

    out_dir = Path(tempfile.mkdtemp(prefix="atlas_cmdstan_"))
    t1 = time.perf_counter()
    # CmdStanPy buffers its per-chain stdout files until a chain ends; its console lines come as CmdStan prints them
    with contextlib.redirect_stdout(CmdStanConsoleProgress(log, sys.stdout)), \
            _chain_failures_named(out_dir):
        fit = model.sample(
            data=_jsonable(dict(data)),
            chains=chains,
            parallel_chains=parallel_chains or min(chains, os.cpu_count() or 1),
            iter_warmup=warmup,
            iter_sampling=draws,
            seed=int(seed),
            # CmdStanPy refuses an acceptance target when adaptation is off
            adapt_delta=adapt_delta if adapt.get("engaged", True) else None,
            max_treedepth=max_treedepth,
            inits=init,
            save_warmup=save_warmup,
            output_dir=str(out_dir),
            show_progress=False,
            show_console=True,
            refresh=max(1, (warmup + draws) // 20),
            sig_figs=SIG_FIGS,
            metric=metric,
            step_size=adapt.get("step_size"),
            adapt_engaged=adapt.get("engaged", True),
            # with a fixed (unit) metric there are no metric windows to shape
            adapt_init_phase=adapt.get("init_buffer") if metric == "diag_e" else None,
            adapt_metric_window=adapt.get("window") if metric == "diag_e" else None,
            adapt_step_size=adapt.get("term_buffer") if metric == "diag_e" else None,
        )
    sample_s = time.perf_counter() - t1
    n_warm = warmup if save_warmup else 0
    posterior = {}
    for name in fit.metadata.stan_vars:
        arr = fit.stan_variable(name, inc_warmup=save_warmup)
        arr = arr.reshape((chains, -1) + arr.shape[1:])
        posterior[name] = arr[:, n_warm:]
    mv = fit.method_variables()  # name -> (draws, chains)
    stats, warm = {}, {}
    for stan_name, az_name in STAT_NAMES.items():
        if stan_name in mv:
            arr = np.asarray(mv[stan_name]).T
            stats[az_name] = _stat_cast(az_name, arr[:, -draws:])
            if save_warmup:
                warm[az_name] = _stat_cast(az_name, arr[:, :n_warm])
    shutil.rmtree(out_dir, ignore_errors=True)
    return posterior, stats, (warm or None), compile_s, sample_s, cached, []


@contextlib.contextmanager
def _chain_failures_named(out_dir: Path):
    """Name the chains that failed and CmdStan's own reason. A chain whose step-size initialisation throws (e.g. an
    overflow in a special function's gradient) exits with status 0 and a CSV without draws, and CmdStanPy then
    fails with "Error in reading csv file", which says neither."""
    try:
        yield
    except (RuntimeError, ValueError) as exc:
        reasons = cmdstan_chain_errors(out_dir)
        if not reasons:
            raise
        raise RuntimeError("CmdStan sampling failed: " + "; ".join(reasons) + f" (CmdStanPy: {exc})") from exc


def cmdstan_chain_errors(out_dir: Path) -> list[str]:
    """Per chain console file in `out_dir` (`*-stdout.txt`), its fatal lines ("Exception initializing step size."
    and the exception after it, or an error line), as "chain K: ..."; informational rejections are left out."""
    reasons = []
    for path in sorted(Path(out_dir).glob("*-stdout.txt")):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        chain = next((line.split("=")[1].split()[0] for line in lines if line.startswith("id =")), path.stem)
        fatal = [i for i, line in enumerate(lines) if line.startswith("Exception initializing")
                 or line.lower().startswith("error") or "Initialization failed" in line]
        if fatal:
            i = fatal[0]
            detail = next((line for line in lines[i + 1:] if line), "")
            reasons.append(f"chain {chain}: {lines[i]} {detail}".strip())
    return reasons


CMDSTAN_PROGRESS = re.compile(r"Chain \[(\d+)\] Iteration:\s*(\d+)\s*/\s*(\d+).*\((Warmup|Sampling)\)")


class CmdStanConsoleProgress(io.TextIOBase):
    """sys.stdout while CmdStanPy samples with `show_console`: each of its per-chain console lines
    ("Chain [2] Iteration:  400 / 1750 [ 22%]  (Warmup)") becomes a progress log line
    ("chain 2: iteration 400/1750 (warmup)") the moment CmdStan prints it. CmdStan's other console
    lines are left out, as before (CmdStanPy keeps them in its per-chain stdout files); any other
    text passes through to `passthrough`. Chains print from their own threads, and `print` writes a
    line and its newline separately, so lines are assembled per thread."""

    def __init__(self, log: LogFn, passthrough) -> None:
        self._log = log
        self._passthrough = passthrough
        self._pending = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, rest = (getattr(self._pending, "text", "") + text).split("\n")
        self._pending.text = rest
        for line in lines:
            found = CMDSTAN_PROGRESS.search(line)
            if found:
                chain, i, n, phase = found.groups()
                self._log(f"chain {chain}: iteration {i}/{n} ({phase.lower()})")
            elif not line.startswith("Chain ["):
                self._passthrough.write(line + "\n")
        return len(text)
