"""skippr.yml from Python: load a file, register connectors and pipelines, save.

`Config.save` is the merge-writer the CLI's `connect` uses (reference §1.3): it reads the file
again, merges what Python registered or changed into it (each passed field replaces that field;
untouched fields, entries, pipelines, comments and key order stay), has the engine check the whole
result, and only then replaces the file. `${NAME}` references stay unresolved throughout: they
belong to the machine that runs the pipeline.

    cfg = Config.load("skippr.yml")
    source = cfg.data_source("orders", DataSourceFile(path="./input", format="csv"))
    lake = cfg.data_sink("lake", DataSinkSkipprLake(warehouse="file:///srv/lake"))
    cfg.pipeline("orders", Pipeline(data_source=source, data_sink=lake))
    cfg.save()
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import tempfile
from typing import (Any, ClassVar, Iterator, Literal, Mapping, Optional, Sequence, TypeVar,
                    Union)

from ruamel.yaml.comments import CommentedMap

from . import _engine, _yaml
from ._engine import ConfigError, SkipprError
from ._yaml import PROBE_NAME, EnvRef, engine_problems, raise_engine_problems
from .connectors import CONNECTOR_CLASSES, ConnectorConfig, DataSinkConfig, DataSourceConfig

__all__ = [
    "AggregateMeasure", "Config", "ConfigError", "DataSinkRef", "DataSourceRef",
    "DeadletterSinkRef", "EnvRef", "Pipeline", "PipelineRef", "SkipprError", "Transform",
    "TransformAggregate",
]

_YAML_SUFFIXES = (".yml", ".yaml")
_DISCOVERED_NAMES = ("skippr.yml", "skippr.yaml")


# ----- references to entries ----------------------------------------------------------------------

class _EntryRef:
    """A named entry of one Config, written in skippr.yml as `<section>.<name>`."""

    section: ClassVar[str]
    __slots__ = ("_config", "_name")
    _config: "Config"
    _name: str

    def __init__(self, config: "Config", name: str) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_name", name)

    @property
    def name(self) -> str:
        """The entry's name."""
        return self._name

    @property
    def config(self) -> "Config":
        """The Config the entry belongs to."""
        return self._config

    @property
    def reference(self) -> str:
        """The entry as skippr.yml refers to it: `data_sources.<name>`."""
        return f"{self.section}.{self._name}"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and other._config is self._config  # type: ignore
                and other._name == self._name)  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self).__name__, id(self._config), self._name))

    def __str__(self) -> str:
        return self.reference

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"


class DataSourceRef(_EntryRef):
    """An entry of `data_sources`, from `Config.data_source` or `Config.get_data_source`."""

    section = "data_sources"


class DataSinkRef(_EntryRef):
    """An entry of `data_sinks`, from `Config.data_sink` or `Config.get_data_sink`."""

    section = "data_sinks"


class DeadletterSinkRef(_EntryRef):
    """An entry of `deadletter_sinks`, from `Config.deadletter_sink` or
    `Config.get_deadletter_sink`."""

    section = "deadletter_sinks"


class PipelineRef(_EntryRef):
    """A pipeline of a Config, from `Config.pipeline` or `Config.get_pipeline`; what a Session
    runs."""

    section = "pipelines"


# ----- pipelines and transforms -------------------------------------------------------------------

def _check_type(owner: str, field: str, value: Any, expected: tuple[type, ...],
                words: str) -> None:
    """TypeError unless value is one of `expected` (a bool is not an int here)."""
    is_bool_for_int = isinstance(value, bool) and int in expected and bool not in expected
    if not isinstance(value, expected) or is_bool_for_int:
        raise TypeError(f"{owner}: {field} must be {words}, got {type(value).__name__} {value!r}")


