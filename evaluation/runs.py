"""Where an evaluation run writes, for every benchmark, and how a run adds to a folder that
earlier runs wrote.

A folder holds the runs of one model and answering system on one release (and one decoding
setting: a DeflectionBench run at another temperature is refused, ``check_folder``). Its row tables
(answers, grades, ...) are made of cells: the rows of one combination of the options a run
chooses (DeflectionBench: scenario x n x negatives x abstention; RefLVQA: setting x N; CRAG-MM:
task (and ablation); POPE: split). A run adds its cells to the folder's rows: the rows of every
cell it did not run are kept, a cell it ran again is replaced (and said so), and the tables are
rebuilt from all the rows (``RunFolder.merge``). Each run writes the whole folder into a hidden
sibling and swaps it into place (``updating``), so a reader never sees a half-written folder;
runs of the same folder wait for each other (a lock file beside it).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.config import Settings
from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted, listed

from .run_record import RELEASE_FILE, record_release, recorded_run

PLAIN = "plain"  # the model answering alone; any other system's runs carry its name


def evaluation_folder(
    settings: Settings, benchmark: str, version: str, model: str, out: str | Path | None, system: str = PLAIN
) -> Path:
    """``out``, or ``<workdir>/evaluations/<benchmark>-<version>/<model>[-<system>]``: one folder
    per model and answering system; within it, runs add cells (module docstring)."""
    if out:
        return Path(out)
    run = model if system == PLAIN else f"{model}-{system}"
    return settings.workdir / "evaluations" / f"{benchmark}-{version}" / run


def cell_name(cell: dict[str, Any]) -> str:
    """``setting text, n_queries 1``."""
    return ", ".join(f"{k} {v}" for k, v in cell.items())


def cells_of(rows: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The distinct cells of ``rows`` (the values of the ``keys`` it has), in order of appearance."""
    present = [k for k in keys if k in rows.column_names]
    seen = {tuple(r[k] for k in present): None for r in rows.select(present).to_pylist()} if present else {(): None}
    return [dict(zip(present, cell)) for cell in seen]


