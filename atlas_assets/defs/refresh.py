"""What a refresh may skip: each step records what it was computed from, and reuses its last result when that is
unchanged, saying why in its materialization.

Lineage rides on Dagster's data versions: every asset of the refresh returns an explicit `DataVersion` (a content
hash of the tables it wrote, or the name of the fit or publication it stands for), which Dagster stores with the
materialization (tag `dagster/data_version`) and compares to decide whether downstream assets are unsynced.
An expensive step builds its `StepInputs` (the latest data version of each upstream asset, plus the
specification fingerprints and run settings it depends on, atlas_assets/spec.py) and asks `StepRefresh.reuse`:
when its last materialization recorded the same inputs, and what it wrote is still there, the step does no work
and materializes again with the same data version and the earlier metadata, plus `refresh/recomputed: false`
and a reason naming the inputs and the run that computed them. So an unchanged download keeps `raw_scores`'
data version, and every step below it reuses in turn; a changed one moves the version, and exactly the steps
that depend on it recompute (their reason says which input moved).

The fingerprint is recorded explicitly (metadata `refresh/inputs`) rather than by `code_version`: the
specification depends on files chosen at run time (ATLAS_MODEL_CONFIG, ATLAS_VALIDATION_CONFIG), while a code
version is fixed when the definitions load.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import dagster as dg

DATA_VERSION_TAG = "dagster/data_version"
INPUTS = "refresh/inputs"
RECOMPUTED = "refresh/recomputed"
REASON = "refresh/reason"
COMPUTED_IN = "refresh/computed_in_run"
NEVER = "never materialized"


def short(version: str) -> str:
    return version[:12] if version != NEVER else version


def latest_record(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None):
    """The latest materialization record of an asset (of one partition when given), or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1).records
    return records[0] if records else None


def latest_data_version(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None) -> str:
    record = latest_record(instance, key, partition)
    if record is None or record.asset_materialization is None:
        return NEVER
    return record.asset_materialization.tags.get(DATA_VERSION_TAG) or NEVER


def partitioned_data_version(instance: dg.DagsterInstance, key: dg.AssetKey, partitions: Iterable[str]) -> str:
    """One version for every partition of an asset (an unpartitioned asset reading them all)."""
    versions = {p: latest_data_version(instance, key, p) for p in sorted(partitions)}
    if all(v == NEVER for v in versions.values()):
        return NEVER
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()