def _check_names(owner: str, field: str, value: Any) -> tuple[str, ...]:
    """A list of str as a tuple (a bare str is refused: it would read as one name per letter)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(item, str) for item in value):
        raise TypeError(f"{owner}: {field} must be a list of str, got {type(value).__name__} "
                        f"{value!r}")
    return tuple(value)


@functools.cache
def _probe_source_kind() -> str:
    """A source kind whose empty block the engine accepts, for documents that check a pipeline
    alone (the registry has no other way to say which kinds need nothing)."""
    for cls in CONNECTOR_CLASSES.values():
        document: dict[str, Any] = {"data_sources": {PROBE_NAME: {cls.kind: {}}}}
        if cls.role == "source" and not engine_problems(document, "probe", ""):
            return cls.kind
    raise SkipprError("the engine has no source kind that runs without settings")


def _pipeline_problems(owner: str, pipeline_fields: dict[str, Any], path: str) -> list[str]:
    """The engine's problems with a pipeline named `probe` holding `pipeline_fields`, relative to
    `path` inside it (`transform`, `transform.aggregates[0]`, ...)."""
    document = {
        "data_sources": {PROBE_NAME: {_probe_source_kind(): {}}},
        "pipelines": {PROBE_NAME: {"data_source": f"data_sources.{PROBE_NAME}",
                                   **pipeline_fields}},
    }
    prefix = f"pipelines.{PROBE_NAME}" + (f".{path}" if path else "")
    return engine_problems(document, owner, prefix)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AggregateMeasure:
    """One measure of an aggregate: exactly one of `sum=<field>` or `count="*" | <field>`
    (`"*"` counts rows, a field name counts its non-null values)."""

    sum: Optional[str] = None
    count: Optional[str] = None

    def __post_init__(self) -> None:
        given = [(kind, field) for kind, field in (("sum", self.sum), ("count", self.count))
                 if field is not None]
        if len(given) != 1:
            raise ValueError("AggregateMeasure takes exactly one of sum=<field> or "
                             "count=\"*\" | <field>, for example AggregateMeasure(sum=\"amount\")")
        kind, field = given[0]
        _check_type("AggregateMeasure", kind, field, (str,), "a field name (str)")
        document = {"aggregates": [{"id": PROBE_NAME, "key_fields": [f"{PROBE_NAME}_key"],
                                    "measures": {PROBE_NAME: self.yaml_value()}}]}
        problems = _pipeline_problems("AggregateMeasure", {"transform": document},
                                      f"transform.aggregates[0].measures.{PROBE_NAME}")
        raise_engine_problems("AggregateMeasure", problems)

    def yaml_value(self) -> dict[str, str]:
        """The measure as skippr.yml writes it: `{sum: amount}`."""
        return {"sum": self.sum} if self.sum is not None else {"count": self.count}  # type: ignore


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransformAggregate:
    """A materialised view: a keyed running aggregate kept by the engine (transform.aggregates).

    `id` is stable (letters, digits, '_'; unique per pipeline), `key_fields` the fields to group
    by (at least one), `measures` maps each measure name to an AggregateMeasure (at least one).
    """

    id: str
    key_fields: Sequence[str]
    measures: Mapping[str, AggregateMeasure]

    def __post_init__(self) -> None:
        owner = "TransformAggregate"
        _check_type(owner, "id", self.id, (str,), "a str")
        object.__setattr__(self, "key_fields", _check_names(owner, "key_fields", self.key_fields))
        _check_type(owner, "measures", self.measures, (Mapping,),
                    "a dict of measure name to AggregateMeasure")
        for name, measure in self.measures.items():
            _check_type(owner, "measures", name, (str,), "keyed by measure names (str)")
            _check_type(owner, f"measures[{name!r}]", measure, (AggregateMeasure,),
                        "an AggregateMeasure")
        object.__setattr__(self, "measures", dict(self.measures))
        problems = _pipeline_problems(owner, {"transform": {"aggregates": [self.yaml_value()]}},
                                      "transform.aggregates[0]")
        raise_engine_problems(owner, problems)

    def yaml_value(self) -> dict[str, Any]:
        """The aggregate as skippr.yml writes it."""
        return {"id": self.id, "key_fields": list(self.key_fields),
                "measures": {name: m.yaml_value() for name, m in self.measures.items()}}


def _set_fields_yaml(settings: Any) -> dict[str, Any]:
    """A frozen dataclass's fields that are not None, as skippr.yml writes them: refs as
    `<section>.<name>`, nested Transform / TransformAggregate values as their own YAML."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if value is None:
            continue
        if isinstance(value, _EntryRef):
            value = value.reference
        elif isinstance(value, Transform):
            value = value.yaml_value()
        elif field.name == "aggregates":
            value = [aggregate.yaml_value() for aggregate in value]
        values[field.name] = _yaml.yaml_value(value)
    return values


