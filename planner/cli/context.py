"""State shared by the commands of one invocation, and output helpers."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.store import Store


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
def store_from(ctx: typer.Context) -> Iterator[Store]:
    from planner.store import open_store

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
            stderr.print(f"error: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from exc
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            from planner.common.secrets import redact_text

            stderr.print(
                # a library's words may quote a URL or a header with its credentials
                f"internal error ({type(exc).__name__}: {redact_text(str(exc))}). This is a bug "
                f"in planner; rerun with {DEBUG_ENV}=1 for the traceback and report it.",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(INTERNAL_ERROR_EXIT) from exc

    return run


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
