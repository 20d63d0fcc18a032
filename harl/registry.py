"""Every stage kind, found by slot and kind: harl's own and users' alike.

A kind registers itself at the bottom of the module that defines it::

    register("returns", GAEConfig, lambda config, parts: GAE(config), family="on_policy")

and the loader, the family checks, ``harl stages`` and the composition root read this
registry; none of them lists kinds.  harl's own kinds are found by importing, the first
time a slot is asked for, the modules that can define them (``BUILTIN``): every module of
the stage packages, the top-level modules of ``harl/envs`` (an env kind registers at the
bottom of its adapter) and of ``harl/logging`` (sinks).  So a new objective, env kind or
sink is one new module, and no table lists them.  Scanning instead of a name convention
(kind "vmas" lives in ``vmas_env.py``) or entry points (which need an install) keeps a
kind's name free and works from a source checkout; it stays cheap because adapters and
sinks import their optional package only when their kind is built (a test holds them to
it).  A subprocess env worker never scans: unpickling its env config imports the config's
module, which registers its kind.

A *family* (on-policy actor-critic, off-policy actor-critic, value decomposition, a user's
own) is registered the same way, with ``register_family`` at the bottom of its module: it says
what it builds and in which order (``harl.families.Family``).  A stage kind names the family it
belongs to (``family="on_policy"``), and a pipeline's family is its collector kind's.  harl's
own families are the modules of ``harl/families``; a user's registers when its module is
imported, which naming one of its kinds (``"my_pkg.family:CollectorConfig"``) does.

A user's kind is ``kind = "my_pkg.module:Name"`` (``Name`` an attrs config class that its
module registered) or the name of an entry point in the ``harl.stages`` group of an
installed package (pointing at such a class).  Both are validated exactly like harl's own.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any, Protocol

import attrs

from harl.errors import ConfigError, deprecated
from harl.user_import import import_module

ANY_FAMILY = "any"
"""The family of a kind that any family may use (an env, a sink, a shared objective); a kind
shared by some families only names them as a tuple: ``family=("on_policy", "off_policy")``.
``"both"``, its name when there were two families, is still read (``OLD_ANY_FAMILY``)."""
OLD_ANY_FAMILY = "both"

SLOTS = ("env", "collector", "buffer", "returns", "critic", "updater", "updater.objective", "sink", "script",
         "role")
"""Slots whose table has a ``kind``; ``updater.objective`` is nested in ``[updater]``; ``sink``:
the run's logging sinks (csv, tensorboard, mlflow, wandb, a user's own), set by ``[logging]``;
``script``: a scripted team's agents (``harl.teams.scripted``; built by
``factory(config, obs_spaces, act_spaces, seed)``); ``role``: how a team of ``[teams]`` plays,
named by its table's ``role`` key (``harl.roles``; built by ``factory(config, team)``)."""

PROTOCOLS: dict[str, tuple[str, ...]] = {
    "collector": ("collect", "steps_per_iteration"),
    "buffer": (),
    "returns": ("compute",),
    "critic": ("parameters", "state_dict", "load_state_dict"),
    "updater.objective": ("update", "optimizer", "base_lr"),
    "updater.objective/on_policy": ("ratio",),
    "updater.objective/off_policy": ("stat_names", "next_action", "initial_action", "updated_action", "soft_update",
                                     "state_dict", "load_state_dict"),
    "sink": ("write", "close"),
    "script": ("act",),
}
"""The attributes a built stage of each slot must have (docs/your-own-stage.md explains them)."""

STAGE_PACKAGES = ("harl.collect", "harl.buffers", "harl.returns", "harl.update")
"""Packages whose modules (all, recursively) register harl's own stage kinds on import."""

BUILTIN: dict[str, tuple[tuple[str, bool], ...]] = {
    **{slot: tuple((p, True) for p in STAGE_PACKAGES) for slot in SLOTS if slot not in ("env", "sink", "script", "role")},
    "env": (("harl.envs", False),),
    "sink": (("harl.logging", False),),
    "script": (("harl.teams.scripted", False),),
    "role": (("harl.roles", False),),
    "family": (("harl.families", False),),
}
"""slot -> (package, recursive): where harl's own kinds of the slot are defined.  Env adapters and
sinks sit at the top level of their package (a package of its own, like ``harl.envs.smax``'s
siblings ``air_combat/``, registers in its ``__init__``)."""

ENTRY_POINT_GROUP = "harl.stages"

Check = Callable[[Any, Mapping[str, Any]], Iterable[tuple[list[str], str]]]
FamilyNames = str | tuple[str, ...]


