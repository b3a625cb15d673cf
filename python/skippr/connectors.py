"""Connector configuration classes, one per connector kind and role, generated at import from the
engine's connector registry (`skippr._engine.connector_specs()`, src/config/connectors.cpp): there
is no second catalogue to keep in step.

A source kind `File` becomes `DataSourceFile`; a sink kind `SkipprLake` becomes
`DataSinkSkipprLake`, used for data sinks and deadletter sinks alike. Each class takes its settings
as keyword-only arguments, checks their Python types, then has the engine check their values, so a
bad value fails where it is written, with the CLI's message. Only the settings passed are written
to skippr.yml; defaults stay implicit. The type stubs are connectors.pyi
(python/tools/gen_connector_stubs.py writes them).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, ClassVar, Optional

from . import _engine
from ._yaml import PROBE_NAME, EnvRef, engine_problems, raise_engine_problems

# Every block accepts `version: x.y.z`, pinning the connector (recorded; connectors are built in).
_VERSION_SETTING = "version"

_ROLE_PREFIX = {"source": "DataSource", "sink": "DataSink"}
_ROLE_SECTION = {"source": "data_sources", "sink": "data_sinks"}


@dataclasses.dataclass(frozen=True)
class SettingSpec:
    """One setting of a connector kind, as the engine's registry describes it."""

    name: str
    type: str  # "string" | "integer" | "boolean" | "string_list" | "choice"
    required: bool = False
    secret: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    min: Optional[int] = None
    max: Optional[int] = None

    @staticmethod
    def from_engine(spec: dict[str, Any]) -> "SettingSpec":
        """A spec from one entry of `connector_specs()[i]["settings"]`."""
        return SettingSpec(name=spec["name"], type=spec["type"],
                           required=bool(spec.get("required")), secret=bool(spec.get("secret")),
                           default=spec.get("default"), choices=tuple(spec.get("choices") or ()),
                           min=spec.get("min"), max=spec.get("max"))


def connector_class_name(role: str, kind: str) -> str:
    """The class for a kind in a role: ("source", "File") → "DataSourceFile"."""
    return _ROLE_PREFIX[role] + kind


class ConnectorConfig:
    """One connector block, `<Kind>: {settings}`, of a data source or sink entry.

    Instances are immutable; every setting is an attribute (its default when it was not passed).
    """

    kind: ClassVar[str]
    role: ClassVar[str]  # "source" or "sink"
    setting_specs: ClassVar[tuple[SettingSpec, ...]] = ()
    _explicit: dict[str, Any]

    def __init__(self, **settings: Any) -> None:
        if type(self) in (ConnectorConfig, DataSourceConfig, DataSinkConfig):
            raise TypeError(f"{type(self).__name__} is a base class; use a connector class such "
                            "as DataSourceFile or DataSinkSkipprLake")
        explicit = _checked_arguments(type(self), settings)
        object.__setattr__(self, "_explicit", explicit)
        for spec in self.setting_specs:
            object.__setattr__(self, spec.name, explicit.get(spec.name, spec.default))
        object.__setattr__(self, _VERSION_SETTING, explicit.get(_VERSION_SETTING))
        _check_with_engine(type(self), explicit)

    def explicit_settings(self) -> dict[str, Any]:
        """The settings that were passed, in the registry's order: what skippr.yml gets."""
        return dict(self._explicit)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one")

    def __repr__(self) -> str:
        arguments = ", ".join(f"{name}={value!r}" for name, value in self._explicit.items())
        return f"{type(self).__name__}({arguments})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._explicit == self._explicit  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(self._explicit.items())))


class DataSourceConfig(ConnectorConfig):
    """Base of the data source connector classes (`DataSourceFile`, ...)."""


class DataSinkConfig(ConnectorConfig):
    """Base of the sink connector classes (`DataSinkSkipprLake`, ...): data and deadletter sinks."""


# ----- checking arguments -------------------------------------------------------------------------

def _checked_arguments(cls: type[ConnectorConfig], settings: dict[str, Any]) -> dict[str, Any]:
    """The passed settings (None means not passed) in registry order, type-checked; TypeError as
    Python words it for missing and unknown keywords."""
    specs = {spec.name: spec for spec in cls.setting_specs}
    unknown = [name for name in settings if name not in specs and name != _VERSION_SETTING]
    if unknown:
        raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument "
                        f"'{unknown[0]}'; {cls.__name__} takes: {_setting_names(cls)}")
    missing = [spec.name for spec in cls.setting_specs
               if spec.required and settings.get(spec.name) is None]
    if missing:
        raise TypeError(f"{cls.__name__}.__init__() missing {len(missing)} required keyword-only "
                        f"argument{'s' if len(missing) > 1 else ''}: {_quoted_list(missing)}")
    explicit: dict[str, Any] = {}
    for spec in cls.setting_specs:
        value = settings.get(spec.name)
        if value is not None:
            explicit[spec.name] = _checked_value(cls, spec, value)
    version = settings.get(_VERSION_SETTING)
    if version is not None:
        explicit[_VERSION_SETTING] = _checked_value(cls, SettingSpec(_VERSION_SETTING, "string"),
                                                    version)
    return explicit


