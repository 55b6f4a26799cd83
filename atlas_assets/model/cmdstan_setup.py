"""Find or install the CmdStan that the cmdstanpy engine uses (run by `make setup`).

    python atlas_assets/model/cmdstan_setup.py [--stamp .cmdstan/setup.json]

Standard library only, so it runs by path without importing the package (whose
model modules pull in pandas, ArviZ, ...). Tries, in order, and stops at the
first that works:

1. an existing installation: $CMDSTAN, the project's own `.cmdstan/cmdstan-*`
   (finished earlier by this script), or cmdstanpy's default
   `~/.cmdstan/cmdstan-*` -- each only if it holds a `makefile` and a
   `bin/stanc` that runs;
2. `cmdstanpy.install_cmdstan()` into `.cmdstan/`, only when github.com answers
   a TCP connect within a few seconds (offline it fails in well under a second
   instead of retrying six times); run in a subprocess with a socket timeout
   and a bound on the whole install;
3. `../shared/tools/cmdstan/assemble.sh .cmdstan/cmdstan-2.35.0` with the
   venv's Python (CmdStan 2.35's own sources + the httpstan wheel's Stan,
   libraries and stanc; 85-165 s on 2 cores);
4. nothing: the project falls back to PyStan, and says so. Setup still succeeds.

The stamp (JSON) records which one it was. A folder finished by this script
carries `.cmdstan/cmdstan-X/ATLAS_READY`; engines.py uses a project-local
CmdStan only when that marker is there, so an interrupted build is never used.

Environment:
  CMDSTAN                      an existing installation (honoured first)
  ATLAS_CMDSTAN_HOME           project-local folder (default <project>/.cmdstan)
  ATLAS_CMDSTAN_VERSION        version for install_cmdstan (default 2.35.0, the
                               Stan of PyStan 3.10; "latest" for the newest)
  ATLAS_CMDSTAN_SOURCES        folder holding assemble.sh (default <project>/../shared/tools/cmdstan)
  ATLAS_CMDSTAN_DOWNLOAD=0     never try install_cmdstan
  ATLAS_CMDSTAN_SETUP=0        skip everything (PyStan fallback)
  ATLAS_CMDSTAN_INSTALL_TIMEOUT  bound on install_cmdstan, seconds (default 1800)
  JOBS                         make -j for the build (default: number of CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VERSION = "2.35.0"
READY = "ATLAS_READY"
NETWORK_PROBE = ("github.com", 443)
PROBE_TIMEOUT = 5.0


def project_cmdstan_home() -> Path:
    return Path(os.environ.get("ATLAS_CMDSTAN_HOME") or PROJECT_ROOT / ".cmdstan")


def shared_sources() -> Path:
    return Path(os.environ.get("ATLAS_CMDSTAN_SOURCES") or PROJECT_ROOT.parent / "shared" / "tools" / "cmdstan")


def _version_key(path: Path) -> tuple:
    parts = path.name.removeprefix("cmdstan-").split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


def usable_cmdstan(path: str | Path | None, *, need_ready: bool = False) -> tuple[bool, str]:
    """(ok, why not): a CmdStan tree with a makefile and a bin/stanc that runs."""
    if not path:
        return False, "not set"
    p = Path(path)
    if not (p / "makefile").is_file():
        return False, f"{p}: no makefile"
    if need_ready and not (p / READY).is_file():
        return False, f"{p}: not finished (no {READY} marker)"
    stanc = p / "bin" / "stanc"
    if not os.access(stanc, os.X_OK):
        return False, f"{p}: no executable bin/stanc"
    try:
        proc = subprocess.run([str(stanc), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{p}: bin/stanc does not run ({exc})"
    if proc.returncode != 0:
        return False, f"{p}: bin/stanc --version exited {proc.returncode}"
    return True, ""


def project_local_cmdstan(home: Path | None = None) -> Path | None:
    """The newest finished CmdStan under the project folder (no stanc run: cheap)."""
    home = home or project_cmdstan_home()
    if not home.is_dir():
        return None
    found = [d for d in home.glob("cmdstan-*") if (d / READY).is_file() and (d / "makefile").is_file()
             and os.access(d / "bin" / "stanc", os.X_OK)]
    return max(found, key=_version_key) if found else None


def default_cmdstan() -> Path | None:
    """cmdstanpy's default location: the newest ~/.cmdstan/cmdstan-*."""
    home = Path.home() / ".cmdstan"
    found = [d for d in home.glob("cmdstan-*") if (d / "makefile").is_file()] if home.is_dir() else []
    return max(found, key=_version_key) if found else None


def existing_installation(log) -> tuple[Path | None, str]:
    env = os.environ.get("CMDSTAN")
    if env:
        ok, why = usable_cmdstan(env)
        if ok:
            return Path(env), "CMDSTAN"
        log(f"CMDSTAN={env} is not a working CmdStan ({why}); looking further")
    local = project_local_cmdstan()
    if local is not None and usable_cmdstan(local, need_ready=True)[0]:
        return local, "project"
    default = default_cmdstan()
    if default is not None:
        ok, why = usable_cmdstan(default)
        if ok:
            return default, "cmdstanpy default (~/.cmdstan)"
        log(f"{default} is not a working CmdStan ({why}); looking further")
    return None, ""


