"""User and group limits: YuniKorn 1.3+'s user/group manager (``pkg/scheduler/ugm``).

A queue's ``limits`` cap what one user, or one group, may run below it: ``maxresources``
(the resources its applications hold there) and ``maxapplications`` (its applications that
hold any). A partition's ``limits`` are its root queue's (``scheduler.config._parser``).

* **Whose limit.** A user's limit on a queue is the entry that names the user there, or
  else the wildcard (``*``) user entry (``Manager.applyWildCardUserLimits``). An
  application is charged to one group at most, chosen once, from the leaf up
  (``Manager.ensureGroup``): on the first queue whose limits name one of the user's groups,
  the first such group in the configured order; failing a named group, the wildcard group
  ``*`` if that queue has one (it then adds up every unnamed group's usage). A group is
  limited by the entries that name it (for ``*``, the wildcard entries).
* **What counts.** An application is charged from its first allocation until it holds none
  (``IncreaseTrackedResource``, ``DecreaseTrackedResource`` with ``removeApp``): its
  allocations' resources on every queue of its chain, and its id among the running
  applications there.
* **Enforcement.** An ``Accepted`` application whose user or group is at
  ``maxapplications`` on some queue of its chain does not start (``CanRunApp``, checked in
  ``Queue.TryAllocate``); an ask that would take a user or group past ``maxresources`` on
  some queue is not allocated (``Headroom``, checked in ``Application.tryAllocate``).

The manager keeps usage only where it is checked: on the limited levels (``Level``) of
each user and group. The usage queries add up the applications themselves
(``scheduler.core._views``), so a configuration without limits tracks nothing: the partition
then has no manager at all, and the scheduling pass pays one ``None`` check.
A reload builds a new manager from the live applications (``for_config``): the next
decision uses the new limits, and nothing allocated is taken back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from loguru import logger

from scheduler.config._parser import queue_paths
from scheduler.objects._application import AppState
from scheduler.objects._resources import Res, add_into, fits_under_max, sub_into

if TYPE_CHECKING:
    from scheduler.config._parser import PartitionConfig
    from scheduler.objects._application import Application

__all__ = ["ANONYMOUS_USER", "WILDCARD", "Cap", "Charge", "Limits", "UserGroupManager", "user_of"]

WILDCARD: Final = "*"
#: The user an application without one runs as (YuniKorn's ``common.AnonymousUser``).
ANONYMOUS_USER: Final = "nobody"


def user_of(app: Application) -> str:
    """The user an application is charged to."""
    return app.user or ANONYMOUS_USER


class Cap:
    """One configured limit: ``max_resources`` (missing names unlimited) and
    ``max_applications`` (0: unlimited)."""

    __slots__ = ("max_applications", "max_resources")

    def __init__(self, max_resources: Res, max_applications: int) -> None:
        self.max_resources = max_resources
        self.max_applications = max_applications


class Limits:
    """The ``limits`` of a partition's queues, by queue path (YuniKorn's ``userLimits``,
    ``groupLimits``, ``userWildCardLimitsConfig``, ``groupWildCardLimitsConfig``)."""

    def __init__(self, config: PartitionConfig) -> None:
        self.users: dict[str, dict[str, Cap]] = {}  # path -> user -> cap
        self.user_wildcard: dict[str, Cap] = {}  # path -> cap of every other user
        self.groups: dict[str, dict[str, Cap]] = {}  # path -> group -> cap, in config order
        for path, conf in queue_paths(config).items():
            for limit in conf.limits:
                cap = Cap(dict(limit.max_resources), limit.max_applications)
                for user in limit.users:
                    if user == WILDCARD:
                        self.user_wildcard[path] = cap
                    else:
                        self.users.setdefault(path, {})[user] = cap
                for group in limit.groups:  # validated: the wildcard comes last
                    self.groups.setdefault(path, {})[group] = cap

    def __bool__(self) -> bool:
        return bool(self.users or self.user_wildcard or self.groups)

    def user_cap(self, user: str, path: str) -> Cap | None:
        named = self.users.get(path)
        cap = named.get(user) if named else None
        return cap if cap is not None else self.user_wildcard.get(path)

    def group_cap(self, group: str, path: str) -> Cap | None:
        named = self.groups.get(path)
        return named.get(group) if named else None

    def group_for(self, groups: Iterable[str], paths_leaf_first: Iterable[str]) -> str:
        """The group an application is charged to, or ``""`` (YuniKorn's ``ensureGroup``)."""
        mine = set(groups)
        if not mine:
            return ""
        for path in paths_leaf_first:
            configured = self.groups.get(path)
            if configured:
                for group in configured:
                    if group != WILDCARD and group in mine:
                        return group
                if WILDCARD in configured:
                    return WILDCARD
        return ""

    def configured(self, kind: str) -> dict[str, list[str]]:
        """Every user (``kind`` ``"user"``) or group with a limit of its own, and the paths
        of those limits: YuniKorn keeps their trackers, and shows them, with no usage."""
        table = self.users if kind == "user" else self.groups
        out: dict[str, list[str]] = {}
        for path, caps in table.items():
            for name in caps:
                out.setdefault(name, []).append(path)
        return out


class Level:
    """One limited queue of one user or group: its cap and what is charged to it there
    (a limited ``QueueTracker``)."""

    __slots__ = ("applications", "cap", "key", "refs", "resources")

    def __init__(self, key: tuple[str, str, str], cap: Cap) -> None:
        self.key = key  # (kind, name, path)
        self.cap = cap
        self.resources: Res = {}
        self.applications: set[str] = set()
        self.refs = 0  # the charges that use it

    def __repr__(self) -> str:
        return f"<Level {self.resources} apps={len(self.applications)}>"

    def __str__(self) -> str:
        kind, name, path = self.key
        return f"{kind} {name} in queue {path}"


class Charge:
    """What one application is charged to: its user, its group, and the limited levels of
    both on its queue chain."""

    __slots__ = ("app", "app_levels", "group", "levels", "res_levels", "running", "user")

    def __init__(self, app: Application, user: str, group: str, levels: list[Level]) -> None:
        self.app = app
        self.user = user
        self.group = group
        self.levels = tuple(levels)
        self.res_levels = tuple(lv for lv in levels if lv.cap.max_resources)
        self.app_levels = tuple(lv for lv in levels if lv.cap.max_applications)
        self.running = False  # charged: it holds allocations

    def fits(self, res: Res) -> bool:
        """``res`` more stays within every ``maxresources`` (YuniKorn's ``Headroom``)."""
        return self.over(res) is None

    def over(self, res: Res) -> Level | None:
        """The first level whose ``maxresources`` ``res`` more would pass."""
        for level in self.res_levels:
            if not fits_under_max(res, level.resources, level.cap.max_resources):
                return level
        return None

    def can_run(self) -> bool:
        """One application more stays within every ``maxapplications`` (``CanRunApp``);
        an application already charged is not counted again."""
        return self.full() is None

    def full(self) -> Level | None:
        """The first level that runs as many applications as it may (none when this one
        already runs)."""
        if self.running:
            return None
        for level in self.app_levels:
            if len(level.applications) >= level.cap.max_applications:
                return level
        return None


class UserGroupManager:
    """The user and group limits of one partition and what is charged against them."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._levels: dict[tuple[str, str, str], Level] = {}  # (kind, name, path)
        self._charges: dict[str, Charge] = {}  # by application id

    @classmethod
    def for_config(
        cls, config: PartitionConfig, applications: Iterable[Application] = ()
    ) -> UserGroupManager | None:
        """A manager for ``config`` charged with what ``applications`` hold now, or ``None``
        when the configuration has no limits."""
        limits = Limits(config)
        if not limits:
            return None
        manager = cls(limits)
        for app in applications:
            if app.queue is not None and app.allocations:
                manager.allocated(app, app.allocated)
        return manager

    # -- decisions ---------------------------------------------------------------------
    def charge(self, app: Application) -> Charge:
        """The charge of ``app`` (in a queue), made on first sight."""
        charge = self._charges.get(app.application_id)
        if charge is None or charge.app is not app:
            if charge is not None:
                self.forget(charge.app)
            charge = self._charges[app.application_id] = self._new_charge(app)
        return charge

    def admits(self, app: Application, res: Res) -> bool:
        """One allocation of ``res`` for ``app`` keeps its user and group within limits."""
        charge = self.charge(app)
        if app.state is AppState.ACCEPTED and not charge.can_run():
            return False
        return charge.fits(res)

    def _new_charge(self, app: Application) -> Charge:
        assert app.queue is not None
        limits = self.limits
        chain = [q.path for q in app.queue.chain]  # leaf first
        user = user_of(app)
        group = limits.group_for(app.groups, chain)
        levels: list[Level] = []
        for path in chain:
            cap = limits.user_cap(user, path)
            if cap is not None:
                levels.append(self._level("user", user, path, cap))
            if group:
                cap = limits.group_cap(group, path)
                if cap is not None:
                    levels.append(self._level("group", group, path, cap))
        return Charge(app, user, group, levels)

    def _level(self, kind: str, name: str, path: str, cap: Cap) -> Level:
        key = (kind, name, path)
        level = self._levels.get(key)
        if level is None:
            level = self._levels[key] = Level(key, cap)
        level.refs += 1
        return level

    # -- usage -------------------------------------------------------------------------
    def allocated(self, app: Application, res: Res) -> None:
        """``app`` holds ``res`` more (an allocation made, recovered or swapped in)."""
        charge = self.charge(app)
        for level in charge.levels:
            add_into(level.resources, res)
        if not charge.running:
            charge.running = True
            app_id = app.application_id
            for level in charge.levels:
                level.applications.add(app_id)

    def released(self, app: Application, res: Res) -> None:
        """``app`` holds ``res`` less; once it holds nothing it no longer counts as running."""
        charge = self._charges.get(app.application_id)
        if charge is None or charge.app is not app or not charge.running:
            logger.warning("release of {} for untracked application {}", res, app.application_id)
            return
        for level in charge.levels:
            sub_into(level.resources, res)
        if not app.allocations:
            charge.running = False
            app_id = app.application_id
            for level in charge.levels:
                level.applications.discard(app_id)

    def forget(self, app: Application) -> None:
        """``app`` left its queue."""
        charge = self._charges.get(app.application_id)
        if charge is None or charge.app is not app:
            return
        del self._charges[app.application_id]
        for level in charge.levels:
            level.applications.discard(app.application_id)
            level.refs -= 1
            if level.refs == 0:
                del self._levels[level.key]

    def group_of(self, app: Application) -> str:
        """The group ``app`` (in a queue) is charged to, or ``""``; changes nothing."""
        charge = self._charges.get(app.application_id)
        if charge is not None and charge.app is app:
            return charge.group
        assert app.queue is not None
        return self.limits.group_for(app.groups, [q.path for q in app.queue.chain])

    def __repr__(self) -> str:
        return f"<UserGroupManager charges={len(self._charges)} levels={len(self._levels)}>"