@attrs.frozen
class Entry:
    """One kind of one slot."""

    slot: str
    kind: str
    config: type
    """The attrs class whose fields are the table's keys."""
    factory: Callable[..., Any] | None
    """Builds the stage: ``factory(config, parts)`` (objectives: ``factory(config, parts, agent)``;
    env kinds: ``factory(config)`` -> one env, or with ``vectorised=True`` in ``parts``
    ``factory(config, n_envs, seed)`` -> a whole ``VectorEnv``; sinks: as their package says)."""
    family: FamilyNames = ANY_FAMILY
    """The family (or families) whose pipelines may use the kind; ``"any"`` (``ANY_FAMILY``): any."""
    provides: tuple[str, ...] = ()
    """Capabilities other kinds may require (a critic: ``state_values``, ``q_values``, ...)."""
    requires: Mapping[str, str] = attrs.field(factory=dict)
    """slot -> capability that the kind chosen in that slot must provide."""
    check: Check | None = None
    """Further cross-table checks: ``check(config, built) -> [(key path, message)]``."""
    default: bool = False
    """The kind a table without ``kind`` gets."""
    parts: Mapping[str, Any] = attrs.field(factory=dict)
    """Slot-specific extras (an objective's ``team`` builder, a critic's ``learner``, an env's ``vectorised``)."""
    module: str = ""

    def extra(self, name: str, default: Any = None) -> Any:
        """The slot-specific extra ``name`` (``parts``); an objective's ``team`` builder is its ``policy`` one."""
        if name == "policy" and "policy" not in self.parts and "team" in self.parts:
            deprecated(f"register(..., team=...) of {self.kind!r}", "register(..., policy=...)", stacklevel=2)
            return self.parts["team"]
        return self.parts.get(name, default)

    @property
    def doc(self) -> str:
        return (self.config.__doc__ or "").strip().splitlines()[0] if self.config.__doc__ else ""

    def belongs_to(self, family: str) -> bool:
        """Whether a pipeline of ``family`` may use this kind."""
        return self.family == ANY_FAMILY or family == self.family or (
            isinstance(self.family, tuple) and family in self.family)


class BuildParts(Protocol):
    """What ``build`` reads of the ``parts`` it hands a factory (``harl.parts.Parts``)."""

    @property
    def source(self) -> str: ...


def __getattr__(name: str) -> Any:
    """``harl.registry.Parts``, the older name of ``harl.parts.Parts`` (the record a factory gets),
    with a ``HarlDeprecationWarning``: the record lives in the learning layer, where its fields'
    types are, so this layer can only fetch it by name (it adds no arrow to the import graph), and
    an annotation that names it here is ``Any`` to a type checker."""
    if name == "Parts":
        deprecated("harl.registry.Parts", "harl.parts.Parts")
        return importlib.import_module("harl.parts").Parts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ENTRIES: dict[str, dict[str, Entry]] = {slot: {} for slot in SLOTS}
_BY_CLASS: dict[type, Entry] = {}
_loaded: set[str] = set()
_FAMILIES: dict[str, Any] = {}


def _kind_default(config: type) -> str | None:
    fields = attrs.fields_dict(config)
    return fields["kind"].default if "kind" in fields else None


def register(slot: str, config: type, factory: Callable[..., Any] | None, *, family: FamilyNames = ANY_FAMILY,
             kind: str | None = None, provides: Iterable[str] = (), requires: Mapping[str, str] | None = None,
             check: Check | None = None, default: bool = False, **parts: Any) -> Entry:
    """Register ``config`` as a kind of ``slot``; its name is ``kind`` or its ``kind`` field's default.

    A user's class registered without a name is found by ``"module:Name"`` only.
    """
    if slot not in SLOTS:
        raise ValueError(f"no stage slot {slot!r}; slots: {', '.join(SLOTS)}")
    if not family or not all(isinstance(f, str) and f for f in ((family,) if isinstance(family, str) else family)):
        raise ValueError(f"family {family!r}: expected a family's name, or a tuple of names")
    if family == OLD_ANY_FAMILY:
        deprecated(f'register(..., family="{OLD_ANY_FAMILY}")', f'register(..., family="{ANY_FAMILY}")')
        family = ANY_FAMILY
    if not attrs.has(config):
        raise TypeError(f"{config.__qualname__} is not an attrs class")
    name = kind or _kind_default(config) or f"{config.__module__}:{config.__qualname__}"
    entry = Entry(slot, name, config, factory, family, tuple(provides), dict(requires or {}), check,
                  default, dict(parts), config.__module__)
    if ":" not in name:
        _ENTRIES[slot][name] = entry
    _BY_CLASS[config] = entry
    return entry


