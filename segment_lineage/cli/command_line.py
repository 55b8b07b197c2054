"""How the ``lineage`` command line is read and shown: global options given
after the command are moved in front of it, and every parameter is shown
with a metavar of its own name.

The app's group (:class:`~segment_lineage.cli.context.LineageGroup`) calls
both, before Typer parses the arguments or prints any help. Typer carries a
click of its own: its groups, commands and parameters are taken as they
come (``Any``), and told apart by kind.
"""

from __future__ import annotations

from typing import Any

# The global options, which the app's callback takes: given after the command
# too (``lineage segments t --json``), they are moved before it.
GLOBAL_FLAGS = frozenset({"--json", "--verbose", "-v"})
GLOBAL_VALUED = frozenset({"--zk", "--config"})


def hoist_global_options(group: Any, ctx: Any, args: list[str]) -> list[str]:
    """``args`` with each global option given after the command name moved in
    front of it. An option the command has of its own (``retention run
    --json``), the value of one of the command's options, and whatever follows
    ``--`` stay where they are. (``group`` and ``ctx`` are Typer's click
    group and context.)"""
    command, path_at, path_end = _command_path(group, ctx, args)
    if command is group:
        return args
    among, path = _split(args[path_at:path_end], set(), set())  # a group has no options of its own
    hoisted, rest = _split(args[path_end:], *_own_options(command))
    if not among and not hoisted:
        return args
    return [*args[:path_at], *among, *hoisted, *path, *rest]


def _command_path(group: Any, ctx: Any, args: list[str]) -> tuple[Any, int, int]:
    """The command ``args`` names, where its path begins and where it ends
    (the global options in front are skipped)."""
    at, path_at, end = 0, -1, 0
    command = group
    while at < len(args):
        arg = args[at]
        if arg in GLOBAL_VALUED:
            at += 2
        elif arg.startswith("-"):
            at += 1
        elif hasattr(command, "get_command") and (found := command.get_command(ctx, arg)) is not None:
            path_at = at if path_at < 0 else path_at
            command, at = found, at + 1
            end = at  # options skipped after a group's name are the group's to hoist
            if not hasattr(command, "get_command"):
                break  # the command itself: what follows is its own
        else:
            break
    return command, path_at, end


def _split(args: list[str], own: set[str], valued: set[str]) -> tuple[list[str], list[str]]:
    """The global options among ``args`` (a command path's names, or what
    follows the command), and the rest: a command's own options (``own``,
    those taking a value ``valued``) and their values, all after ``--``."""
    hoisted: list[str] = []
    rest: list[str] = []
    at = 0
    while at < len(args):
        if args[at] == "--":
            rest += args[at:]
            break
        global_option, take = _one_argument(args, at, own, valued)
        (hoisted if global_option else rest).extend(args[at : at + take])
        at += take
    return hoisted, rest


def _own_options(command: Any) -> tuple[set[str], set[str]]:
    """The command's own option names, and those of its options that take a value."""
    params = list(command.params)
    own = {name for param in params for name in (*param.opts, *param.secondary_opts)}
    valued = {
        name
        for param in params
        if param.param_type_name == "option" and not param.is_flag and not param.count
        for name in param.opts
    }
    return own, valued


def _one_argument(args: list[str], at: int, own: set[str], valued: set[str]) -> tuple[bool, int]:
    """Whether ``args[at]`` is a global option, and how many arguments it
    takes with its value (the command's own options come first)."""
    arg = args[at]
    name = arg.split("=", 1)[0]
    if name in own:
        return False, 2 if name in valued and "=" not in arg else 1
    if arg in GLOBAL_FLAGS or (name in GLOBAL_VALUED and "=" in arg):
        return True, 1
    if arg in GLOBAL_VALUED and at + 1 < len(args):
        return True, 2
    return False, 1


def name_metavars(command: Any) -> None:
    """Give every option that takes a value a metavar of its own name
    (``--input INPUT``, ``--segments N``), and every argument its name
    (``TABLE``), in ``command`` and below: not Typer's ``<str>``. (Typer
    carries a click of its own: its parameters are told apart by kind.)"""
    for param in command.params:
        if param.metavar is not None:
            continue
        kind = getattr(param, "param_type_name", "")
        if kind == "option" and not (param.is_flag or param.count):
            _name_option(param)
        elif kind == "argument":
            _name_argument(param)
    for sub in getattr(command, "commands", {}).values():
        name_metavars(sub)


def _name_option(param: Any) -> None:
    """An option's metavar: N for a number, else its longest flag's name (``--input INPUT``)."""
    bare = param.bare_type() if hasattr(param, "bare_type") else ""
    flag = max(param.opts, key=len).lstrip("-")
    param.metavar = "N" if bare in ("int", "float") else flag.replace("-", "_").upper()


def _name_argument(param: Any) -> None:
    """An argument's metavar: its name (``TABLE``, ``NAMES...`` for several), and nothing after it."""
    shown = str(param.name).upper() + ("..." if param.nargs != 1 else "")
    param.metavar = shown
    # Typer would add "<str>" after it, and braces around it in the usage line.
    param.display_type_rich = lambda ctx: None
    param._usage_display_name = lambda shown=shown: shown
