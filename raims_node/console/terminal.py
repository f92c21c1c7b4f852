"""The console on a terminal: line editing, tab completion and history with
prompt_toolkit (manual, "Console": "command line editing and completions"; the history
is `.console_history` in the working directory, as the manual's `working_directory`
parameter describes).

The prompt is the manual's `user.svc[bridge]@host[N]> ` (N counts the commands run).
Completion offers the command words (with the optional `show`), then peers' user names,
transport names and the subjects this node has seen (subscriptions and the sequence
windows). Log lines print above the prompt (`patch_stdout`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from raims_node.console.complete import completions, prompt_text
from raims_node.console.session import ConsoleHost, ConsoleSession

HISTORY_FILE = ".console_history"


class LogSource(Protocol):
    on_log: list[Callable[[str], None]]


class ConsoleCompleter(Completer):
    """prompt_toolkit's side of complete.py's words."""

    def __init__(self, host: ConsoleHost) -> None:
        self.host = host

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        words = text.split()
        partial = "" if text.endswith(" ") or not words else words.pop()
        for w in completions(self.host, words):
            if w.startswith(partial):
                yield Completion(w, start_position=-len(partial))


async def run_terminal(host: ConsoleHost, daemon: LogSource, stop: asyncio.Event) -> None:
    session: PromptSession[str] = PromptSession(history=FileHistory(HISTORY_FILE),
                                                completer=ConsoleCompleter(host), complete_while_typing=False)
    console = ConsoleSession(host, lambda text: print(text, flush=True))
    daemon.on_log.append(console.on_log)
    count = 0
    try:
        with patch_stdout():
            while not stop.is_set() and not console.quit:
                try:
                    line = await session.prompt_async(prompt_text(host, count, console.configuring))
                except (EOFError, KeyboardInterrupt):
                    break
                count += 1
                await console.run(line.strip())
    finally:
        daemon.on_log.remove(console.on_log)
        console.close()
        stop.set()