def _load(slot: str) -> None:
    """Import the modules that define harl's own kinds of ``slot`` (each package once)."""
    for package, recursive in BUILTIN[slot]:
        if package in _loaded:
            continue
        _loaded.add(package)
        pkg = importlib.import_module(package)
        walk = pkgutil.walk_packages if recursive else pkgutil.iter_modules
        for info in walk(pkg.__path__, package + "."):
            importlib.import_module(info.name)


def _load_all() -> None:
    for slot in BUILTIN:
        _load(slot)


def _family_rank(entry: Entry) -> tuple[int, str]:
    """Where a kind's family comes in listings: by the family's ``rank``, then name; any family last."""
    first = entry.family if isinstance(entry.family, str) else entry.family[0]
    if first == ANY_FAMILY:
        return (1 << 30, "")
    return (getattr(_FAMILIES.get(first), "rank", 1 << 29), first)


def kinds(slot: str) -> list[Entry]:
    """The named kinds of ``slot``: the default first, then by family (its ``rank``; kinds of any
    family last) and name."""
    _load("family")
    _load(slot)
    entries = list(_ENTRIES[slot].values())
    return sorted(entries, key=lambda e: (not e.default, _family_rank(e), e.kind))


def entry_of(config: Any) -> Entry:
    """The entry of a built config (harl's or a user's).

    A config's class was registered when its module was imported, which creating (or
    unpickling) the config did; only a class registered nowhere makes the registry load
    every slot's modules before it gives up.
    """
    cls = type(config)
    if cls not in _BY_CLASS:
        _load_all()
    if cls in _BY_CLASS:
        return _BY_CLASS[cls]
    raise KeyError(cls)


def entry_of_class(cls: Any) -> Entry | None:
    """The entry registered for a config class (None for anything else)."""
    if not isinstance(cls, type):
        return None
    if cls not in _BY_CLASS:
        _load_all()
    return _BY_CLASS.get(cls)


def kind_name(config: Any) -> str:
    """The ``kind`` a config is written with in a pipeline file."""
    return entry_of(config).kind


def of_family(slot: str, family: str) -> list[str]:
    """Named kinds of ``slot`` usable with ``family``."""
    return [e.kind for e in kinds(slot) if e.belongs_to(family)]


def providers(slot: str, capability: str, family: str) -> list[str]:
    return [e.kind for e in kinds(slot) if capability in e.provides and e.belongs_to(family)]


# --------------------------------------------------------------------------- families


def register_family(family: Any) -> Any:
    """Register a family (``harl.families.Family``) under its ``name``; its stage kinds name it
    with ``register(..., family=name)``.  Registering a name again replaces it (a reloaded module)."""
    name = getattr(family, "name", None)
    if not isinstance(name, str) or not name or name == ANY_FAMILY:
        raise ValueError(f"a family needs a name other than {ANY_FAMILY!r}, got {name!r}")
    _FAMILIES[name] = family
    return family


def families() -> list[Any]:
    """Every registered family, by its ``rank`` (harl's first) and name."""
    _load("family")
    return sorted(_FAMILIES.values(), key=lambda f: (getattr(f, "rank", 1 << 29), f.name))


def family(name: str) -> Any:
    """The registered family called ``name`` (a ``KeyError`` naming the known ones otherwise)."""
    _load("family")
    if name not in _FAMILIES:
        raise KeyError(f"no family {name!r} is registered; known: {', '.join(f.name for f in families())} "
                       "(a family registers with harl.registry.register_family at the bottom of its module)")
    return _FAMILIES[name]


def family_of(collector_config: Any) -> Any:
    """A pipeline's family: the one its collector kind belongs to."""
    names = entry_of(collector_config).family
    return family(names if isinstance(names, str) else names[0])


def build(config: Any, parts: BuildParts, *extra: Any) -> Any:
    """The stage of ``config``'s kind, once it has what its slot's callers use (users' are checked):
    what a family's ``build`` calls for each stage it makes from a table."""
    entry = entry_of(config)
    if entry.factory is None:
        raise TypeError(f"{entry.slot} kind {entry.kind!r} has no factory: its family builds it")
    stage = entry.factory(config, parts, *extra)
    check_protocol(entry, stage, f"{parts.source}: {entry.slot}.kind")
    return stage


# --------------------------------------------------------------------------- users' kinds