def table_version(conn, *tables: str) -> str:
    """Content hash of DuckDB tables (row count and an order-free sum of row hashes, per table)."""
    parts = []
    for table in tables:
        count, total = conn.execute(f'SELECT count(*), coalesce(sum(hash(t)), 0)::VARCHAR FROM "{table}" t').fetchone()
        parts.append(f"{table}:{count}:{total}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class StepInputs:
    """What a step's result is a function of: upstream data versions and the specification/settings in force."""

    upstream: Mapping[str, str]
    specification: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, context: dg.AssetExecutionContext, upstream: Iterable[str | dg.AssetKey],
           specification: Mapping[str, str] | None = None,
           versions: Mapping[str, str] | None = None) -> "StepInputs":
        """Latest data versions of `upstream` from the instance (`versions` supplies any computed otherwise)."""
        found = {}
        for key in upstream:
            key = dg.AssetKey.from_coercible(key)
            name = key.to_user_string()
            found[name] = (versions or {}).get(name) or latest_data_version(context.instance, key)
        return cls(dict(sorted(found.items())), dict(sorted((specification or {}).items())))

    @property
    def fingerprint(self) -> str:
        payload = {"upstream": dict(self.upstream), "specification": dict(self.specification)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def describe(self) -> str:
        things = [f"{name} {short(version)}" for name, version in self.upstream.items()]
        things += [f"{name} {short(value)}" for name, value in self.specification.items()]
        return ", ".join(things)

    def changes_since(self, recorded: Mapping | None) -> str:
        """Which inputs moved since a recorded fingerprint (for the reason of a recomputation)."""
        if not recorded:
            return "no earlier materialization with recorded inputs"
        moved = []
        for kind, now in (("upstream", self.upstream), ("specification", self.specification)):
            before = recorded.get(kind, {})
            for name in sorted(set(before) | set(now)):
                if before.get(name) != now.get(name):
                    moved.append(f"{name} {short(before.get(name, NEVER))} -> {short(now.get(name, NEVER))}")
        return "changed: " + "; ".join(moved) if moved else "inputs unchanged"

    def as_metadata(self) -> dg.MetadataValue:
        return dg.MetadataValue.json({"fingerprint": self.fingerprint, "upstream": dict(self.upstream),
                                      "specification": dict(self.specification)})


class StepRefresh:
    """The refresh decision of one asset of a step, from its last materialization (of this partition)."""

    def __init__(self, context: dg.AssetExecutionContext, inputs: StepInputs,
                 asset_key: str | dg.AssetKey | None = None, partition: str | None = None):
        self.context = context
        self.inputs = inputs
        self.key = dg.AssetKey.from_coercible(asset_key) if asset_key is not None else context.asset_key
        record = latest_record(context.instance, self.key, partition)
        self.previous = record.asset_materialization if record is not None else None
        self.previous_run = record.run_id if record is not None else None

    @property
    def logical_version(self) -> str:
        return hashlib.sha256(f"{self.key.to_user_string()}|{self.inputs.fingerprint}".encode()).hexdigest()

    def _recorded(self) -> Mapping | None:
        value = self.previous.metadata.get(INPUTS) if self.previous is not None else None
        return value.value if value is not None else None

    def unchanged(self) -> bool:
        recorded = self._recorded()
        return (recorded is not None and recorded.get("fingerprint") == self.inputs.fingerprint
                and self.previous.tags.get(DATA_VERSION_TAG) is not None)

    def reuse(self, *, still_there: bool = True, force: bool = False, what: str = "",
              overrides: Mapping[str, object] | None = None) -> dg.MaterializeResult | None:
        """The earlier result again (same data version, its metadata with `overrides`, why) when nothing it depends
        on changed; None when the step must compute."""
        if force or not still_there or not self.unchanged():
            return None
        earlier = {**self.previous.metadata, **(overrides or {})}
        computed_in = earlier.get(COMPUTED_IN)
        run = computed_in.value if computed_in is not None else self.previous_run
        reason = (f"skipped: {self.inputs.describe()} unchanged since run {run[:8]}"
                  + (f"; {what}" if what else ""))
        self.context.log.info(f"{self.key.to_user_string()}: {reason}")
        return dg.MaterializeResult(
            asset_key=self.key, data_version=dg.DataVersion(self.previous.tags[DATA_VERSION_TAG]),
            metadata={**earlier, RECOMPUTED: False, REASON: reason, COMPUTED_IN: run,
                      INPUTS: self.inputs.as_metadata()})

    def reuse_tables(self, duckdb, *tables: str, what: str = "the tables of this fit are in place"
                     ) -> dg.MaterializeResult | None:
        """`reuse` while every one of `tables` (what the step wrote, and any it reads) exists in DuckDB."""
        with duckdb.get_connection() as conn:
            present = tables_exist(conn, *tables)
        return self.reuse(still_there=present, what=what)

    def computed(self, metadata: Mapping[str, object], data_version: str | None = None) -> dg.MaterializeResult:
        """A fresh result, stamped with its inputs; `data_version` defaults to a hash of the asset's key and its
        input fingerprint (the result is a function of its inputs: the same inputs stand for the same data)."""
        if self.previous is None:
            reason = "recomputed: first materialization"
        else:
            reason = "recomputed: " + self.inputs.changes_since(self._recorded())
            if reason.endswith("inputs unchanged"):
                reason = "recomputed: inputs unchanged, but the earlier result is gone or a recomputation was forced"
        self.context.log.info(f"{self.key.to_user_string()}: {reason}")
        return dg.MaterializeResult(
            asset_key=self.key, data_version=dg.DataVersion(data_version or self.logical_version),
            metadata={**metadata, RECOMPUTED: True, REASON: reason, COMPUTED_IN: self.context.run_id,
                      INPUTS: self.inputs.as_metadata()})


@functools.lru_cache(maxsize=8)
def run_specification(run_id: str, scope: str) -> str:
    """The specification fingerprint of a scope, hashed once per run (files do not change under a run)."""
    from atlas_assets.spec import specification_fingerprint

    return specification_fingerprint(scope)


def fit_folder(instance: dg.DagsterInstance) -> str:
    """The name of the latest capability fit's folder: what every stage downstream of the fit reads, whichever
    way it was announced (a run, or a runless event that carries no data version)."""
    record = latest_record(instance, dg.AssetKey("capability_fit"))
    fit_dir = record.asset_materialization.metadata.get("fit_dir") if record and record.asset_materialization else None
    return Path(str(fit_dir.value)).name if fit_dir is not None else NEVER


def asset_refresh(context: dg.AssetExecutionContext, scope: str, *, also: Iterable[str] = (),
                  settings: Mapping[str, str] | None = None, partition: str | None = None,
                  versions: Mapping[str, str] | None = None, reads_fit: bool = False) -> StepRefresh:
    """The refresh decision of the asset being materialized: its declared upstream assets (and `also`, tables it
    reads without declaring them), the specification fingerprint of `scope` ("fit" | "publication"), any run
    settings, and with `reads_fit` the latest fit folder (stages that read it from the instance)."""
    versions = dict(versions or {})
    if reads_fit:
        also = (*also, "capability_fit")
        versions["capability_fit"] = fit_folder(context.instance)
    upstream = {key.to_user_string() for key in context.assets_def.asset_deps[context.asset_key]} | set(also)
    specification = {f"{scope}_specification": run_specification(context.run_id, scope), **(settings or {})}
    if partition is not None:
        specification["partition"] = partition
    return StepRefresh(context, StepInputs.of(context, sorted(upstream), specification, versions), partition=partition)


def tables_exist(conn, *tables: str) -> bool:
    present = {row[0] for row in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    return set(tables) <= present