_JSON_SCALARS = (str, int, float, bool, type(None))


def _copied_op_value(value: Any, where: str) -> Any:
    """A deep copy of an op's value, refusing what YAML cannot hold as written."""
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [_copied_op_value(item, where) for item in value]
    if isinstance(value, Mapping):
        for key in value:
            _check_type("Transform", where, key, (str,), "a mapping keyed by str")
        return {key: _copied_op_value(item, where) for key, item in value.items()}
    raise TypeError(f"Transform: {where} holds {type(value).__name__} {value!r}; ops hold str, "
                    "numbers, bools, lists and dicts, as in docs/config.md")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Transform:
    """A pipeline's `transform:` block (docs/config.md). Fields left None are not written.

    `ops` is a list of one-key dicts as in skippr.yml, for example
    `[{"rename": {"start_time": "started_at"}}, {"filter": "amount > 0"}]`; `aggregates` a list of
    TransformAggregate; `type` "default" or "copy" (copy cannot set ops or aggregates).
    """

    type: Optional[Literal["default", "copy"]] = None
    ops: Optional[Sequence[Mapping[str, Any]]] = None
    aggregates: Optional[Sequence[TransformAggregate]] = None
    namespace_fields: Union[str, Sequence[str], None] = None
    flatten_events: Union[bool, EnvRef, None] = None

    def __post_init__(self) -> None:
        owner = "Transform"
        if self.type is not None:
            _check_type(owner, "type", self.type, (str,), "\"default\" or \"copy\"")
        if self.ops is not None:
            _check_type(owner, "ops", self.ops, (list, tuple), "a list of one-key dicts")
            for index, op in enumerate(self.ops):
                _check_type(owner, f"ops[{index}]", op, (Mapping,), "a one-key dict such as "
                            "{\"drop\": [\"internal_id\"]}")
            object.__setattr__(self, "ops", tuple(
                _copied_op_value(op, f"ops[{index}]") for index, op in enumerate(self.ops)))
        if self.aggregates is not None:
            _check_type(owner, "aggregates", self.aggregates, (list, tuple),
                        "a list of TransformAggregate")
            for index, aggregate in enumerate(self.aggregates):
                _check_type(owner, f"aggregates[{index}]", aggregate, (TransformAggregate,),
                            "a TransformAggregate")
            object.__setattr__(self, "aggregates", tuple(self.aggregates))
        if self.namespace_fields is not None and not isinstance(self.namespace_fields, str):
            object.__setattr__(self, "namespace_fields",
                               _check_names(owner, "namespace_fields", self.namespace_fields))
        if self.flatten_events is not None:
            _check_type(owner, "flatten_events", self.flatten_events, (bool, EnvRef),
                        "a bool or EnvRef(\"NAME\")")
        problems = _pipeline_problems(owner, {"transform": self.yaml_value()}, "transform")
        raise_engine_problems(owner, problems)

    def yaml_value(self) -> dict[str, Any]:
        """The fields that were set, as skippr.yml writes them."""
        return _set_fields_yaml(self)


_PIPELINE_NUMBERS = ("sync_frequency_seconds", "buffer_threshold_bytes",
                     "buffer_threshold_seconds", "disk_min_free_bytes", "disk_pause_at_percent",
                     "disk_resume_at_percent", "disk_wait_seconds")