def entry_points() -> dict[str, metadata.EntryPoint]:
    """Installed packages' ``harl.stages`` entry points, by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def resolve(slot: str, kind: str) -> Entry | None:
    """The entry for ``kind`` in ``slot``: a named kind, ``module:Name`` or an entry point.

    None when ``kind`` is no kind at all (the caller lists the known ones); a
    ``ConfigError``-ready ``ValueError`` when a user's kind cannot be used.
    """
    named = {e.kind: e for e in kinds(slot)}
    if kind in named:
        return named[kind]
    if slot == "env":  # an env of your own: kind = "python" (harl.envs.python_env) or a registered class
        return None
    if ":" in kind:
        return _user_entry(slot, kind, _import(kind))
    points = entry_points()
    if kind in points:
        try:
            target = points[kind].load()
        except Exception as exc:  # noqa: BLE001 - any failure of the user's import is reported
            raise ValueError(f'entry point "{kind}" ({points[kind].value}) failed to load: '
                             f"{type(exc).__name__}: {exc}") from None
        return _user_entry(slot, kind, target, via=f'entry point "{kind}" ({points[kind].value})')
    return None


def user_kind(kind: str) -> Entry:
    """A user's ``"module:Name"`` kind, resolved in the slot its class is registered for (what
    ``harl stages my_pkg.returns:TDLambdaConfig`` lists); a ``ValueError`` saying what is wrong."""
    entry = entry_of_class(_import(kind))
    if entry is None:
        raise ValueError(f'"{kind}" is not a stage\'s config: a stage\'s config is an @attrs.frozen class '
                         "registered with harl.registry.register(slot, Config, factory, family=...) in its module")
    found = resolve(entry.slot, kind)
    if found is None:
        raise ValueError(f'"{kind}" is registered for [{entry.slot}], which takes no "module:Name" kind')
    return found


def _import(kind: str) -> Any:
    module_name, _, name = kind.partition(":")
    if not module_name or not name:
        raise ValueError(f'"{kind}": expected "module:Name", e.g. "my_pkg.returns:TDLambdaConfig"')
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            near = _near_module(exc.name)
            if near is not None:
                raise ValueError(f'"{kind}": cannot import module "{module_name}" ({exc}); did you mean '
                                 f'"{near}{module_name[len(exc.name):]}:{name}"?') from None
            raise ValueError(f'"{kind}": cannot import module "{module_name}" ({exc}); it must be '
                             "importable from sys.path or the current directory") from None
        raise ValueError(f'"{kind}": importing "{module_name}" failed: {exc}') from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise ValueError(f'"{kind}": importing "{module_name}" failed: {type(exc).__name__}: {exc}') from None
    target = module
    for part in name.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(target) if not n.startswith("_")]
            hint = difflib.get_close_matches(part, names, n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            raise ValueError(f'"{kind}": module "{module_name}" has no attribute "{name}"{near}')
        target = getattr(target, part)
    return target


def _near_module(missing: str) -> str | None:
    """The closest existing name for module ``missing``: a sibling in its package (the package
    itself imports), or for a top-level name a module in the current directory; else None."""
    parent, _, leaf = missing.rpartition(".")
    try:
        where = importlib.import_module(parent).__path__ if parent else [os.getcwd()]
    except (ImportError, AttributeError):  # the parent is missing too, or a module, not a package
        return None
    hint = difflib.get_close_matches(leaf, [info.name for info in pkgutil.iter_modules(where)], n=1)
    return (f"{parent}.{hint[0]}" if parent else hint[0]) if hint else None


def _user_entry(slot: str, kind: str, target: Any, via: str | None = None) -> Entry:
    via = via or f'"{kind}"'
    if not isinstance(target, type) or not attrs.has(target):
        raise ValueError(f"{via} is not an attrs class (got {type(target).__name__}); a stage's "
                         "config is an @attrs.frozen class registered with harl.registry.register")
    entry = _BY_CLASS.get(target)
    if entry is None:
        raise ValueError(f"{via}: {target.__qualname__} is not registered as a stage; call "
                         f'harl.registry.register("{slot}", {target.__qualname__}, factory, family=...) '
                         "in its module")
    if entry.slot != slot:
        raise ValueError(f"{via} is registered for [{entry.slot}], not [{slot}]")
    named = attrs.evolve(entry, kind=kind)
    _BY_CLASS[target] = named  # a resolved pipeline is written with the kind its file used
    return named


def check_protocol(entry: Entry, stage: Any, where: str) -> None:
    """Refuse a built stage that lacks what its slot's callers use (users' kinds)."""
    needed = [*PROTOCOLS.get(entry.slot, ()), *PROTOCOLS.get(f"{entry.slot}/{entry.family}", ())]
    missing = [name for name in needed if not hasattr(stage, name)]
    if missing:
        raise ConfigError(
            f'{where}: "{entry.kind}" built a {type(stage).__name__}, which lacks '
            f"{', '.join(missing)}: a {entry.slot} stage needs {', '.join(needed)} "
            "(see docs/your-own-stage.md)"
        )