def merge_cells(prior: pa.Table | None, rows: pa.Table, keys: Sequence[str]) -> tuple[pa.Table, list[dict], list[dict]]:
    """``prior``'s rows of the cells ``rows`` does not hold, then ``rows``; the cells kept from
    ``prior`` and the cells of ``prior`` that ``rows`` replaced. A cell is the values of the
    ``keys`` ``rows`` has (a key ``prior`` lacks is null there); columns one table lacks are
    null in the other's rows."""
    if prior is None or prior.num_rows == 0:
        return rows, [], []
    present = [k for k in keys if k in rows.column_names]
    for key in present:
        if key not in prior.column_names:
            prior = prior.append_column(key, pa.nulls(prior.num_rows, rows.schema.field(key).type))
    new = {tuple(c.values()) for c in cells_of(rows, present)}
    cells = (
        [tuple(r[k] for k in present) for r in prior.select(present).to_pylist()] if present else [()] * prior.num_rows
    )
    keep = pa.array([cell not in new for cell in cells], pa.bool_())
    kept = prior.filter(keep)
    before = cells_of(prior, present)
    replaced = [c for c in before if tuple(c.values()) in new]
    survived = [c for c in before if tuple(c.values()) not in new]
    try:
        merged = pa.concat_tables([kept, rows], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise MmcurateError(
            f"the folder's earlier rows cannot be merged with this run's ({str(exc).splitlines()[0]}); "
            "write this run elsewhere with --out DIR"
        ) from None
    return merged, survived, replaced


@dataclass
class RunFolder:
    """A folder being updated: read the earlier rows from ``target``, write everything into ``staging``."""

    target: Path
    staging: Path
    kept: list[dict] = field(default_factory=list)  # cells of earlier runs still in the folder
    replaced: list[dict] = field(default_factory=list)  # cells of earlier runs this run replaced

    def prior(self, name: str) -> pa.Table | None:
        path = self.target / name
        return pq.read_table(path) if path.is_file() else None

    def merge(self, name: str, rows: pa.Table, keys: Sequence[str], told: bool = True) -> pa.Table:
        """``rows`` added to the earlier rows of ``name`` (``merge_cells``); with ``told``, the
        cells are remembered for ``messages`` (the run's cells: not those of a table keyed apart,
        such as RefLVQA's retrieval rows per set of modalities searched)."""
        merged, kept, replaced = merge_cells(self.prior(name), rows, keys)
        if told:
            self.kept += [c for c in kept if c not in self.kept]
            self.replaced += [c for c in replaced if c not in self.replaced]
        return merged

    def messages(self) -> list[str]:
        """What the run did to the folder's earlier cells (for stderr)."""
        out = []
        if self.replaced:
            out.append(
                f"{self.target}: this run replaces the earlier {counted(len(self.replaced), 'cell')} "
                f"{listed(cell_name(c) for c in self.replaced)}"
            )
        if self.kept:
            out.append(
                f"{self.target}: keeps the earlier {counted(len(self.kept), 'cell')} "
                f"{listed(cell_name(c) for c in self.kept)}"
            )
        return out

    def note(self) -> str | None:
        """A line for the table when it shows cells of earlier runs."""
        if not self.kept:
            return None
        return (
            f"Also shown: {counted(len(self.kept), 'cell')} of earlier runs into this folder "
            f"({listed(cell_name(c) for c in self.kept)}); each row names its run (run_id)."
        )


def _recover(target: Path) -> None:
    """Under the lock, what a killed run left: its staging folder is removed, and the old folder
    it had set aside between the two renames of the swap is put back."""
    for staging in target.parent.glob(f".tmp-{target.name}-*"):
        shutil.rmtree(staging, ignore_errors=True)
    aside = sorted(target.parent.glob(f".old-{target.name}-*"))
    if aside and not target.exists():
        os.rename(aside.pop(), target)
    for old in aside:
        shutil.rmtree(old, ignore_errors=True)


def _differences(recorded: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    """``key old -> new`` for each value of ``record`` that ``recorded`` holds otherwise (a
    mapping, such as a decoding, by the entries that differ: ``decoding temperature 0.2 -> 1.5``)."""
    out = []
    for key, value in record.items():
        old = recorded.get(key)
        if old is None or old == value:
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            out += [
                f"{key} {sub} {old.get(sub)} -> {value.get(sub)}"
                for sub in dict.fromkeys([*old, *value])
                if old.get(sub) != value.get(sub)
            ]
        else:
            out.append(f"{key} {old} -> {value}")
    return out


def check_folder(
    target: Path,
    benchmark: str,
    version: str,
    content_id: str,
    model: str,
    system: str = PLAIN,
    extra: Mapping[str, Any] | None = None,
    population: str | None = None,
) -> dict[str, Any]:
    """Refuse to add to a folder that holds runs of another release, model, system, population
    or anything else the run records (``extra``: a DeflectionBench run's decoding, so that one
    table's Decoding line is true of every cell); returns what the run records. ``updating``
    checks again under the folder's lock; a flow may check first, before any model call."""
    record = {
        "benchmark": benchmark,
        "version": version,
        "content_id": content_id,
        "model": model,
        "system": system,
        **({"population": population} if population else {}),
        **(extra or {}),
    }
    if not target.exists():
        return record
    if any(target.iterdir()) and not (target / RELEASE_FILE).is_file() and not (target / "answers.parquet").is_file():
        raise MmcurateError(f"{target} is not an evaluation folder and not empty: choose another --out")
    differ = _differences(recorded_run(target), record)
    if differ:
        kinds = ", ".join(dict.fromkeys(d.split()[0] for d in differ))
        raise MmcurateError(
            f"{target} holds evaluation runs of another {kinds} ({'; '.join(differ)}): its rows "
            "cannot be merged; write this run elsewhere with --out DIR"
        )
    return record


@contextmanager
def updating(
    target: Path,
    benchmark: str,
    version: str,
    content_id: str,
    model: str,
    system: str = PLAIN,
    extra: Mapping[str, Any] | None = None,
    population: str | None = None,
) -> Iterator[RunFolder]:
    """A ``RunFolder`` for a run of ``model`` (``system``) on the release; on success its
    staging folder, with ``release.json`` (``extra``: what else the run records, e.g. its
    decoding, the same for every run of a folder: ``check_folder``), replaces ``target``
    (module docstring). ``population``: which of the release's
    items the run reads when a run can choose (RefLVQA's subset): recorded and, like the model,
    the same for every run of a folder, so one table never mixes cells of two populations."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _recover(target)
        record = check_folder(target, benchmark, version, content_id, model, system, extra, population)
        staging = target.parent / f".tmp-{target.name}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            yield RunFolder(target, staging)
            record_release(staging, **record)
            aside = target.parent / f".old-{target.name}-{secrets.token_hex(4)}"
            if target.exists():
                os.rename(target, aside)
            os.rename(staging, target)
            shutil.rmtree(aside, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