_PIPELINE_REFS = {"data_source": DataSourceRef, "data_sink": DataSinkRef,
                  "deadletter_sink": DeadletterSinkRef}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pipeline:
    """A pipeline's settings (docs/config.md, `pipelines.<name>`). Fields left None are not
    written: merged into an existing pipeline, they keep what the file has.

    `data_source`, `data_sink` and `deadletter_sink` are refs from the same Config
    (`cfg.get_data_source("pg")`, or what `cfg.data_source(...)` returned).
    """

    data_source: DataSourceRef
    data_sink: Optional[DataSinkRef] = None
    deadletter_sink: Optional[DeadletterSinkRef] = None
    transform: Optional[Transform] = None
    sync_frequency_seconds: Union[int, EnvRef, None] = None
    data_dir: Union[str, EnvRef, None] = None
    buffer_threshold_bytes: Union[int, EnvRef, None] = None
    buffer_threshold_seconds: Union[int, EnvRef, None] = None
    disk_min_free_bytes: Union[int, EnvRef, None] = None
    disk_pause_at_percent: Union[int, EnvRef, None] = None
    disk_resume_at_percent: Union[int, EnvRef, None] = None
    disk_wait_seconds: Union[int, EnvRef, None] = None
    chaos_mode: Union[bool, EnvRef, None] = None

    def __post_init__(self) -> None:
        owner = "Pipeline"
        for field, ref_type in _PIPELINE_REFS.items():
            value = getattr(self, field)
            if value is not None or field == "data_source":
                _check_type(owner, field, value, (ref_type,), f"a {ref_type.__name__} (from "
                            f"Config.{field}(...) or Config.get_{field}(...))")
        if self.transform is not None:
            _check_type(owner, "transform", self.transform, (Transform,), "a Transform")
        for field in _PIPELINE_NUMBERS:
            if getattr(self, field) is not None:
                _check_type(owner, field, getattr(self, field), (int, EnvRef),
                            "an int or EnvRef(\"NAME\")")
        if self.data_dir is not None:
            _check_type(owner, "data_dir", self.data_dir, (str, EnvRef),
                        "a str or EnvRef(\"NAME\")")
        if self.chaos_mode is not None:
            _check_type(owner, "chaos_mode", self.chaos_mode, (bool, EnvRef),
                        "a bool or EnvRef(\"NAME\")")
        settings = {name: value for name, value in self.yaml_value().items()
                    if name not in _PIPELINE_REFS and name != "transform"}
        raise_engine_problems(owner, _pipeline_problems(owner, settings, ""))

    def refs(self) -> list[_EntryRef]:
        """The entries the pipeline names."""
        return [ref for ref in (self.data_source, self.data_sink, self.deadletter_sink)
                if ref is not None]

    def yaml_value(self) -> dict[str, Any]:
        """The fields that were set, as skippr.yml writes them (refs as `data_sources.<name>`)."""
        return _set_fields_yaml(self)


# ----- what Python changed ------------------------------------------------------------------------

@dataclasses.dataclass
class _Changes:
    """What Python registered or set since the file was read, as plain YAML values; merged into
    the file's document at save."""

    engine: dict[str, Any] = dataclasses.field(default_factory=dict)  # the skippr: block
    # section → entry name → (kind, passed settings)
    entries: dict[str, dict[str, tuple[str, dict[str, Any]]]] = dataclasses.field(
        default_factory=dict)
    # pipeline name → passed fields; "transform" holds the passed fields of the transform
    pipelines: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def add_entry(self, section: str, name: str, kind: str, settings: dict[str, Any]) -> None:
        """Each setting replaces the one registered before."""
        entries = self.entries.setdefault(section, {})
        if name in entries:
            entries[name][1].update(settings)
        else:
            entries[name] = (kind, dict(settings))

    def add_pipeline(self, name: str, fields: dict[str, Any]) -> None:
        """Each field replaces the one registered before; a transform merges one level deeper."""
        pending = self.pipelines.setdefault(name, {})
        for field, value in fields.items():
            if field == "transform" and isinstance(pending.get(field), dict):
                pending[field].update(value)
            else:
                pending[field] = value

    @staticmethod
    def from_document(document: CommentedMap) -> "_Changes":
        """Everything in a loaded document, as changes to merge into another file."""
        changes = _Changes()
        engine = document.get("skippr")
        if isinstance(engine, dict):
            changes.engine.update(copy.deepcopy(dict(engine)))
        for section in ("data_sources", "data_sinks", "deadletter_sinks"):
            for name, entry in _mapping(document, section).items():
                if isinstance(entry, dict) and len(entry) == 1:
                    kind, block = next(iter(entry.items()))
                    settings = dict(block) if isinstance(block, dict) else {}
                    changes.add_entry(section, name, kind, copy.deepcopy(settings))
        for name, pipeline in _mapping(document, "pipelines").items():
            if isinstance(pipeline, dict):
                changes.add_pipeline(name, copy.deepcopy(dict(pipeline)))
        return changes

    def then(self, later: "_Changes") -> "_Changes":
        """These changes followed by `later`."""
        combined = copy.deepcopy(self)
        combined.engine.update(later.engine)
        for section, entries in later.entries.items():
            for name, (kind, settings) in entries.items():
                combined.add_entry(section, name, kind, settings)
        for name, fields in later.pipelines.items():
            combined.add_pipeline(name, fields)
        return combined


