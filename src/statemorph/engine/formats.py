"""The ONE answer to "which savepoint format is this?": :func:`format_of` returns the format
object of a savepoint, and every verb and engine entry point goes through it instead of testing
for a format's files itself.

A format object knows how to tell that a directory is in its format (:meth:`~SavepointFormat.claims`)
and what each operation means for it: ``inspect`` (what the savepoint holds), ``schema_sections``
(its schema file), ``plan`` (the one planner, fed by the format's state descriptions), ``rewrite``
(a migration with the runner the caller chose: :class:`Local` threads or :class:`OnSpark` tasks),
``read`` (one state, as an Arrow table or a DataFrame) and ``convert`` (into the other form). The
four runner x format pairs are the four engine modules: :mod:`.local` and :mod:`.spark_parquet`
(the Parquet form), :mod:`.flink` and :mod:`.spark_flink` (Flink's canonical savepoints; a native savepoint or
retained RocksDB checkpoint is read by them through its format's ``reader``, and converted and
migrated by :mod:`.flink_native`); this module is the only one that picks among them.

A new format is one subclass of :class:`SavepointFormat` and one entry in :data:`FORMATS`
(docs/architecture.md, "How to add a savepoint format"). The first format whose ``claims`` is true
wins: a format whose files are a special case of another's goes before it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import pyarrow as pa
import pyarrow.fs as pafs

from ..bulk.chunks import DEFAULT_THREADS
from ..errors import NotASavepointError, SavepointNotFoundError, UsageError
from ..savepoint.description import StateDescription
from ..savepoint.flink import FlinkSavepoint, is_flink_savepoint
from ..savepoint.flink.description import describe_operators
from ..savepoint.flink.native import is_native
from ..savepoint.flink.native_view import NativeFlinkSavepoint
from ..savepoint.flink.operator_state_migrate import state_owners
from ..savepoint.parquet.format import METADATA_FILE
from ..savepoint.parquet.reader import read_metadata
from ..savepoint.storage import Location
from ..schema_file import SchemaFile, descriptors_for_operators, descriptors_for_savepoint, toml_key
from ..state.descriptors import StateDescriptor
from ..typeutils import SnapshotRegistry, TypeSerializer
from . import spark_parquet
from .convert import ConvertReport, flink_to_parquet, parquet_to_flink
from .flink import (
    FlinkMigrateReport,
    FlinkPlan,
    OperatorDescriptors,
    check_on_error_whole,
    inspect_flink_savepoint,
    migrate_flink_savepoint,
    plan_flink_savepoint,
    read_flink_state_table,
)
from .flink_native import MIGRATES_TO, convert_native, inspect_native, migrate_native
from .local import (
    DEFAULT_BATCH,
    Progress,
    RewriteReport,
    TransformFactory,
    inspect_savepoint,
    migrate_parquet_savepoint,
    read_state_table,
)
from .plan import RewritePlan, plan_rewrite
from .spark_flink import read_flink_state_df

SavepointPath = str | os.PathLike[str] | Location
"""A savepoint: a local directory, or a URI (``s3://...``) some formats read in place."""

SparkSession = Any
"""A ``pyspark.sql.SparkSession`` (pyspark is an optional dependency, so it is not typed here)."""
DataFrame = Any
"""A ``pyspark.sql.DataFrame``."""

StateDescriptors = Iterable[StateDescriptor] | Mapping[str, StateDescriptor]
"""The new descriptors of a savepoint whose states belong to no operator (the Parquet form)."""
Descriptors = StateDescriptors | OperatorDescriptors
"""The new state descriptors: :data:`StateDescriptors` for the Parquet form, a list per operator
uid or uid hash (:data:`~statemorph.engine.flink.OperatorDescriptors`) for a Flink savepoint."""

SavepointPlan = RewritePlan | FlinkPlan
"""A plan of either format: the same surface (``summary``, ``exit_status``, ``states``,
``raise_if_incompatible``, ``check_fields``)."""

MigrateReport = RewriteReport | FlinkMigrateReport
"""What a rewrite did, in either format: ``to_dict``, ``summary``, ``details``, ``conclusion``."""


@dataclass(frozen=True)
class Local:
    """Run on this machine: ``threads`` worker threads. ``batch_size`` and ``transform`` (a
    replacement of the migration step, for benchmarks) apply to the Parquet form, whose rewrite
    runs batch by batch; a Flink savepoint is rewritten key group by key group."""

    threads: int = DEFAULT_THREADS
    batch_size: int = DEFAULT_BATCH
    transform: TransformFactory | None = None


@dataclass(frozen=True)
class OnSpark:
    """Run as tasks of the Spark ``session``. ``tasks``: how many key-group ranges a Flink
    savepoint's streams are cut into (default twice the default parallelism), or ``task_bytes``:
    about how many stored bytes each range or piece of a key group holds, ``threads`` the
    worker threads of each such task; ``transform`` and ``verify`` (sha256 of each source file
    checked on the driver first) apply to the Parquet form."""

    session: SparkSession
    tasks: int | None = None
    task_bytes: int | None = None
    threads: int = 2
    transform: TransformFactory | None = None
    verify: bool = True


Runner = Local | OnSpark
"""Where a rewrite or a read runs; the caller chooses."""


class SavepointFormat(ABC):
    """One savepoint format: how it is recognised and what each operation means for it."""

    name: ClassVar[str]
    """The ``format`` word of the ``--json`` documents (``flink``, ``parquet``)."""
    title: ClassVar[str]
    """How a message names the format ("the Parquet form")."""
    has_operators: ClassVar[bool]
    """Whether states belong to operators (a schema file names them ``[operators.<uid>]``)."""
    spark_reads_in_place: ClassVar[bool]
    """Whether Spark tasks read its URIs and write the result's files themselves, so the CLI
    does not stage them (:func:`statemorph.cli.main.read_in_place`)."""
    reports_progress: ClassVar[bool]
    """Whether a local :meth:`rewrite` calls ``progress(state, entries)`` as it goes (a progress
    bar is shown only then)."""
    converts_to: ClassVar[tuple[str, ...]]
    """What :meth:`convert` writes (``convert --to``: ``parquet``, ``canonical``, ``native``), the default first."""
    migrates_to: ClassVar[tuple[str, ...]]
    """What :meth:`rewrite` writes (``migrate --to``: the format's own form; a native savepoint
    also ``native``), the default first."""

    @abstractmethod
    def claims(self, path: SavepointPath) -> bool:
        """True when ``path`` holds this format's metadata file (by name: what that file is, the
        format's reader judges, so every verb refuses a FIFO or a symlink the same way)."""

    @abstractmethod
    def inspect(self, path: str, *, names: Sequence[str] = ()) -> dict[str, Any]:
        """The ``statemorph inspect --json`` document; ``names`` are a schema file's operator
        names, matched to the operators (only for a format with operators)."""

    @abstractmethod
    def schema_sections(self, path: str) -> list[tuple[str, Mapping[str, StateDescription]]]:
        """The savepoint's states per schema-file section (``states``, ``operators.<uid>.states``)."""

    @abstractmethod
    def plan(self, path: str, schema: SchemaFile, *,
             registry: SnapshotRegistry | None = None) -> tuple[SavepointPlan, Descriptors]:
        """The plan ``check`` prints and ``migrate`` executes for ``schema``, and the descriptors
        the schema file gives (what :meth:`rewrite` takes)."""

    @abstractmethod
    def rewrite(self, src: SavepointPath, dst: SavepointPath, descriptors: Descriptors, *, runner: Runner,
                on_error: str = "raise", progress: Progress | None = None, to: str | None = None) -> MigrateReport:
        """Write ``dst``: ``src`` with every state the plan migrates in its new schema, in the form
        ``to`` names (one of :attr:`migrates_to`; default the first)."""

    @abstractmethod
    def read(self, path: SavepointPath, state: str, *, runner: Runner, operator: str | None = None,
             flatten: bool = True, on_error: str = "raise") -> pa.Table | DataFrame:
        """One state decoded: an Arrow table with :class:`Local`, a DataFrame with :class:`OnSpark`."""

    @abstractmethod
    def convert(self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str | None = None,
                registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
        """Write ``src`` in the other form at ``dst``: ``to``, one of :attr:`converts_to` (default
        the first; another is :meth:`target`'s usage error)."""

    def target(self, src: SavepointPath, to: str | None, *, migrate: bool = False) -> str:
        """The form ``convert --to`` (``migrate --to`` when ``migrate``) names for ``src``, or a
        usage error naming the ones it has."""
        forms, verb = (self.migrates_to, "migrates") if migrate else (self.converts_to, "converts")
        if to is None:
            return forms[0]
        if to not in forms:
            raise UsageError(f"--to {to}: {_shown(src)} is {self.title}, which {verb} to {' or '.join(forms)} only")
        return to


class FlinkCanonical(SavepointFormat):
    """Flink's canonical savepoints: ``_metadata`` and keyed-state files, states per operator."""

    name = "flink"
    title = "a Flink savepoint"
    has_operators = True
    spark_reads_in_place = True
    reports_progress = False
    converts_to: ClassVar[tuple[str, ...]] = ("parquet",)
    migrates_to: ClassVar[tuple[str, ...]] = ("canonical",)
    reader: ClassVar[type[FlinkSavepoint]] = FlinkSavepoint
    """What opens a savepoint of this format for the canonical readers (inspect, plan, read):
    a subclass reads other files as canonical streams (:class:`FlinkNative`)."""

    def claims(self, path: SavepointPath) -> bool:
        return is_flink_savepoint(path)

    def inspect(self, path: str, *, names: Sequence[str] = ()) -> dict[str, Any]:
        return inspect_flink_savepoint(path, names=names, reader=self.reader)

    def schema_sections(self, path: str) -> list[tuple[str, Mapping[str, StateDescription]]]:
        return [(f"operators.{toml_key(op.ident)}.states", op.states)
                for op in describe_operators(self.reader(path))]

    def plan(self, path: str, schema: SchemaFile, *,
             registry: SnapshotRegistry | None = None) -> tuple[SavepointPlan, Descriptors]:
        sp = self.reader(path, registry)
        operators = state_owners(sp, describe_operators(sp), list(schema.operators))
        descriptors = descriptors_for_operators(schema, operators)
        return plan_flink_savepoint(path, descriptors, registry=registry, reader=self.reader), descriptors

    def rewrite(self, src: SavepointPath, dst: SavepointPath, descriptors: Descriptors, *, runner: Runner,
                on_error: str = "raise", progress: Progress | None = None, to: str | None = None) -> MigrateReport:
        self.target(src, to, migrate=True)
        descriptors = _operator_descriptors(src, descriptors)
        if isinstance(runner, OnSpark):
            return migrate_flink_savepoint(src, dst, descriptors, threads=runner.threads, on_error=on_error,
                                           spark=runner.session, tasks=runner.tasks, task_bytes=runner.task_bytes)
        return migrate_flink_savepoint(src, dst, descriptors, threads=runner.threads, on_error=on_error)

    def read(self, path: SavepointPath, state: str, *, runner: Runner, operator: str | None = None,
             flatten: bool = True, on_error: str = "raise") -> pa.Table | DataFrame:
        if operator is None:
            raise UsageError(f"{_shown(path)} is a Flink savepoint: name the operator (operator=<uid or uid hash>)")
        if isinstance(runner, OnSpark):
            return read_flink_state_df(runner.session, path, operator, state, flatten=flatten, tasks=runner.tasks,
                                       reader=self.reader)
        return read_flink_state_table(_local(path), operator, state, threads=runner.threads, reader=self.reader)

    def convert(self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str | None = None,
                registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
        self.target(src, to)
        return flink_to_parquet(src, dst, registry=registry, rows_per_file=rows_per_file)


class FlinkNative(FlinkCanonical):
    """Flink's native savepoints and retained checkpoints of the RocksDB backend: ``_metadata``
    naming each subtask's RocksDB files (a checkpoint's shared ones in its job directory's
    ``shared/``). Read through :class:`~statemorph.savepoint.flink.native_view.NativeFlinkSavepoint`,
    which lays each key group out as a canonical block, so inspect, plan and read are the canonical
    format's with that reader; convert and rewrite go by way of a canonical savepoint
    (:mod:`.flink_native`). Its files are a special case of a canonical savepoint's (``_metadata``):
    it comes before :class:`FlinkCanonical` in :data:`FORMATS`."""

    title = "a Flink native savepoint or retained checkpoint"
    spark_reads_in_place = False
    converts_to = ("parquet", "canonical", "native")
    migrates_to = MIGRATES_TO
    reader = NativeFlinkSavepoint

    def claims(self, path: SavepointPath) -> bool:
        return Location.of(path) is None and is_native(_local(path))

    def inspect(self, path: str, *, names: Sequence[str] = ()) -> dict[str, Any]:
        return inspect_native(path, names=names)

    def rewrite(self, src: SavepointPath, dst: SavepointPath, descriptors: Descriptors, *, runner: Runner,
                on_error: str = "raise", progress: Progress | None = None, to: str | None = None) -> MigrateReport:
        to = self.target(src, to, migrate=True)
        descriptors = _operator_descriptors(src, descriptors)
        if to == "native" and isinstance(runner, OnSpark):
            raise UsageError(f"--to native: {_shown(src)} is migrated into a native savepoint on this machine; "
                             f"run it with the local engine (the Spark engine writes a canonical savepoint)")
        if to == "native":
            check_on_error_whole(on_error)
        return migrate_native(_local(src), dst, descriptors, lambda canonical: cast(FlinkMigrateReport, FLINK.rewrite(
            canonical, dst, descriptors, runner=runner, on_error=on_error, progress=progress)), to=to)

    def convert(self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str | None = None,
                registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
        return convert_native(src, dst, to=self.target(src, to), registry=registry, rows_per_file=rows_per_file)


class ParquetForm(SavepointFormat):
    """statemorph's Parquet form: ``_metadata.json`` and one Parquet dataset per state."""

    name = "parquet"
    title = "the Parquet form"
    has_operators = False
    spark_reads_in_place = False
    reports_progress = True
    converts_to = ("canonical",)
    migrates_to = ("parquet",)

    def claims(self, path: SavepointPath) -> bool:
        loc = Location.of(path)
        if loc is not None:
            return bool(loc.child(METADATA_FILE).kind() != pafs.FileType.NotFound)
        return os.path.lexists(os.path.join(_local(path), METADATA_FILE))

    def inspect(self, path: str, *, names: Sequence[str] = ()) -> dict[str, Any]:
        return inspect_savepoint(path)

    def schema_sections(self, path: str) -> list[tuple[str, Mapping[str, StateDescription]]]:
        return [("states", read_metadata(path).states)]

    def plan(self, path: str, schema: SchemaFile, *,
             registry: SnapshotRegistry | None = None) -> tuple[SavepointPlan, Descriptors]:
        md = read_metadata(path)
        descriptors = descriptors_for_savepoint(schema, md)
        return plan_rewrite(path, md, descriptors, registry=registry), descriptors

    def rewrite(self, src: SavepointPath, dst: SavepointPath, descriptors: Descriptors, *, runner: Runner,
                on_error: str = "raise", progress: Progress | None = None, to: str | None = None) -> MigrateReport:
        self.target(src, to, migrate=True)
        descriptors = _state_descriptors(src, descriptors)
        if isinstance(runner, OnSpark):
            return spark_parquet.migrate_parquet_savepoint(runner.session, _local(src), _local(dst), descriptors,
                                                           on_error=on_error, transform=runner.transform,
                                                           verify=runner.verify)
        return migrate_parquet_savepoint(_local(src), _local(dst), descriptors, threads=runner.threads,
                                         batch_size=runner.batch_size, on_error=on_error, progress=progress,
                                         transform=runner.transform)

    def read(self, path: SavepointPath, state: str, *, runner: Runner, operator: str | None = None,
             flatten: bool = True, on_error: str = "raise") -> pa.Table | DataFrame:
        if isinstance(runner, OnSpark):
            return spark_parquet.read_parquet_state_df(runner.session, _local(path), state, flatten=flatten,
                                                       on_error=on_error, verify=runner.verify)
        return read_state_table(_local(path), state, flatten=flatten, threads=runner.threads)

    def convert(self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str | None = None,
                registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
        self.target(src, to)
        return parquet_to_flink(src, dst, registry=registry)


FLINK = FlinkCanonical()
NATIVE = FlinkNative()
PARQUET = ParquetForm()
FORMATS: tuple[SavepointFormat, ...] = (NATIVE, FLINK, PARQUET)
"""Every savepoint format, asked in this order (the first that claims a path is its format)."""


def format_of(path: SavepointPath) -> SavepointFormat:
    """The format of the savepoint at ``path``. A path that does not exist (or is no directory)
    is :class:`~statemorph.errors.SavepointNotFoundError`; a directory no format claims is
    :class:`~statemorph.errors.NotASavepointError` (both usage errors, 2)."""
    for fmt in FORMATS:
        if fmt.claims(path):
            return fmt
    if Location.of(path) is None and not os.path.isdir(path):  # type: ignore[arg-type]
        raise SavepointNotFoundError(f"savepoint {_shown(path)} does not exist or is not a directory")
    raise NotASavepointError.at(_shown(path))


def flink_reader(path: SavepointPath) -> type[FlinkSavepoint]:
    """What opens the Flink savepoint at ``path`` for the canonical readers: the reader of the
    Flink format that claims it (:attr:`FlinkCanonical.reader`), else the canonical reader, whose
    refusal is the one every reader gives. For the Flink entry points that are no format operation
    (operator state, ``savepoint_metadata``)."""
    for fmt in FORMATS:
        if isinstance(fmt, FlinkCanonical) and fmt.claims(path):
            return fmt.reader
    return FlinkSavepoint


def _operator_descriptors(path: SavepointPath, descriptors: Descriptors) -> OperatorDescriptors:
    """``descriptors`` as a Flink savepoint takes them (per operator), or a usage error."""
    if not isinstance(descriptors, Mapping) or any(isinstance(v, StateDescriptor) for v in descriptors.values()):
        raise UsageError(f"{_shown(path)} is a Flink savepoint, whose states belong to operators: give the new "
                         f"descriptors per operator, {{'<operator uid or uid hash>': [descriptors]}}")
    return cast(OperatorDescriptors, descriptors)


def _state_descriptors(path: SavepointPath, descriptors: Descriptors) -> StateDescriptors:
    """``descriptors`` as the Parquet form takes them, or a usage error for a list per operator."""
    if isinstance(descriptors, Mapping) and not all(isinstance(d, StateDescriptor) for d in descriptors.values()):
        raise UsageError(f"{_shown(path)} is in the Parquet form, whose states belong to no operator: give the new "
                         f"descriptors as a list (or by state name)")
    return cast(StateDescriptors, descriptors)


def _shown(path: SavepointPath) -> str:
    return path.uri if isinstance(path, Location) else os.fspath(path)


def _local(path: SavepointPath) -> str | os.PathLike[str]:
    """A local path: the Parquet form is read and written on local (or mounted) filesystems; the
    CLI stages its URIs."""
    if isinstance(path, Location):
        raise UsageError(f"{path.uri}: the Parquet form is read from a local path (stage the URI first)")
    return path


# -- the API's entry points: the format decides, the caller chose the runner ------------------------

def migrate_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str], new_descriptors: Descriptors, *,
                      threads: int = DEFAULT_THREADS, batch_size: int = DEFAULT_BATCH, on_error: str = "raise",
                      progress: Progress | None = None, transform: TransformFactory | None = None,
                      to: str | None = None) -> MigrateReport:
    """Rewrite savepoint ``src`` into a new savepoint ``dst`` for the new descriptors, on this
    machine (:meth:`SavepointFormat.rewrite` of :func:`format_of` ``src``).

    A Flink savepoint takes the descriptors per operator, ``{"<uid or uid hash>": [descriptors]}``,
    and gives a :class:`~statemorph.engine.flink.FlinkMigrateReport`; the Parquet form takes a list
    and gives a :class:`~statemorph.engine.local.RewriteReport`. An incompatible state raises
    :class:`~statemorph.errors.IncompatibleSchemaError` before anything is written; ``dst``
    appears complete or not at all. ``to`` names the form written (:attr:`SavepointFormat.migrates_to`:
    a native savepoint or retained checkpoint writes a ``canonical`` savepoint, the default, or a
    ``native`` one)."""
    src = os.fspath(src)
    return format_of(src).rewrite(src, dst, new_descriptors, on_error=on_error, progress=progress, to=to,
                                  runner=Local(threads=threads, batch_size=batch_size, transform=transform))


def convert_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, to: str | None = None,
                      registry: SnapshotRegistry | None = None, rows_per_file: int = 1_000_000) -> ConvertReport:
    """Convert ``src`` into the other form at ``dst``: a Flink savepoint becomes the Parquet form,
    a Parquet savepoint converted from Flink becomes a Flink savepoint again; a native savepoint
    or retained checkpoint becomes the Parquet form or, ``to="canonical"``, a canonical savepoint,
    or, ``to="native"``, a self-contained native savepoint (a checkpoint's files gathered).
    ``to`` names the form (:attr:`SavepointFormat.converts_to`; default the format's first)."""
    return format_of(src).convert(src, dst, to=to, registry=registry, rows_per_file=rows_per_file)


def check_savepoint(path: str | os.PathLike[str], new_descriptors: Iterable[StateDescriptor], *,
                    key_serializer: TypeSerializer[Any] | None = None,
                    namespace_serializers: Mapping[str, TypeSerializer[Any]] | None = None,
                    registry: SnapshotRegistry | None = None) -> RewritePlan:
    """The dry run of a savepoint in the Parquet form: judge ``new_descriptors`` (and optionally a
    new key serializer and namespace serializers) against it; reads the metadata only. The answer
    is the plan ``migrate`` would execute. States without a descriptor are kept as they are;
    descriptors without a state are new states. A damaged metadata file raises SavepointError.
    (A Flink savepoint is planned per operator: :func:`statemorph.engine.plan_flink_savepoint`.)"""
    return plan_rewrite(path, read_metadata(path), new_descriptors, key_serializer=key_serializer,
                        namespace_serializers=namespace_serializers, registry=registry, new_states=True)


__all__ = ["FLINK", "FORMATS", "NATIVE", "PARQUET", "DataFrame", "Descriptors", "FlinkCanonical", "FlinkNative",
           "Local", "MigrateReport", "OnSpark", "ParquetForm", "Runner", "SavepointFormat", "SavepointPlan",
           "SparkSession", "StateDescriptors", "check_savepoint", "convert_savepoint", "flink_reader", "format_of",
           "migrate_savepoint"]
