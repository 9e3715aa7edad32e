"""State shared by the commands of one invocation, and output helpers."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from planner.errors import PlannerError
from planner.store import Store, open_store

DEBUG_ENV = "PLANNER_DEBUG"
INTERNAL_ERROR_EXIT = 70
P = ParamSpec("P")
R = TypeVar("R")

# Results go to stdout; progress and notes to stderr, so `--json` output stays parseable.
stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False)


@dataclass
class CliState:
    db_url: str | None = None


@contextmanager
def store_from(ctx: typer.Context) -> Iterator[Store]:
    state: CliState = ctx.find_root().obj or CliState()
    with open_store(state.db_url) as store:
        yield store


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=_default))


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Show planner's errors as one line on stderr with a non-zero exit, never a traceback.

    Any other exception is a bug: a short report, with the traceback only under PLANNER_DEBUG=1.
    """

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except PlannerError as exc:
            stderr.print(f"error: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from exc
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            stderr.print(
                f"internal error ({type(exc).__name__}: {exc}). This is a bug in planner; "
                f"rerun with {DEBUG_ENV}=1 for the traceback and report it.",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(INTERNAL_ERROR_EXIT) from exc

    return run