def _setting_names(cls: type[ConnectorConfig]) -> str:
    return ", ".join([spec.name for spec in cls.setting_specs] + [_VERSION_SETTING])


def _quoted_list(names: list[str]) -> str:
    quoted = [f"'{name}'" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _checked_value(cls: type[ConnectorConfig], spec: SettingSpec, value: Any) -> Any:
    """`value` as stored (lists become tuples), after checking its type against the spec."""
    where = f"{cls.__name__}: {spec.name}"
    if spec.secret:
        if not isinstance(value, EnvRef):
            variable = f"{cls.kind}_{spec.name}".upper()
            raise TypeError(
                f"{where} is a secret and refuses plaintext; pass EnvRef(\"{variable}\") and set "
                f"{variable} where the pipeline runs (the shell, or .env beside skippr.yml)")
        return value
    if spec.type == "string_list":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{where} must be a list of str, got {_type_name(value)}")
        return tuple(value)
    if isinstance(value, EnvRef):  # the engine resolves `${NAME}` for any single value
        return value
    expected = {"integer": int, "boolean": bool}.get(spec.type, str)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise TypeError(f"{where} must be {_TYPE_WORDS.get(spec.type, 'a str')} or "
                        f"EnvRef(\"NAME\"), got {_type_name(value)}")
    return value


_TYPE_WORDS = {"integer": "an int", "boolean": "a bool"}


def _type_name(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _check_with_engine(cls: type[ConnectorConfig], explicit: dict[str, Any]) -> None:
    """Has the engine read the block as a one-entry skippr.yml: its message for a bad value
    (a choice, a range, an empty name) is the CLI's, relative to the setting."""
    section = _ROLE_SECTION[cls.role]
    document = {section: {PROBE_NAME: {cls.kind: explicit}}}
    problems = engine_problems(document, cls.__name__, f"{section}.{PROBE_NAME}.{cls.kind}")
    raise_engine_problems(cls.__name__, problems)


# ----- the generated classes ----------------------------------------------------------------------

def setting_annotation(spec: SettingSpec) -> str:
    """The setting's type as the stubs write it (shown by help() and inspect.signature; the stub
    generator writes it into connectors.pyi)."""
    if spec.secret:
        return "EnvRef"
    if spec.type == "string_list":
        return "list[str]"
    if spec.type == "choice":
        return "Literal[" + ", ".join(repr(choice) for choice in spec.choices) + "] | EnvRef"
    return {"integer": "int", "boolean": "bool"}.get(spec.type, "str") + " | EnvRef"


def _signature(specs: tuple[SettingSpec, ...]) -> inspect.Signature:
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for spec in specs:
        annotation = setting_annotation(spec)
        default = inspect.Parameter.empty if spec.required else None
        if not spec.required:
            annotation = f"Optional[{annotation}]"
        parameters.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=annotation))
    parameters.append(inspect.Parameter(_VERSION_SETTING, inspect.Parameter.KEYWORD_ONLY,
                                        default=None, annotation="Optional[str | EnvRef]"))
    return inspect.Signature(parameters, return_annotation="None")


def _docstring(kind: str, role: str, specs: tuple[SettingSpec, ...]) -> str:
    noun = "data source" if role == "source" else "sink (data or deadletter)"
    lines = [f"The `{kind}` {noun} block, generated from the engine's connector registry.", "",
             "Settings (keyword-only; only those passed are written to skippr.yml):"]
    for spec in specs:
        notes = ["required"] if spec.required else []
        if spec.secret:
            notes.append("secret: EnvRef only")
        if spec.choices:
            notes.append(" | ".join(spec.choices))
        if spec.default is not None:
            notes.append(f"default {spec.default}")
        lines.append(f"    {spec.name}: {spec.type}" + (f" ({'; '.join(notes)})" if notes else ""))
    lines.append("    version: x.y.z pin (optional)")
    return "\n".join(lines)


def _make_class(spec: dict[str, Any]) -> type[ConnectorConfig]:
    kind, role = spec["kind"], spec["role"]
    name = connector_class_name(role, kind)
    settings = tuple(SettingSpec.from_engine(setting) for setting in spec["settings"])
    base = DataSourceConfig if role == "source" else DataSinkConfig

    def __init__(self: ConnectorConfig, **values: Any) -> None:
        base.__init__(self, **values)

    __init__.__qualname__ = f"{name}.__init__"
    __init__.__signature__ = _signature(settings)  # type: ignore[attr-defined]
    namespace = {"kind": kind, "role": role, "setting_specs": settings, "__init__": __init__,
                 "__doc__": _docstring(kind, role, settings), "__module__": __name__}
    return type(name, (base,), namespace)


CONNECTOR_CLASSES: dict[str, type[ConnectorConfig]] = {
    cls.__name__: cls for cls in map(_make_class, _engine.connector_specs())}
globals().update(CONNECTOR_CLASSES)

__all__ = ["ConnectorConfig", "DataSinkConfig", "DataSourceConfig"] + sorted(CONNECTOR_CLASSES)