def network_allows(host_port=None, timeout: float | None = None) -> tuple[bool, str]:
    host_port = host_port or NETWORK_PROBE
    try:
        with socket.create_connection(host_port, timeout=timeout or PROBE_TIMEOUT):
            return True, ""
    except OSError as exc:
        return False, f"{host_port[0]}:{host_port[1]} unreachable ({type(exc).__name__}: {exc})"


_INSTALL = """
import socket, sys
socket.setdefaulttimeout(60)  # urllib has none: a stalled connection must not hang the install
import cmdstanpy
version = sys.argv[1] if sys.argv[1] != "latest" else None
ok = cmdstanpy.install_cmdstan(version=version, dir=sys.argv[2], cores=int(sys.argv[3]), progress=False)
sys.exit(0 if ok else 1)
"""


def _mark_ready(dest: Path, how: str) -> None:
    (dest / READY).write_text(json.dumps({"how": how, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")


def try_install_cmdstan(home: Path, log, jobs: int) -> tuple[Path | None, str]:
    if os.environ.get("ATLAS_CMDSTAN_DOWNLOAD", "1") == "0":
        return None, "download disabled (ATLAS_CMDSTAN_DOWNLOAD=0)"
    ok, why = network_allows()
    if not ok:
        return None, f"no network: {why}"
    version = os.environ.get("ATLAS_CMDSTAN_VERSION", DEFAULT_VERSION)
    timeout = float(os.environ.get("ATLAS_CMDSTAN_INSTALL_TIMEOUT", "1800"))
    log(f"github.com reachable: cmdstanpy.install_cmdstan(version={version!r}) into {home} (at most {timeout:.0f} s)")
    before = set(home.glob("cmdstan-*"))
    try:
        proc = subprocess.run([sys.executable, "-c", _INSTALL, version, str(home), str(jobs)], timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"install_cmdstan did not finish within {timeout:.0f} s"
    if proc.returncode != 0:
        return None, f"install_cmdstan failed (exit {proc.returncode})"
    new = sorted(set(home.glob("cmdstan-*")) - before, key=_version_key) or sorted(home.glob("cmdstan-*"), key=_version_key)
    for dest in reversed(new):
        if usable_cmdstan(dest)[0]:
            _mark_ready(dest, "cmdstanpy.install_cmdstan")
            return dest, "cmdstanpy.install_cmdstan"
    return None, "install_cmdstan reported success but left no working CmdStan"


def try_assemble(home: Path, log, jobs: int) -> tuple[Path | None, str]:
    script = shared_sources() / "assemble.sh"
    if not script.is_file():
        return None, f"no {script}"
    dest = home / f"cmdstan-{DEFAULT_VERSION}"
    if dest.exists() and not (dest / READY).exists():
        # an interrupted build or download of ours: start again
        import shutil

        log(f"removing the unfinished {dest}")
        shutil.rmtree(dest)
    env = dict(os.environ, PYTHON=sys.executable, JOBS=str(jobs))
    log(f"building CmdStan {DEFAULT_VERSION} offline: {script} {dest} (~85-165 s on 2 cores)")
    proc = subprocess.run(["bash", str(script), str(dest)], env=env)
    if proc.returncode != 0:
        return None, f"{script} failed (exit {proc.returncode})"
    ok, why = usable_cmdstan(dest)
    if not ok:
        return None, f"assembled CmdStan does not work: {why}"
    _mark_ready(dest, f"assembled by {script}")
    return dest, "assembled from ../shared/tools/cmdstan"


def setup(log=print) -> dict:
    t0 = time.perf_counter()
    result = {"engine": "pystan", "cmdstan": None, "source": None, "tried": []}
    if os.environ.get("ATLAS_CMDSTAN_SETUP", "1") == "0":
        result["tried"].append("skipped (ATLAS_CMDSTAN_SETUP=0)")
    else:
        path, how = existing_installation(log)
        if path is None:
            home = project_cmdstan_home()
            home.mkdir(parents=True, exist_ok=True)
            jobs = int(os.environ.get("JOBS") or os.cpu_count() or 1)
            import fcntl

            with open(home / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a waiting setup then finds it done
                path, how = existing_installation(log)
                for attempt in (try_install_cmdstan, try_assemble):
                    if path is not None:
                        break
                    path, how = attempt(home, log, jobs)
                    if path is None:
                        result["tried"].append(how)
                        log(f"CmdStan: {how}")
        if path is not None:
            result.update(engine="cmdstanpy", cmdstan=str(path), source=how)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if result["engine"] == "cmdstanpy":
        log(f"CmdStan: {result['cmdstan']} ({result['source']}); engine auto -> cmdstanpy")
    else:
        log("CmdStan: none found or installable (" + "; ".join(result["tried"]) + "); "
            "engine auto -> pystan (the fallback)")
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stamp", type=Path, default=None, help="write the outcome here (JSON)")
    args = ap.parse_args(argv)
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    try:
        result = setup(log)
    except Exception as exc:  # setup never fails the build: PyStan remains
        log(f"CmdStan setup failed ({type(exc).__name__}: {exc}); engine auto -> pystan (the fallback)")
        result = {"engine": "pystan", "cmdstan": None, "source": None, "tried": [f"error: {exc}"]}
    if args.stamp:
        args.stamp.parent.mkdir(parents=True, exist_ok=True)
        args.stamp.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
