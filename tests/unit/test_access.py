"""Roles from an identity's claims, the refusal's words, and the sign-in settings file's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.access import (
    AccessDeniedError,
    Action,
    Actor,
    Role,
    RoleMap,
    acting_as,
    actor_for,
    read_auth_config,
    require,
)
from planner.errors import UsageError

pytestmark = pytest.mark.unit

ROLES = RoleMap(
    emails={"ana@example.com": Role.PLANNER},
    groups={"finance": Role.VIEWER, "platform": Role.ADMIN},
)
AUTH = """[auth]
redirect_uri = "https://planner.example.com/oauth2callback"
cookie_secret = "cookie"
"""
PROVIDER = """client_id = "planner"
client_secret = "never-shown-secret"
server_metadata_url = "https://login.example.com/.well-known/openid-configuration"
"""


def test_the_highest_role_of_email_and_groups_wins() -> None:
    assert ROLES.role_for({"email": "Ana@Example.com "}) is Role.PLANNER  # any case
    assert ROLES.role_for({"email": "ana@example.com", "groups": ["platform"]}) is Role.ADMIN
    assert ROLES.role_for({"email": "x@example.com", "groups": "finance"}) is Role.VIEWER
    assert ROLES.role_for({"email": "x@example.com", "groups": ["other"]}) is None
    # an address the provider says it did not verify maps to nothing
    assert ROLES.role_for({"email": "ana@example.com", "email_verified": False}) is None
    custom = RoleMap(groups={"capacity": Role.PLANNER}, group_claim="roles")
    assert custom.role_for({"roles": ["capacity"], "groups": []}) is Role.PLANNER


def test_an_identity_is_named_by_email_else_subject() -> None:
    assert actor_for({"sub": "u1", "email": "ana@example.com"}, ROLES).name == "ana@example.com"
    nobody = actor_for({"sub": "u2"}, ROLES)
    assert (nobody.name, nobody.role, nobody.via) == ("u2", None, "sign-in")


def test_each_action_needs_its_role_and_a_refusal_says_which() -> None:
    viewer = Actor("vera@example.com", Role.VIEWER, "sign-in")
    with acting_as(viewer):
        assert require(Action.EXPORT) is viewer
        with pytest.raises(AccessDeniedError) as refused:
            require(Action.SEARCH)
    assert str(refused.value) == (
        "refused: vera@example.com is a viewer, and running a recommendation search needs the "
        "planner role; ask an admin"
    )
    with acting_as(Actor("p@example.com", Role.PLANNER, "sign-in")):
        for action in (Action.UPLOAD, Action.IMPORT_PRICES, Action.FORECAST, Action.WHATIF):
            require(action)
        for action in (Action.DELETE, Action.CALIBRATE, Action.AUDIT):
            with pytest.raises(AccessDeniedError, match="needs the admin role"):
                require(action)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    return path


def test_a_file_with_only_auth_is_valid_and_roles_are_read(tmp_path: Path) -> None:
    assert read_auth_config(_file(tmp_path, AUTH + PROVIDER)).roles == RoleMap()
    config = read_auth_config(
        _file(
            tmp_path,
            AUTH
            + "[auth.microsoft]\n"
            + PROVIDER
            + "[auth.google]\n"
            + PROVIDER
            + '[planner]\ngroup_claim = "roles"\n[planner.roles]\n'
            + '"Ana@Example.com" = "Planner"\n"group:platform" = "admin"\n',
        )
    )
    assert config.providers == ("microsoft", "google")
    assert config.roles == RoleMap(
        {"ana@example.com": Role.PLANNER}, {"platform": Role.ADMIN}, "roles"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (AUTH, "[auth] lacks client_id, client_secret, server_metadata_url"),
        (AUTH + "[auth.okta]\nclient_id = 'x'\n", "[auth.okta] lacks client_secret"),
        ('[auth]\ncookie_secret = "c"\n' + PROVIDER, "[auth] lacks redirect_uri"),
        (AUTH + PROVIDER + '[planner.roles]\n"ana" = "admin"\n', "neither an e-mail address"),
        (AUTH + PROVIDER + '[planner.roles]\n"a@b.c" = "root"\n', "expected one of viewer"),
        (AUTH + PROVIDER + "[planner]\ngroup_claim = ''\n", "group_claim must be"),
    ],
)
def test_bad_settings_name_the_file_and_section_never_a_secret(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(UsageError) as bad:
        read_auth_config(_file(tmp_path, text))
    assert expected in str(bad.value) and str(tmp_path) in str(bad.value)
    assert "never-shown-secret" not in str(bad.value)


def test_a_link_or_a_huge_file_is_refused(tmp_path: Path) -> None:
    real = _file(tmp_path, AUTH + PROVIDER)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    with pytest.raises(UsageError, match="not a regular file"):
        read_auth_config(link)
    huge = tmp_path / "huge.toml"
    huge.write_text("#" * 70_000)
    with pytest.raises(UsageError, match="over 64 KiB"):
        read_auth_config(huge)
