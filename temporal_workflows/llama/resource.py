"""Resources injected into steps, with the names and behaviour of LlamaIndex's ``workflows.resource``.

A step parameter annotated ``Annotated[T, Resource(factory)]`` receives what
``factory`` returns (it may be async, and may itself take resources);
``ResourceConfig(config_file=...)`` loads a JSON file into the annotated
pydantic model. Cached resources are made once per workflow instance.

Resources are made where the step runs: in process, in the caller's process;
on Temporal, in the worker (once per worker process for cached ones), so an
LLM client or a database connection never has to be serialized.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Protocol, get_args, get_origin, get_type_hints, runtime_checkable

from pydantic import BaseModel, ConfigDict

__all__ = ["Resource", "ResourceConfig", "ResourceDefinition", "ResourceDescriptor", "ResourceManager"]


@runtime_checkable
class ResourceDescriptor(Protocol):
    """What ``Resource(...)`` and ``ResourceConfig(...)`` return."""

    @property
    def name(self) -> str: ...

    @property
    def cache(self) -> bool: ...

    async def resolve(self, manager: ResourceManager) -> Any: ...

    def set_type_annotation(self, type_annotation: Any) -> None: ...

    def set_localns(self, localns: dict[str, Any] | None) -> None: ...


def _dependencies(factory: Callable[..., Any], localns: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """The factory's parameters that are themselves resources: ``(name, descriptor, annotated type)``."""
    globalns = getattr(factory, "__globals__", {})
    local = {k: v for k, v in (localns or {}).items() if k not in globalns}
    try:
        hints = get_type_hints(factory, include_extras=True, localns=local)
    except NameError:
        hints = {}
    deps: list[tuple[str, Any, Any]] = []
    for param in inspect.signature(factory).parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if get_origin(annotation) is Annotated:
            args = get_args(annotation)
            found = next((a for a in args[1:] if isinstance(a, ResourceDescriptor)), None)
            if found is not None:
                deps.append((param.name, found, args[0]))
    return deps


class _Resource:
    """A factory-made resource (see :func:`Resource`)."""

    def __init__(self, factory: Callable[..., Any], cache: bool) -> None:
        self._factory = factory
        self.name = getattr(factory, "__qualname__", type(factory).__name__)
        self.cache = cache
        self._localns: dict[str, Any] | None = None

    async def resolve(self, manager: ResourceManager) -> Any:
        kwargs: dict[str, Any] = {}
        for param, descriptor, annotated in _dependencies(self._factory, self._localns):
            descriptor.set_type_annotation(annotated)
            descriptor.set_localns(self._localns)
            kwargs[param] = await manager.get(descriptor)
        value = self._factory(**kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value

    def set_type_annotation(self, type_annotation: Any) -> None:
        return None

    def set_localns(self, localns: dict[str, Any] | None) -> None:
        self._localns = localns


@functools.lru_cache(maxsize=128)
def _config_data(config_file: str, path_selector: str | None) -> Any:
    with open(config_file, encoding="utf-8") as f:
        data: Any = json.load(f)
    if path_selector is None:
        return data
    walked = ""
    for key in path_selector.split("."):
        walked = f"{walked}.{key}" if walked else key
        data = data.get(key) if isinstance(data, dict) else None
        if not isinstance(data, dict):
            raise ValueError(
                f"Expected dictionary for configuration from {config_file} at path {walked}, got: {type(data)}"
            )
    return data


class _ResourceConfig:
    """A pydantic model loaded from a JSON file (see :func:`ResourceConfig`)."""

    def __init__(
        self,
        config_file: str,
        path_selector: str | None,
        cls_factory: type[BaseModel] | None = None,
        label: str | None = None,
        description: str | None = None,
    ) -> None:
        if Path(config_file).suffix != ".json":
            raise ValueError("Only JSON files can be used to load Pydantic-based resources.")
        self._config_file = config_file
        self.path_selector = path_selector
        self.cls_factory = cls_factory
        self.label = label
        self.description = description

    @property
    def name(self) -> str:
        return self._config_file + (f".{self.path_selector}" if self.path_selector is not None else "")

    @property
    def cache(self) -> bool:
        return True

    @property
    def config_file(self) -> str:
        path = Path(self._config_file)
        if not path.is_file():
            raise FileNotFoundError(f"No such file: {self._config_file}")
        return str(path.resolve())

    async def resolve(self, manager: ResourceManager) -> Any:
        if self.cls_factory is None:
            raise ValueError("Class factory should be set to a BaseModel subclass before calling")
        return self.cls_factory.model_validate(_config_data(self.config_file, self.path_selector))

    def set_type_annotation(self, type_annotation: Any) -> None:
        if self.cls_factory is None and isinstance(type_annotation, type) and issubclass(type_annotation, BaseModel):
            self.cls_factory = type_annotation

    def set_localns(self, localns: dict[str, Any] | None) -> None:
        return None


def Resource(factory: Callable[..., Any] | Callable[..., Awaitable[Any]], cache: bool = True) -> Any:
    """Inject ``factory()``'s result into a step parameter (``Annotated[T, Resource(factory)]``).

    Args:
        factory: Makes the resource; may be async and take resources itself.
        cache: Make it once per workflow instance (``False``: once per step invocation).
    """
    return _Resource(factory, cache)


def ResourceConfig(
    config_file: str, path_selector: str | None = None, label: str | None = None, description: str | None = None
) -> Any:
    """Inject a JSON file (or the dict at ``path_selector`` in it) validated as the annotated pydantic model."""
    return _ResourceConfig(config_file, path_selector, label=label, description=description)


class ResourceDefinition(BaseModel):
    """A step parameter that takes a resource: its name, descriptor and annotated type."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    resource: Any
    type_annotation: Any = None


class ResourceManager:
    """Makes and caches a workflow's resources (one per workflow instance)."""

    def __init__(self) -> None:
        self.resources: dict[str, Any] = {}
        self._resolving: list[str] = []

    async def set(self, name: str, val: Any) -> None:
        """Provide a resource by name (tests: a fake in place of the real one)."""
        self.resources[name] = val

    async def get(self, resource: Any) -> Any:
        """The resource ``resource`` describes, made now or taken from the cache.

        Raises:
            ValueError: resources depend on each other in a cycle.
        """
        name = resource.name
        if resource.cache and name in self.resources:
            return self.resources[name]
        if name in self._resolving:
            raise ValueError(f"Circular resource dependency detected: {' -> '.join([*self._resolving, name])}")
        self._resolving.append(name)
        try:
            value = await resource.resolve(self)
        finally:
            self._resolving.remove(name)
        if resource.cache:
            self.resources[name] = value
        return value

    def get_all(self) -> dict[str, Any]:
        return self.resources
