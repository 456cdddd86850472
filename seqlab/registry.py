"""Config families registered by name: encoders, decoders and featurizers.

Each family is a frozen pydantic config class with a ``type`` literal, registered with the registry
of its kind (``@ENCODERS.register``). Config fields typed :data:`Registry.field` accept a mapping whose
``type`` names any registered class and validate it with that class, so adding a family edits no
central union and no error formatter: a new model is new files plus configs.

Built-in families are imported (not guarded by ``try``) by their packages, so a family whose module
fails to import raises instead of vanishing; a plug-in registers by being imported before its configs
are read.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, SerializeAsAny
from pydantic_core import PydanticCustomError


class LayerConfig(BaseModel):
    """Base of every config object: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigCheckError(ValueError):
    """A config that validates field by field but cannot be built.

    ``key`` is dotted and relative to the object that was checked (``hidden``, ``encoders.1.heads``);
    the caller prefixes its own position, so the message names the key as ``--set`` spells it."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key, self.message = key, message

    def within(self, prefix: str | int) -> ConfigCheckError:
        return ConfigCheckError(f"{prefix}.{self.key}" if self.key else str(prefix), self.message)


C = TypeVar("C", bound=LayerConfig)


class Registry(Generic[C]):
    """Name -> config class for one kind of component (``encoder``, ``decoder``, ``feature``)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._classes: dict[str, type[C]] = {}
        # the annotation config fields use: validated by the registered class, dumped with its fields
        self.field = Annotated[SerializeAsAny[LayerConfig], BeforeValidator(self.validate)]

    def register(self, cls: type[C]) -> type[C]:
        """Class decorator. The name is the default of the class's ``type`` field."""
        field = cls.model_fields.get("type")
        if field is None or not isinstance(field.default, str):
            raise TypeError(f"{cls.__name__}: a registered config needs a `type` field with a string default")
        name = field.default
        if name in self._classes and self._classes[name] is not cls:
            raise ValueError(f"{self.kind} type '{name}' is already registered by {self._classes[name].__name__}")
        self._classes[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(self._classes)

    def get(self, name: str) -> type[C]:
        return self._classes[name]

    def validate(self, value: Any) -> LayerConfig:
        if isinstance(value, tuple(self._classes.values())):
            return value
        if not isinstance(value, dict):
            raise PydanticCustomError("registry_mapping", f"expected a mapping with a 'type' key ({self.kind})")
        name = value.get("type")
        if not isinstance(name, str) or name not in self._classes:
            raise PydanticCustomError(
                "registry_type",
                "{detail}",
                {"detail": f"unknown {self.kind} type {name!r}; known: {', '.join(self.names())}"},
            )
        return self._classes[name].model_validate(value)


def check_error(err: ConfigCheckError) -> PydanticCustomError:
    """A :class:`ConfigCheckError` as the pydantic error a model validator raises (see config.py)."""
    return PydanticCustomError("config_check", "{message}", {"key": err.key, "message": err.message})
