"""Every chat command, once (docs/design.md#commands): what ``/help`` says, what the
platforms' command menus offer (Telegram's setMyCommands, Discord's slash commands),
which names the router takes as commands, and which change a group for everyone
(:mod:`gateway.conversation.access`) are all read from :data:`COMMANDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Command:
    name: str
    #: Its line in /help, after "/name" (arguments, then " — " and what it does).
    help: str
    #: Its description in the platforms' menus; "" keeps it out of them.
    menu: str = ""
    #: Other names for it, in no list (/reset, Telegram's /start).
    aliases: tuple[str, ...] = ()
    #: Whether it changes the chat for everyone, which in a group needs an owner
    #: (docs/design.md#authorization): never, always, or only with an argument.
    group_wide: Literal["never", "always", "with_argument"] = "never"
    #: Who may use it: anyone who may talk here, or an owner the config names, in their
    #: private chat (docs/design.md#pairing); it is a command only when pairing is wired.
    who: Literal["anyone", "owner"] = "anyone"


COMMANDS: tuple[Command, ...] = (
    Command(
        "new",
        " — start a fresh conversation (the old one stays searchable in the archive)",
        "Start a fresh conversation",
        aliases=("reset",),
        group_wide="always",
    ),
    Command(
        "compress",
        " [focus] — summarize older messages now, optionally favouring a topic",
        "Summarize older messages now",
        group_wide="always",
    ),
    Command(
        "status",
        " — model, context window, tokens in use, compressions, cooldown",
        "Model, context use, compressions",
    ),
    Command(
        "context",
        ' [summary] — what fills the context window; "summary" shows the current summary',
        "What fills the context window",
    ),
    Command(
        "usage",
        " — tokens and cost of this conversation, and the budgets left",
        "Tokens, cost and budgets left",
    ),
    Command(
        "memory", " — what I remember here (and, in private, about you)", "What I remember here"
    ),
    Command(
        "forget",
        " N — forget one of those; /forget all (in private) forgets everything about you",
        "Forget something I remember",
        group_wide="always",
    ),
    Command(
        "model",
        " [NAME] — this chat's model and the choices; switch with a name",
        "This chat's model; /model NAME switches",
        group_wide="with_argument",
    ),
    Command("tools", " — the tools the model can use in this chat", "Tools the model can use here"),
    Command(
        "pair",
        " [approve|deny CODE] — the owner, in private: answer pairing requests",
        who="owner",
    ),
    Command("help", " — this list", "List the commands", aliases=("start",)),
)

_BY_NAME = {name: c for c in COMMANDS for name in (c.name, *c.aliases)}

#: /help's answer.
HELP = "\n".join(["Commands:", *(f"/{c.name}{c.help}" for c in COMMANDS)])

#: (command, description) pairs the platforms offer in their menus.
MENU: tuple[tuple[str, str], ...] = tuple((c.name, c.menu) for c in COMMANDS if c.menu)


def command(name: str) -> Command | None:
    """The command ``name`` (or an alias) stands for; None when it is none."""
    return _BY_NAME.get(name)


def is_group_wide(name: str, argument: str) -> bool:
    """Whether a command changes the chat for everyone (``/model NAME`` switches the
    model; ``/model`` alone only shows it)."""
    found = command(name)
    if found is None or found.group_wide == "never":
        return False
    return found.group_wide == "always" or bool(argument.strip())
