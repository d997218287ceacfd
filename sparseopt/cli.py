"""Command line: ``sparseopt demo`` and the commands installed packages contribute.

``demo`` is the core's own command. Other commands come from the ``sparseopt.commands``
entry point group: the torch adapter (the ``torch`` extra) adds ``prune``, ``eval``,
``export`` and ``finetune``, which prune, evaluate, export and finetune transformer models.
The core never imports the adapter: it loads the entry points, and only the one of the
command that runs (all of them for ``sparseopt --help``).

Before anything loads NumPy, :func:`main` sets the idle-thread settings of OpenBLAS and
libgomp (:func:`sparseopt.threads.set_idle_thread_env`): this module imports neither NumPy
nor the rest of the package at import time.

The contract of an entry point of ``sparseopt.commands``: its name is the command; it loads
a function ``add(subparsers)`` that adds the subparser of that name to the core's argparse
subparsers and sets ``set_defaults(handler=run)``, with ``run(args) -> int`` the exit code.
A command that takes layer methods adds ``--method`` with :func:`add_method_argument`, whose
choices and help come from the one list of methods, :func:`sparseopt.layer.methods`.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

__all__ = ["main", "add_method_argument", "COMMAND_GROUP"]

#: Entry point group of contributed commands (see the module docstring for the contract).
COMMAND_GROUP = "sparseopt.commands"
#: The core's own commands: parsing them loads no entry point.
CORE_COMMANDS = ("demo",)
_INSTALL = ("the torch adapter adds the commands prune, eval and export: install "
            "`pip install torch==2.13.0` first, then `pip install -e .[torch,minilm]`")


def add_method_argument(parser, *, extra=None, help="layer method, repeat for several"):
    """Add ``--method`` (repeatable, ``action="append"``) to an argparse parser: the choices
    are the registered layer methods (:func:`sparseopt.layer.methods`, read now, so a method
    registered before the parser is built is offered) plus the names of ``extra``; the
    parser's epilog lists each with its one-line summary (:attr:`LayerMethod.summary`).

    Parameters
    ----------
    parser : argparse.ArgumentParser
    extra : dict of str -> str, optional
        Further choices and their descriptions (e.g. ``{"all": "every layer method"}``).
    help : str
        Help text of the option.
    """
    from .layer import get_method, methods

    extra = dict(extra or {})
    names = methods()
    clash = sorted(set(extra) & set(names))
    if clash:
        raise ValueError(f"extra choices {clash} clash with registered layer methods")
    rows = [(name, get_method(name).summary) for name in names] + list(extra.items())
    width = max(len(name) for name, _ in rows) + 2
    listing = "\n".join(f"  {name:<{width}}{text}" for name, text in rows)
    parser.add_argument("--method", action="append", choices=names + tuple(extra),
                        metavar="METHOD",
                        help=help.replace("%", "%%") + "; one of the methods listed below")
    parser.epilog = "\n\n".join(filter(None, [parser.epilog, f"methods (--method):\n{listing}"]))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _command_entry_points() -> dict:
    """{command: entry point} of :data:`COMMAND_GROUP`; the core's commands cannot be taken."""
    found = {}
    for ep in entry_points(group=COMMAND_GROUP):
        if ep.name not in CORE_COMMANDS:
            found.setdefault(ep.name, ep)
    return found


def _add_contributed(sub, name, ep, running):
    """Add the command of entry point ``ep``. If its module cannot be imported (the extras
    are missing), the command exits with the install command when it is the one ``running``,
    and is listed as unavailable otherwise."""
    try:
        add = ep.load()
    except ImportError as exc:
        if running:
            raise SystemExit(f"sparseopt {name}: this command needs "
                             f"{ep.value.split(':')[0]}, which cannot be imported ({exc}); "
                             f"{_INSTALL}") from exc
        sub.add_parser(name, help=f"(unavailable: {exc})", add_help=False)
        return
    add(sub)
    if name not in sub.choices:
        raise RuntimeError(f"the {COMMAND_GROUP} entry point {name!r} ({ep.value}) did not "
                           f"add a subcommand named {name!r}")


def _demo(args) -> int:
    from .demo import run_demo

    report = run_demo(args.out, quick=args.quick, minilm=not args.no_minilm)
    print(f"report written to {report}")
    return 0


def _parser(command=None):
    """The argparse parser. ``command``: the command about to run; contributed commands
    other than it are not loaded (None: load all of them, e.g. for ``--help``)."""
    parser = argparse.ArgumentParser(prog="sparseopt", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo and write a Markdown + PNG report")
    demo.add_argument("--out", default=None, help="run folder (default: runs/demo-<timestamp>)")
    demo.add_argument("--quick", action="store_true", help="smaller problem sizes (used by tests)")
    demo.add_argument("--no-minilm", action="store_true",
                      help="skip the MiniLM section (needs the torch and minilm extras)")
    demo.set_defaults(handler=_demo)
    if command not in CORE_COMMANDS:
        for name, ep in _command_entry_points().items():
            if command is None or command == name:
                _add_contributed(sub, name, ep, running=command == name)
    return parser


def main(argv=None) -> int:
    """The ``sparseopt`` command: set the idle-thread settings of OpenBLAS and libgomp
    (:func:`sparseopt.threads.set_idle_thread_env`; nothing has loaded NumPy yet when the
    console script calls this), then parse ``argv`` and run the command."""
    from .threads import set_idle_thread_env

    set_idle_thread_env()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    contributed = _command_entry_points()
    if command is not None and command not in CORE_COMMANDS and command not in contributed:
        known = ", ".join(CORE_COMMANDS + tuple(contributed))
        hint = "" if contributed else f"; {_INSTALL}"  # no adapter installed at all
        _parser(CORE_COMMANDS[0]).error(f"unknown command {command!r} (installed: {known})"
                                        f"{hint}")
    args = _parser(command).parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