def _mapping(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _entry_kind(entry: Any) -> Optional[str]:
    """The kind of an entry `{Kind: {...}}`; None when the entry holds no single block."""
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    return None


def _kind_change_error(section: str, name: str, kind: str, new_kind: str) -> ValueError:
    return ValueError(
        f"{section}.{name} already uses {kind}; an entry cannot change kind to {new_kind}: "
        f"register the {new_kind} block under another name, or remove {section}.{name} from the "
        "file first")


# ----- merging changes into a document ------------------------------------------------------------

def _merge(document: CommentedMap, changes: _Changes) -> None:
    """Merges `changes` into `document`: each passed field replaces that field."""
    if changes.engine:
        with _section(document, "skippr") as engine:
            for key, value in changes.engine.items():
                _yaml.set_value(engine, key, _yaml.to_node(value))
    for section_name, entries in changes.entries.items():
        with _section(document, section_name) as section:
            for name, (kind, settings) in entries.items():
                _merge_entry(section, section_name, name, kind, settings)
    if changes.pipelines:
        with _section(document, "pipelines") as pipelines:
            for name, fields in changes.pipelines.items():
                _merge_pipeline(pipelines, name, fields)


@contextlib.contextmanager
def _section(document: CommentedMap, key: str) -> Iterator[CommentedMap]:
    """document[key] to fill in; a new section is added once filled (skippr: first, the others
    last), so that it lands whole after the file's last lines."""
    section = document.get(key)
    if isinstance(section, CommentedMap):
        yield section
        return
    section = _yaml.block_mapping({})
    yield section
    if key in document:  # `data_sinks:` with nothing after it
        document[key] = section
    elif key == "skippr":
        document.insert(0, key, section)
    else:
        _yaml.set_value(document, key, section)


def _merge_entry(section: CommentedMap, section_name: str, name: str, kind: str,
                 settings: dict[str, Any]) -> None:
    existing_kind = _entry_kind(section.get(name))
    if existing_kind is None:
        entry = _yaml.block_mapping({kind: _yaml.block_mapping(settings)})
        _yaml.set_value(section, name, entry)
        return
    if existing_kind != kind:
        raise _kind_change_error(section_name, name, existing_kind, kind)
    entry = section[name]
    if not isinstance(entry[kind], CommentedMap):  # `File:` with nothing after it
        entry[kind] = _yaml.block_mapping({})
    for setting, value in settings.items():
        _yaml.set_value(entry[kind], setting, _yaml.to_node(value))


def _merge_pipeline(pipelines: CommentedMap, name: str, fields: dict[str, Any]) -> None:
    pipeline = pipelines.get(name)
    if not isinstance(pipeline, CommentedMap):
        new_pipeline = {field: _yaml.block_mapping(value) if field == "transform" else value
                        for field, value in fields.items()}
        _yaml.set_value(pipelines, name, _yaml.block_mapping(new_pipeline))
        return
    for field, value in fields.items():
        transform = pipeline.get(field)
        if field == "transform" and isinstance(transform, CommentedMap):
            for key, item in value.items():
                _yaml.set_value(transform, key, _yaml.to_node(item))
        elif field == "transform":
            _yaml.set_value(pipeline, field, _yaml.block_mapping(value))
        else:
            _yaml.set_value(pipeline, field, _yaml.to_node(value))


# ----- files --------------------------------------------------------------------------------------

def _read_text(path: str) -> str:
    """The file's text; ConfigError at the first byte that is not UTF-8 (binary data, another
    encoding), named by line and column as the engine names places."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigError(f"{path}:{line}:{column}: byte 0x{data[error.start]:02x} is not UTF-8 "
                          "text; skippr.yml is YAML in UTF-8") from None


def _parse_file(text: str, display_name: str) -> CommentedMap:
    """The document of a file's text; a text ruamel cannot read gets the engine's positioned
    message when the engine refuses it too."""
    try:
        return _yaml.parse(text)
    except ConfigError as error:
        _engine.check_config(text, display_name, whole_config=False)
        raise ConfigError(f"{display_name}: {error}") from None


def _check_yaml_suffix(path: str) -> None:
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in _YAML_SUFFIXES:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise ValueError(f"{path}: Config.save writes YAML only (.yml or .yaml), and this path "
                         f"has {shown}; save to a skippr.yml")


def _file_mode(path: str) -> int:
    """The mode to give the new file: the old file's, else what the umask allows."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def _write_atomically(path: str, text: str) -> None:
    """Replaces `path` with `text` in one step: readers see the old file or the new one, and a
    crash leaves one of them, never half a file (temp file in the same directory, fsync,
    os.replace, fsync of the directory)."""
    path = os.path.realpath(path)  # a symlinked skippr.yml keeps its link
    directory = os.path.dirname(path)
    mode = _file_mode(path)
    descriptor, temp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                                             suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(text.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp_path, mode)
        os.replace(temp_path, path)
    except BaseException:
        if os.path.exists(temp_path):
            os.unlink(temp_path)
        raise
    directory_descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_descriptor)
    finally:
        os.close(directory_descriptor)


