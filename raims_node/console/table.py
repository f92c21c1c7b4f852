"""Command table entries and the manual's prefix matching (manual, "Console": "The
command string entered into the cli will execute if it has enough characters to
distinguish it from the prefixes of other commands ... The show prefix is optional").

A command is a tuple of keywords (`show running transport`) followed by arguments
named by the manual's letters (`[U] [W]`; a bracketed letter is optional, and `C`, `M` or
`I` last takes the rest of the line). Each typed word matches a keyword it is a prefix
of; a `show` command also matches without its `show`. So `pi` runs ping, `pe` show
peers, `adj` show adjacency and `run t test` show running transport test.

Decisions where the manual is vague (it does not say how ties break):
- A command whose keywords all match wins over one matching fewer of them, the words
  after its keywords being its arguments: `sh pe` is show peers, not shutdown with
  the argument `pe`.
- Among those, a command whose keywords were typed in full wins (`sub` is the sub
  command, not show subs); otherwise two or more candidates are ambiguous and the
  error lists them.
- Words that start one or more commands without completing any (`show`) are an
  incomplete command, and the error lists what they could start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raims_node.console.context import Handler
from raims_node.console.errors import AmbiguousCommand, BadArguments, UnknownCommand

SHOW = "show"
# letters that, last, take the rest of the line: a command, a message, and `debug I`'s
# "either a mask or a list of strings" (the manual: `debug tcp hb`)
REST_OF_LINE = ("C", "M", "I")
MAX_LISTED = 24  # candidates named in an error before "..."


@dataclass(frozen=True, slots=True)
class Command:
    words: tuple[str, ...]
    args: str
    description: str
    handler: Handler | None = None

    @property
    def name(self) -> str:
        return " ".join(self.words)

    @property
    def usage(self) -> str:
        return f"{self.name} {self.args}".rstrip()

    @property
    def required(self) -> int:
        """How many arguments it takes at least (the letters not in brackets)."""
        return sum(1 for a in self.args.split() if not a.startswith("["))

    def bind(self, given: list[str]) -> list[str]:
        """The arguments `given` checked against the command's letters."""
        letters = self.args.split()
        required = self.required
        rest = bool(letters) and letters[-1].strip("[]") in REST_OF_LINE
        if rest and len(given) > len(letters):
            given = [*given[: len(letters) - 1], " ".join(given[len(letters) - 1 :])]
        if not required <= len(given) <= len(letters):
            raise BadArguments(f"{self.name} takes {self.args or 'no arguments'}, got {len(given)}: "
                               f"usage: {self.usage}")
        return given


def _forms(table: Sequence[Command]) -> list[tuple[tuple[str, ...], Command]]:
    forms = [(c.words, c) for c in table]
    forms += [(c.words[1:], c) for c in table if c.words[0] == SHOW and len(c.words) > 1]
    return forms


def _listing(commands: list[Command]) -> str:
    names = sorted({c.name for c in commands})
    more = ", ..." if len(names) > MAX_LISTED else ""
    return ", ".join(names[:MAX_LISTED]) + more


def resolve(table: Sequence[Command], words: list[str]) -> tuple[Command, list[str]]:
    """The command `words` name, and the words left for its arguments."""
    # a word past the first may also be the plural of the command's (the manual types
    # `show running transports mesh`); the first word may not (`subs` is `show subs`)
    if not words:
        raise UnknownCommand("empty command line; type help")
    full: list[tuple[tuple[str, ...], Command]] = []
    partial: list[Command] = []
    for form, cmd in _forms(table):
        n = min(len(form), len(words))
        if not all(form[i].startswith(words[i]) or i and words[i] == form[i] + "s" for i in range(n)):
            continue
        if len(words) >= len(form):
            full.append((form, cmd))
        else:
            partial.append(cmd)
    if not full:
        if partial:
            raise AmbiguousCommand(f"incomplete command {' '.join(words)!r}: {_listing(partial)}")
        group = len(words) > 1 and any(len(form) > 1 and form[0].startswith(words[0]) for form, _ in _forms(table))
        raise UnknownCommand(f"unknown command {' '.join(words[:2 if group else 1])!r}; type help")
    most = max(len(form) for form, _ in full)
    best = [(form, cmd) for form, cmd in full if len(form) == most]
    exact = [(form, cmd) for form, cmd in best if all(words[i] == k for i, k in enumerate(form))]
    chosen = exact or best
    if len({cmd for _, cmd in chosen}) > 1:
        raise AmbiguousCommand(f"ambiguous command {' '.join(words[:most])!r}: "
                               f"{_listing([cmd for _, cmd in chosen])}")
    form, cmd = chosen[0]
    return cmd, words[len(form):]
