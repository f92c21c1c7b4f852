"""Errors of the console: a command line that names no command, or several, or that
gives a command the wrong arguments. `execute` turns them into the result's `error`."""

from __future__ import annotations

from raims_node import RaimsError


class ConsoleError(RaimsError):
    """Root of every error raised by raims_node.console."""


class UnknownCommand(ConsoleError):
    """No command starts with the words typed."""


class AmbiguousCommand(ConsoleError):
    """The words typed are a prefix of more than one command (or of none completely)."""


class BadArguments(ConsoleError):
    """A command got too few or too many arguments, or one it cannot use."""


class NotAvailable(ConsoleError):
    """A command of the manual's table that this console does not run (e.g. ping, which
    needs the router to send and await messages)."""