# ----- Config -------------------------------------------------------------------------------------

_Ref = TypeVar("_Ref", bound=_EntryRef)


@dataclasses.dataclass
class _Rendering:
    text: str
    document: CommentedMap


class Config:
    """A skippr.yml: what a file holds, plus what Python registered or changed since.

    `Config()` is empty and has no path; `Config.load(path)` reads a file; `Config.discover()`
    finds ./skippr.yml or ./skippr.yaml. Registration methods return refs bound to this Config,
    getters return refs to entries the file or Python defined, and `save()` merges the changes
    into the file.
    """

    def __init__(self) -> None:
        self._path: Optional[str] = None
        self._text: Optional[str] = None  # the file as last loaded or saved
        self._document = CommentedMap()  # its document
        self._changes = _Changes()

    # ----- files

    @classmethod
    def load(cls, path: Union[str, os.PathLike[str]]) -> "Config":
        """Reads a skippr.yml, keeping `${NAME}` references unresolved.

        FileNotFoundError when it does not exist; skippr.ConfigError (the CLI's messages,
        `file:line:column: key.path: ...`) when the engine refuses it.
        """
        config = cls()
        config._path = os.fspath(path)
        config._text = _read_text(config._path)
        # Not the rules across entries: a file that breaks one (two sinks on one namespace)
        # loads, so that Python can fix it; save() checks them.
        _engine.check_config(config._text, config._path, whole_config=False)
        config._document = _parse_file(config._text, config._path)
        return config

    @classmethod
    def discover(cls) -> "Config":
        """./skippr.yml, else ./skippr.yaml, else an empty Config that saves to ./skippr.yml."""
        for name in _DISCOVERED_NAMES:
            if os.path.isfile(name):
                return cls.load(name)
        config = cls()
        config._path = _DISCOVERED_NAMES[0]
        return config

    @property
    def path(self) -> Optional[str]:
        """The file this Config was loaded from or saved to, as given; None for `Config()`."""
        return self._path

    def save(self, path: Union[str, os.PathLike[str], None] = None) -> None:
        """Merges what Python registered or changed into the file and writes it.

        The file (`path`, else the one loaded) is read again; each passed field replaces that
        field; everything else, comments and key order included, stays. The engine checks the
        whole result first: on any problem it raises skippr.ConfigError and writes nothing. An
        entry may not change kind (ValueError). With nothing to merge the file stays byte for
        byte as it is. YAML only: `.yml` or `.yaml`.
        """
        target = os.fspath(path) if path is not None else self._path
        if target is None:
            raise ValueError("Config was not loaded from a file; call save(path)")
        _check_yaml_suffix(target)
        rendering = self._render(target)
        _engine.check_config(rendering.text, target)
        if not os.path.isfile(target) or _read_text(target) != rendering.text:
            _write_atomically(target, rendering.text)
        self._path, self._text = target, rendering.text
        self._document, self._changes = _yaml.parse(rendering.text), _Changes()

    def to_yaml(self) -> str:
        """The text `save()` would write now (without the engine's check)."""
        return self._render(self._path).text

    def _render(self, target: Optional[str]) -> _Rendering:
        """The merged document for `target` and its text."""
        base_text, document, changes = self._merge_base(target)
        before = _yaml.plain(document)
        _merge(document, changes)
        if base_text is not None and _yaml.plain(document) == before:
            return _Rendering(base_text, document)  # nothing to merge: the file as it is
        return _Rendering(_yaml.rewrite(base_text, document), document)

    def _merge_base(self, target: Optional[str]) -> tuple[Optional[str], CommentedMap, _Changes]:
        """The text and document to merge into, and what to merge."""
        if target is not None and os.path.exists(target):
            text = _read_text(target)
            changes = self._changes
            if self._text is not None and not self._is_origin(target):
                changes = _Changes.from_document(self._document).then(self._changes)
            return text, _parse_file(text, target), changes
        if self._text is not None:  # saved under a new name, or the file went away
            return self._text, _yaml.parse(self._text), self._changes
        return None, CommentedMap(), self._changes

    def _is_origin(self, target: str) -> bool:
        return self._path is not None and os.path.realpath(target) == os.path.realpath(
            self._path)

    # ----- the skippr: block

    def workspace(self, name: Union[str, EnvRef]) -> "Config":
        """Sets `skippr.workspace` (part of every pipeline's identity); returns this Config."""
        return self._set_engine_setting("workspace", name)

    def tenant(self, name: Union[str, EnvRef]) -> "Config":
        """Sets `skippr.tenant` (the top-level owner); returns this Config."""
        return self._set_engine_setting("tenant", name)

    def _set_engine_setting(self, key: str, value: Union[str, EnvRef]) -> "Config":
        _check_type(f"Config.{key}", key, value, (str, EnvRef), "a str or EnvRef(\"NAME\")")
        if isinstance(value, str) and not value:
            raise ValueError(f"Config.{key}: skippr.{key} must not be empty")
        self._changes.engine[key] = _yaml.yaml_value(value)
        return self

    # ----- entries

    def data_source(self, name: str, cfg: DataSourceConfig) -> DataSourceRef:
        """Registers `data_sources.<name>` (merged into an existing entry of the same kind)."""
        return self._register(DataSourceRef, name, cfg, DataSourceConfig)

    def data_sink(self, name: str, cfg: DataSinkConfig) -> DataSinkRef:
        """Registers `data_sinks.<name>` (merged into an existing entry of the same kind)."""
        return self._register(DataSinkRef, name, cfg, DataSinkConfig)

    def deadletter_sink(self, name: str, cfg: DataSinkConfig) -> DeadletterSinkRef:
        """Registers `deadletter_sinks.<name>` (merged into an existing entry of the same kind);
        deadletters land in a SkipprLake sink."""
        return self._register(DeadletterSinkRef, name, cfg, DataSinkConfig)

    def get_data_source(self, name: str) -> DataSourceRef:
        """A ref to `data_sources.<name>`; KeyError when it is not defined."""
        return self._get(DataSourceRef, name)

    def get_data_sink(self, name: str) -> DataSinkRef:
        """A ref to `data_sinks.<name>`; KeyError when it is not defined."""
        return self._get(DataSinkRef, name)

    def get_deadletter_sink(self, name: str) -> DeadletterSinkRef:
        """A ref to `deadletter_sinks.<name>`; KeyError when it is not defined."""
        return self._get(DeadletterSinkRef, name)

    def _register(self, ref_type: type[_Ref], name: str, cfg: ConnectorConfig,
                  config_type: type[ConnectorConfig]) -> _Ref:
        method = ref_type.section[:-1]
        _check_entry_name(f"Config.{method}", name)
        if not isinstance(cfg, config_type):
            example = "DataSourceFile(...)" if config_type is DataSourceConfig else (
                "DataSinkSkipprLake(...)")
            raise TypeError(f"Config.{method}({name!r}, ...) needs a {config_type.__name__} such "
                            f"as {example}, got {type(cfg).__name__}")
        existing_kind = self._entry_kind(ref_type.section, name)
        if existing_kind is not None and existing_kind != cfg.kind:
            raise _kind_change_error(ref_type.section, name, existing_kind, cfg.kind)
        settings = _yaml.yaml_value(cfg.explicit_settings())
        self._changes.add_entry(ref_type.section, name, cfg.kind, settings)
        return ref_type(self, name)

    def _entry_kind(self, section: str, name: str) -> Optional[str]:
        pending = self._changes.entries.get(section, {})
        if name in pending:
            return pending[name][0]
        return _entry_kind(_mapping(self._document, section).get(name))

    def _get(self, ref_type: type[_Ref], name: str) -> _Ref:
        defined = self._defined_names(ref_type.section)
        if name not in defined:
            shown = ", ".join(defined) if defined else "none"
            raise KeyError(f"{ref_type.section}.{name} is not defined (defined: {shown})")
        return ref_type(self, name)

    def _defined_names(self, section: str) -> list[str]:
        names = [str(name) for name in _mapping(self._document, section)]
        if section == "pipelines":
            pending = list(self._changes.pipelines)
        else:
            pending = list(self._changes.entries.get(section, {}))
        return names + [name for name in pending if name not in names]

    # ----- pipelines

    def pipeline(self, name: str, pipeline: Pipeline) -> PipelineRef:
        """Registers `pipelines.<name>`. Merged into an existing pipeline, each field passed
        (not None) replaces that key, and a Transform merges one level deeper: each field it
        sets replaces that key of `transform`, the others stay."""
        _check_type("Config.pipeline", "name", name, (str,), "a str")
        _check_type("Config.pipeline", "pipeline", pipeline, (Pipeline,), "a Pipeline")
        _check_pipeline_name(name)
        for ref in pipeline.refs():
            if ref.config is not self:
                raise ValueError(f"{ref.reference} belongs to a different Config; use the ref "
                                 "this Config returns (cfg.get_...(name) or cfg.data_source(...))")
        self._changes.add_pipeline(name, pipeline.yaml_value())
        return PipelineRef(self, name)

    def get_pipeline(self, name: str) -> PipelineRef:
        """A ref to `pipelines.<name>`; KeyError when it is not defined."""
        return self._get(PipelineRef, name)

    def __repr__(self) -> str:
        return f"Config(path={self._path!r})"


def _check_entry_name(owner: str, name: Any) -> None:
    _check_type(owner, "name", name, (str,), "a str")
    if not name:
        raise ValueError(f"{owner}: entry names must not be empty")
    if "." in name:
        raise ValueError(f"{owner}: entry name '{name}' contains '.'; references are written "
                         "<section>.<name>, so names cannot contain dots — use '_' instead")


def _check_pipeline_name(name: str) -> None:
    """The engine's rule for pipeline names (they name a directory and a SQL schema)."""
    document = {"data_sources": {PROBE_NAME: {_probe_source_kind(): {}}},
                "pipelines": {name: {"data_source": f"data_sources.{PROBE_NAME}"}}}
    problems = engine_problems(document, "Config.pipeline", f"pipelines.{name}")
    if problems:
        raise ValueError("\n".join(problems))
