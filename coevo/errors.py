"""How ``coevo`` fails: one line that names what was wrong and says what to do, never a traceback
or a usage panel.

- A bad call (unknown command or option, a missing or malformed argument, a value the command
  refuses) is click's ``UsageError``. :class:`OneLineErrors`, the command group of the app,
  prints every one of them as ``error: ARGUMENT: what is wrong; see coevo COMMAND --help`` and
  exits with 2. It sits in the group's ``main``, which both the console script and
  ``typer.testing.CliRunner`` call, so no command can print a usage panel by forgetting to.
- A bad config is ``marl.config.ConfigError``: ``config error: PATH: FIELD: what is wrong``, exit 2.
- A write that fails mid-run for want of space or permission (:func:`write_failure`) names the
  file and how to carry on, exit 1.
"""

from __future__ import annotations

import errno
import importlib
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup, TyperOption

# The click that typer runs on, whose exceptions its commands raise: typer's own copy
# (typer._click) since typer 0.2x, click itself before; typer.BadParameter is one of them.
_click = importlib.import_module(typer.BadParameter.__module__)
NO_ARGS_IS_HELP = getattr(_click, "NoArgsIsHelpError", ())  # click >= 8.2; before, `coevo` alone just exits 0

# A failed write the user can fix, and how (the first half of the advice; resuming is the second).
FIXABLE_WRITES = {
    errno.ENOSPC: "free some disk space",
    errno.EDQUOT: "free some space in your disk quota",
    errno.EROFS: "remount it read-write (the filesystem is read-only)",
    errno.EACCES: "fix its permissions",
    errno.EPERM: "fix its permissions",
}


def _argument(param: Any) -> str:
    """How the user wrote (or should write) a parameter: ``--game`` for an option, ``GAME`` for an argument."""
    if isinstance(param, TyperOption):
        return max(param.opts, key=len)
    return (param.name or "").upper()


def _command(ctx: typer.Context | None, fallback: str) -> str:
    """``coevo match``: the command the user called, whatever name the program was run under;
    ``fallback`` where click gave the error no context (an option missing its value)."""
    names = []
    while ctx is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["coevo", *reversed(names[:-1])]) if names else fallback


def usage_line(err: Any, fallback: str = "coevo") -> str:
    """One line for a bad call (a click ``UsageError``): what was wrong, with which argument, and
    where to read more (``fallback``: the command, when the error does not know it)."""
    if isinstance(err, _click.MissingParameter) and err.param is not None:
        what = f"{_argument(err.param)}: missing {err.param.param_type_name}"
    elif isinstance(err, _click.BadParameter):
        hint = err.param_hint
        if hint is None and err.param is not None:
            hint = _argument(err.param)
        hint = " / ".join(hint) if isinstance(hint, (list, tuple)) else hint
        what = f"{hint}: {err.message}" if hint else err.message
    else:
        what = err.format_message()
    what = " ".join(what.split()).rstrip(".")
    return f"error: {what}; see {_command(err.ctx, fallback)} --help"


class OneLineErrors(TyperGroup):
    """The app's group: every usage error, from any command, as one line (module docstring)."""

    def main(self, args: Any = None, *rest: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:  # the caller handles exceptions itself
            return super().main(args, *rest, standalone_mode=False, **kwargs)
        called = list(sys.argv[1:] if args is None else args)
        command = " ".join(["coevo", *[a for a in called if a in self.commands][:1]])
        try:
            code = super().main(args, *rest, standalone_mode=False, **kwargs)
        except NO_ARGS_IS_HELP as err:  # `coevo` alone: the help, as asked
            err.show()
            code = err.exit_code
        except _click.UsageError as err:
            typer.echo(usage_line(err, command), err=True)
            code = err.exit_code
        except _click.ClickException as err:
            err.show()
            code = err.exit_code
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            code = 1
        sys.exit(code if isinstance(code, int) else 0)  # a command's return value (None) is success


def write_failure(err: OSError, run_dir: Path, resumable: bool) -> str | None:
    """One line for a write the user can fix (no space, no permission), or None for any other error.

    ``resumable``: the run has a checkpoint, so ``coevo train --resume`` carries on exactly."""
    fix = FIXABLE_WRITES.get(err.errno)
    if fix is None:
        return None
    where = err.filename or run_dir
    then = (
        f"then coevo train --resume {run_dir} (it resumes exactly from the last checkpoint)"
        if resumable
        else f"then coevo train --resume {run_dir} (it starts the run again: no checkpoint was written yet)"
    )
    return f"error: could not write {where}: {err.strerror}; {fix}, {then}"
