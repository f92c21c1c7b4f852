"""The console: a table of commands, show commands that return rows, and renderers
(manual, "Console" and "The Show Commands"; DESIGN.md "console & web"; CONVENTIONS 10).

    result = execute(ConsoleContext(node, ports=..., config=tree), "show routes 1")
    print(render_text(result))     # the manual's table
    body = render_json(result)     # the same rows for the web and Spark

Every show command is written once, as a function of a `ConsoleContext` returning a
`CommandResult` of rows; nothing ever parses the text.
"""

from raims_node.console.commands import COMMANDS, execute
from raims_node.console.context import ConsoleContext, Handler
from raims_node.console.errors import (
    AmbiguousCommand,
    BadArguments,
    ConsoleError,
    NotAvailable,
    UnknownCommand,
)
from raims_node.console.names import Names, tport_label
from raims_node.console.render import render_json, render_text
from raims_node.console.result import Cell, CommandResult, Kind, Row
from raims_node.console.table import Command, resolve

__all__ = [
    "COMMANDS", "AmbiguousCommand", "BadArguments", "Cell", "Command", "CommandResult",
    "ConsoleContext", "ConsoleError", "Handler", "Kind", "Names", "NotAvailable", "Row",
    "UnknownCommand", "execute", "render_json", "render_text", "resolve", "tport_label",
]
