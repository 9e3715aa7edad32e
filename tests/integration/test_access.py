"""Roles and the audit trail on a real store (SQLite, and PostgreSQL in CI): what a role may not
do is refused in the use case itself, stores nothing and records nothing; what is done is in the
audit trail with who did it; two planners at once on PostgreSQL lose nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from planner.access import AccessDeniedError, Action, Actor, Role, acting_as, current_actor
from planner.ingest.pipeline import IngestOptions
from planner.store import open_store
from planner.store.recommendations import list_briefs
from planner.usecases.audit import AuditRequest, audit_csv, audit_trail
from planner.usecases.datasets import dataset_names, delete_dataset
from planner.usecases.ingest import IngestRequest, Upload, ingest
from planner.usecases.recommend import DemandChoice
from planner.usecases.recommend_background import SearchRegistry
from tests.conftest import DEMO_SAMPLE
from tests.integration.test_recommend_background import SMALL, WAIT_S

VIEWER = Actor("vera@example.com", Role.VIEWER, "sign-in")
ANA = Actor("ana@example.com", Role.PLANNER, "sign-in")
BEN = Actor("ben@example.com", Role.PLANNER, "sign-in")
ADMIN = Actor("root@example.com", Role.ADMIN, "sign-in")


def _upload(name: str) -> IngestRequest:
    """The demo log as the dashboard's upload sends it (bytes and the browser's file name)."""
    return IngestRequest(
        Upload("gateway.csv.gz", DEMO_SAMPLE.read_bytes()), IngestOptions(name=name)
    )


def _trail(sessions: Callable[..., object]) -> list[tuple[str, str, str]]:
    with acting_as(ADMIN):
        entries = audit_trail(AuditRequest(), sessions)  # type: ignore[arg-type]
    return [(e.actor, e.action, e.target) for e in entries]


def test_each_role_does_what_it_may_and_the_trail_says_who(store_url: str) -> None:
    with open_store(store_url) as store:
        sessions = store.session
        with acting_as(VIEWER), pytest.raises(AccessDeniedError) as refused:
            ingest(_upload("viewer-log"), sessions)
        assert "vera@example.com is a viewer" in str(refused.value)
        assert "needs the planner role" in str(refused.value)
        assert dataset_names(sessions) == [] and _trail(sessions) == []

        with acting_as(ANA):
            assert ingest(_upload("ana-log"), sessions).rows > 0
            with pytest.raises(AccessDeniedError, match="needs the admin role"):
                delete_dataset("ana-log", sessions)
            with pytest.raises(AccessDeniedError, match="reading the audit trail"):
                audit_trail(AuditRequest(), sessions)
        assert dataset_names(sessions) == ["ana-log"]

        with acting_as(ADMIN):
            delete_dataset("ana-log", sessions)
            entries = audit_trail(AuditRequest(), sessions)
        assert [(e.actor, e.role, e.action, e.target) for e in entries] == [
            ("root@example.com", "admin", "delete", "dataset ana-log"),
            ("ana@example.com", "planner", "upload", "dataset ana-log"),
        ]
        assert "rows from gateway.csv.gz" in entries[1].detail
        csv = audit_csv(entries).decode()
        assert csv.splitlines()[0] == "at,actor,role,via,action,target,detail"
        assert "ana@example.com,planner,sign-in,upload" in csv


def test_a_signed_in_server_runs_nothing_for_nobody(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With sign-in configured, work with no identity set (a thread that forgot it) is
    refused, never done as the local user; without it, the CLI's local user holds every role."""
    assert current_actor().via == "local" and current_actor().may(Action.DELETE)
    monkeypatch.setenv("PLANNER_AUTH_CONFIG", "/nonexistent/auth.toml")
    with open_store(sqlite_url) as store, pytest.raises(AccessDeniedError, match="no role"):
        ingest(_upload("anyone"), store.session)


@pytest.mark.postgres
def test_two_planners_at_once_on_postgresql_lose_nothing(postgres_url: str) -> None:
    """Two people, each uploading a log and searching at the same time, as two dashboard
    sessions do: both logs, both results stored; each sees only their own running search."""
    registry = SearchRegistry()
    outcomes: dict[str, object] = {}
    seen: dict[str, list[str]] = {}
    start = threading.Barrier(2)

    def work(actor: Actor, name: str) -> None:
        try:
            with acting_as(actor), open_store(postgres_url) as store:
                start.wait()
                ingest(_upload(name), store.session)
                spec = replace(SMALL, demand=DemandChoice(dataset=name, load_scale=0.1))
                job = registry.start(spec, postgres_url)
                seen[actor.name] = [s.owner for s in registry.statuses(owner=actor.name)]
                assert job.wait(WAIT_S)
                outcomes[actor.name] = job.status()
        except Exception as exc:  # said by the main thread's assertions
            outcomes[actor.name] = exc

    threads = [
        threading.Thread(target=work, args=(ANA, "ana-log")),
        threading.Thread(target=work, args=(BEN, "ben-log")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 2)
    for actor in (ANA, BEN):
        status = outcomes[actor.name]
        assert not isinstance(status, Exception), status
        assert status.state == "done", status.error  # type: ignore[attr-defined]
        assert seen[actor.name] == [actor.name]  # their own search, not the other's
    with open_store(postgres_url) as store:
        assert sorted(dataset_names(store.session)) == ["ana-log", "ben-log"]
        with store.session() as session:
            assert len(list_briefs(session)) == 2
        trail = _trail(store.session)
    for actor in (ANA, BEN):
        mine = {(action, target.split()[0]) for who, action, target in trail if who == actor.name}
        assert mine == {("upload", "dataset"), ("search", "recommendation")}


def test_the_trail_is_bounded_and_checked(sqlite_url: str, tmp_path: Path) -> None:
    with open_store(sqlite_url) as store, acting_as(ADMIN):
        with pytest.raises(Exception, match="--limit 0: expected 1 to 10,000"):
            audit_trail(AuditRequest(limit=0), store.session)
        with pytest.raises(Exception, match="--action 'erase': expected one of upload"):
            audit_trail(AuditRequest(action="erase"), store.session)
