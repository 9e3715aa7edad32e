"""State shared by the commands of one invocation, and output helpers."""

from __future__ import annotations

import errno
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console

from planner.common.secrets import redact_text
from planner.common.text import bounded_message, shown
from planner.errors import PlannerError, UsageError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from planner.store import Store
    from planner.usecases import SessionScope


DEBUG_ENV = "PLANNER_DEBUG"
INTERNAL_ERROR_EXIT = 70
P = ParamSpec("P")
R = TypeVar("R")


class _ResultConsole(Console):
    """stdout's console: a reader that stops reading (`| head`) ends the command successfully
    (rich's default exits 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _silence_stdout()
        raise SystemExit(0)


# Results go to stdout; progress and notes to stderr, so `--json` output stays parseable.
stdout = _ResultConsole(highlight=False, soft_wrap=True, emoji=False)
stderr = Console(stderr=True, highlight=False, emoji=False)  # ':b:' is text, not an emoji


@dataclass
class CliState:
    db_url: str | None = None


@contextmanager
def store_from(ctx: typer.Context, db: str | None = None) -> Iterator[Store]:
    """The store named by ``db``, else by planner's --db (else $PLANNER_DATABASE_URL, else
    SQLite in $PLANNER_HOME), open for the body of the ``with``."""
    from planner.store import open_store

    state: CliState = ctx.find_root().obj or CliState()
    with open_store(db if db is not None else state.db_url) as store:
        yield store


@contextmanager
def sessions_from(ctx: typer.Context, db: str | None = None) -> Iterator[SessionScope]:
    """The sessions a use case is given: the store (``db``, else planner's --db) is opened on
    the first session the use case asks for, so a request it refuses never touches the store,
    and closed at the end of the ``with``."""
    with ExitStack() as opened:
        stores: list[Store] = []

        def session() -> AbstractContextManager[Session]:
            if not stores:
                stores.append(opened.enter_context(store_from(ctx, db)))
            return stores[0].session()

        yield session


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
            check_path_lengths(command, kwargs)
            result = command(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
            return result
        except BrokenPipeError:
            # The reader (`| head`) has what it wanted: stop quietly, as a successful command.
            _silence_stdout()
            raise typer.Exit(0) from None
        except MemoryError:
            stderr.print(
                "error: out of memory; try a smaller input or load (e.g. a lower --load-scale)",
                markup=False,
            )
            raise typer.Exit(1) from None
        except PlannerError as exc:
            # the last guard: a message built from a URL or a header the code forgot to mask
            message = bounded_message(redact_text(str(exc)))
            stderr.print(f"error: {message}", markup=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from exc
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                _internal_error(exc)
            # a path given inside a text option (a schedule or a list of files) reached the OS
            name = shown(str(exc.filename)) if exc.filename else "a path"
            stderr.print(f"error: {name}: {TOO_LONG}", markup=False, soft_wrap=True)
            raise typer.Exit(UsageError.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            _internal_error(exc)

    return run


def _internal_error(exc: Exception) -> NoReturn:
    """A bug in planner: one short report (the traceback only under PLANNER_DEBUG=1), exit 70."""
    if os.environ.get(DEBUG_ENV):
        raise exc
    stderr.print(
        # a library's words may quote a URL or a header with its credentials
        f"internal error ({type(exc).__name__}: {bounded_message(redact_text(str(exc)))}). "
        f"This is a bug in planner; rerun with {DEBUG_ENV}=1 for the traceback and report it.",
        markup=False,
        soft_wrap=True,
    )
    raise typer.Exit(INTERNAL_ERROR_EXIT) from exc


# Linux's limits: a path of at most 4,096 bytes, each of its names at most 255.
PATH_MAX_BYTES = 4096
NAME_MAX_BYTES = 255
TOO_LONG = (
    f"too long for a file name (at most {PATH_MAX_BYTES:,} bytes in a path and "
    f"{NAME_MAX_BYTES} in each of its names)"
)


def check_path_lengths(command: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Refuse, naming the option, a path option the operating system could not open: checked
    before any work, where the OS would refuse it only once the path is first used."""
    for key, value in kwargs.items():
        paths = value if isinstance(value, list | tuple) else [value]
        for path in paths:
            if not isinstance(path, Path):
                continue
            encoded = os.fsencode(path)
            if len(encoded) < PATH_MAX_BYTES and all(
                len(part) <= NAME_MAX_BYTES for part in encoded.split(b"/")
            ):
                continue
            raise UsageError(f"{_option_name(command, key)} {shown(str(path))}: {TOO_LONG}")


def _option_name(command: Callable[..., Any], key: str) -> str:
    """The option the user typed for the command's parameter ``key`` (``--out-csv``), from its
    declaration (``typer.Option(None, "--out-csv")``)."""
    parameter = inspect.signature(command).parameters.get(key)
    declared = getattr(parameter.default, "param_decls", None) if parameter else None
    options = [d for d in declared or () if d.startswith("-")]
    return options[0] if options else key.upper()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
