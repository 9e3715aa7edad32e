"""Who may do what: the roles of a shared dashboard, the identity a use case acts for, and the
dashboard's sign-in settings file.

A use case that changes the store calls :func:`require` with its :class:`Action`; the refusal is
raised on the server, whatever the page showed. The CLI acts as the local user, who holds every
role (it already has the store's files). A dashboard started with sign-in sets the signed-in
identity for each script run with :func:`acting_as`; in such a server nothing runs as the local
user: a run with no identity set is refused (fail closed).
"""

from __future__ import annotations

import getpass
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any

from planner.errors import PlannerError, UsageError

# Set in the dashboard server's environment by ``planner dashboard --auth-config``: the server
# then refuses any work that was not done for a signed-in identity.
AUTH_CONFIG_ENV = "PLANNER_AUTH_CONFIG"
AUTH_CONFIG_MAX_BYTES = 64 * 1024
GROUP_PREFIX = "group:"


class Role(IntEnum):
    """Each role can do what the ones below it can."""

    VIEWER = 1
    PLANNER = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Action(Enum):
    """What a use case does, with the least role that may do it and the words for the audit."""

    UPLOAD = ("upload", Role.PLANNER, "uploading a request log")
    IMPORT_PRICES = ("import-prices", Role.PLANNER, "importing a price sheet")
    FORECAST = ("forecast", Role.PLANNER, "fitting a forecast")
    SEARCH = ("search", Role.PLANNER, "running a recommendation search")
    WHATIF = ("what-if", Role.PLANNER, "running a what-if simulation")
    BENCH = ("bench", Role.PLANNER, "running or importing a benchmark")
    EXPORT = ("export", Role.VIEWER, "exporting a report")
    DELETE = ("delete", Role.ADMIN, "deleting from the store")
    CALIBRATE = ("calibrate", Role.ADMIN, "storing a calibration profile or a model")
    AUDIT = ("audit", Role.ADMIN, "reading the audit trail")

    def __init__(self, key: str, role: Role, doing: str) -> None:
        self.key = key
        self.role = role
        self.doing = doing


@dataclass(frozen=True)
class Actor:
    """An identity acting on the store: a signed-in person, or the local user of the CLI."""

    name: str  # e-mail where the provider gave one, else the subject
    role: Role | None  # None: signed in but mapped to no role
    via: str  # "local" or "sign-in"

    def may(self, action: Action) -> bool:
        return self.role is not None and self.role >= action.role


class AccessDeniedError(PlannerError):
    """The identity's role does not allow the action."""


def local_user() -> Actor:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without /etc/passwd entry)
        name = "local"
    return Actor(name=name, role=Role.ADMIN, via="local")


NOBODY = Actor(name="(not signed in)", role=None, via="sign-in")
_ACTOR: ContextVar[Actor | None] = ContextVar("planner_actor", default=None)


def current_actor() -> Actor:
    """The identity set by :func:`acting_as`; else the local user, except in a dashboard server
    with sign-in, where it is nobody."""
    actor = _ACTOR.get()
    if actor is not None:
        return actor
    return NOBODY if os.environ.get(AUTH_CONFIG_ENV) else local_user()


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    token = _ACTOR.set(actor)
    try:
        yield actor
    finally:
        _ACTOR.reset(token)


def require(action: Action) -> Actor:
    """The current actor, if its role allows ``action``; else :class:`AccessDeniedError`."""
    actor = current_actor()
    if actor.may(action):
        return actor
    if actor.role is None:
        raise AccessDeniedError(
            f"refused: {actor.name} has no role in this planner, and {action.doing} needs the "
            f"{action.role.label} role; ask an admin to add you"
        )
    raise AccessDeniedError(
        f"refused: {actor.name} is a {actor.role.label}, and {action.doing} needs the "
        f"{action.role.label} role; ask an admin"
    )


@dataclass(frozen=True)
class RoleMap:
    """Roles by e-mail address (case-insensitive) and by group (a value of the group claim)."""

    emails: Mapping[str, Role] = field(default_factory=dict)
    groups: Mapping[str, Role] = field(default_factory=dict)
    group_claim: str = "groups"

    def role_for(self, claims: Mapping[str, Any]) -> Role | None:
        """The highest role the identity's claims map to; None when none does. An e-mail the
        provider marks unverified maps to nothing."""
        found: list[Role] = []
        email = claims.get("email")
        if isinstance(email, str) and claims.get("email_verified") is not False:
            role = self.emails.get(email.strip().lower())
            if role is not None:
                found.append(role)
        groups = claims.get(self.group_claim)
        if isinstance(groups, str):
            groups = [groups]
        if isinstance(groups, Sequence):
            found.extend(self.groups[g] for g in groups if isinstance(g, str) and g in self.groups)
        return max(found) if found else None


