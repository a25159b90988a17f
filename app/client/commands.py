"""How a resource's verbs join `loopwright`: a resource is a `cli` module whose
`register(commands)` adds its verbs with `add_verb`. A verb takes the parsed command line
and a client of the server, and returns how the command exits; `add_verb` gives it the
server options and turns a refusal, a missing server, a closed pipe or Ctrl-C into one line
and an exit status, the same for every verb."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Protocol, TypeAlias

from app.client.exits import Exit
from app.client.http import DEFAULT_URL, Client, ClientError

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Verb = Callable[[argparse.Namespace, Client], Exit]
Handler = Callable[[argparse.Namespace], None]


class Resource(Protocol):
    """A resource's `cli` module, as `app/cli.py`'s registry lists it."""

    def register(self, commands: Commands) -> None:
        """Add the resource's verbs (`add_verb`) to `commands`."""


def add_verb(commands: Commands, name: str, help_text: str, verb: Verb) -> argparse.ArgumentParser:
    """`loopwright NAME` (or `loopwright RESOURCE NAME`, given a resource's own
    subcommands) running `verb`; the caller adds the verb's arguments to what it returns."""
    parser = commands.add_parser(name, help=help_text, parents=[_server_options()])
    parser.set_defaults(handler=_command(verb))
    return parser


def _server_options() -> argparse.ArgumentParser:
    # Read when the command line is built, not at import: a test sets its own environment.
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument(
        "--url",
        default=os.environ.get("LOOPWRIGHT_URL", DEFAULT_URL),
        help=f"the server (LOOPWRIGHT_URL; default {DEFAULT_URL})",
    )
    server.add_argument(
        "--api-key",
        default=os.environ.get("LOOPWRIGHT_API_KEY"),
        help="a bearer API key, if the server needs one (LOOPWRIGHT_API_KEY)",
    )
    return server


def _command(verb: Verb) -> Handler:
    def handler(args: argparse.Namespace) -> None:
        try:
            with Client(args.url, args.api_key) as client:
                code = verb(args, client)
        except ClientError as exc:
            print(f"loopwright: {exc}", file=sys.stderr)
            code = exc.exit_code
        except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = Exit.COMPLETED
        except KeyboardInterrupt:
            print(
                "\nloopwright: stopped following; the run or coordination goes on", file=sys.stderr
            )
            code = Exit.INTERRUPTED
        raise SystemExit(int(code))

    return handler
