"""skippr: the skipprd engine as a Python module — the same engine and the same skippr.yml as
the ``skipprd`` command (docs/python.md)."""

from ._engine import (ConfigError, ConflictError, CorruptionError, InternalError,
                      InvalidArgumentError, NoSpaceError, NotFoundError, NotSupportedError,
                      SkipprError, StorageError, UnavailableError, version as __version__)
from .config import (AggregateMeasure, Config, DataSinkRef, DataSourceRef, DeadletterSinkRef,
                     EnvRef, Pipeline, PipelineRef, Transform, TransformAggregate)
from . import connectors as _connectors
from .connectors import *  # noqa: F401,F403 — DataSourceFile, DataSinkSkipprLake, ...
from .session import Result, Session

__all__ = [
    "AggregateMeasure", "Config", "ConfigError", "ConflictError", "CorruptionError",
    "DataSinkRef", "DataSourceRef", "DeadletterSinkRef", "EnvRef", "InternalError",
    "InvalidArgumentError", "NoSpaceError", "NotFoundError", "NotSupportedError", "Pipeline",
    "PipelineRef", "Result", "Session", "SkipprError", "StorageError", "Transform",
    "TransformAggregate", "UnavailableError",
]
__all__ += _connectors.__all__  # the connector classes, generated from the engine's registry