def actor_for(claims: Mapping[str, Any], roles: RoleMap) -> Actor:
    """The signed-in identity as an :class:`Actor` (its e-mail, else its subject)."""
    email = claims.get("email")
    name = email if isinstance(email, str) and email else str(claims.get("sub") or "unknown")
    return Actor(name=name, role=roles.role_for(claims), via="sign-in")


# Streamlit's documented [auth] settings: shared ones, and a provider's own (flat in [auth] for
# one provider, or in [auth.NAME] sections for several).
SHARED_AUTH_KEYS = ("redirect_uri", "cookie_secret")
PROVIDER_AUTH_KEYS = ("client_id", "client_secret", "server_metadata_url")


@dataclass(frozen=True)
class AuthConfig:
    """A checked ``--auth-config`` file: Streamlit's [auth] section plus planner's roles."""

    path: Path
    providers: tuple[str, ...]  # () when the provider's settings are flat in [auth]
    roles: RoleMap


def _where(path: Path, section: str) -> str:
    return f"{path}: [{section}]"


def _check_provider(path: Path, section: str, table: Mapping[str, Any]) -> None:
    missing = [key for key in PROVIDER_AUTH_KEYS if not isinstance(table.get(key), str)]
    if missing:
        raise UsageError(
            f"{_where(path, section)} lacks {', '.join(missing)} (Streamlit's OpenID Connect "
            "settings: client_id, client_secret, server_metadata_url)"
        )


def _providers(path: Path, auth: Mapping[str, Any]) -> tuple[str, ...]:
    missing = [key for key in SHARED_AUTH_KEYS if not isinstance(auth.get(key), str)]
    if missing:
        raise UsageError(f"{_where(path, 'auth')} lacks {', '.join(missing)}")
    named = tuple(key for key, value in auth.items() if isinstance(value, dict))
    if not named:
        _check_provider(path, "auth", auth)
        return ()
    for name in named:
        _check_provider(path, f"auth.{name}", auth[name])
    return named


def _role(path: Path, who: str, value: Any) -> Role:
    labels = {role.label: role for role in Role}
    if not isinstance(value, str) or value.strip().lower() not in labels:
        raise UsageError(
            f"{_where(path, 'planner.roles')}: {who!r} = {value!r}; "
            "expected one of viewer, planner, admin"
        )
    return labels[value.strip().lower()]


def _role_map(path: Path, planner: Mapping[str, Any]) -> RoleMap:
    table = planner.get("roles", {})
    if not isinstance(table, dict):
        raise UsageError(f"{_where(path, 'planner.roles')} must be a table of identity = role")
    emails: dict[str, Role] = {}
    groups: dict[str, Role] = {}
    for who, value in table.items():
        role = _role(path, who, value)
        if who.startswith(GROUP_PREFIX):
            groups[who.removeprefix(GROUP_PREFIX)] = role
        elif "@" in who:
            emails[who.strip().lower()] = role
        else:
            raise UsageError(
                f"{_where(path, 'planner.roles')}: {who!r} is neither an e-mail address nor "
                f"{GROUP_PREFIX}NAME"
            )
    claim = planner.get("group_claim", "groups")
    if not isinstance(claim, str) or not claim:
        raise UsageError(f"{_where(path, 'planner')}: group_claim must be a claim's name")
    return RoleMap(emails=emails, groups=groups, group_claim=claim)


def read_auth_config(path: Path) -> AuthConfig:
    """Read and check an ``--auth-config`` file. Messages name the file and section, and never
    quote a secret's value."""
    try:
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"--auth-config {path}: not a regular file")
        if path.stat().st_size > AUTH_CONFIG_MAX_BYTES:
            raise UsageError(f"--auth-config {path}: over {AUTH_CONFIG_MAX_BYTES // 1024} KiB")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--auth-config {path}: cannot read it ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--auth-config {path}: not valid TOML ({exc})") from None
    auth = data.get("auth")
    if not isinstance(auth, dict):
        raise UsageError(f"--auth-config {path}: no [auth] section (Streamlit's sign-in settings)")
    planner = data.get("planner", {})
    if not isinstance(planner, dict):
        raise UsageError(f"{_where(path, 'planner')} must be a table")
    return AuthConfig(path=path, providers=_providers(path, auth), roles=_role_map(path, planner))
