"""The ``statemorph`` command line, one module per verb (inspect, check, migrate, convert, schema,
demo, bench) and the shared output / exit-status code (:mod:`.output`,
:class:`statemorph.errors.ExitCode`).

The CLI is the top layer: it calls the engine (which format a savepoint is in:
:func:`statemorph.engine.formats.format_of`), nothing calls it."""

from .bench import cmd_bench
from .check import cmd_check
from .convert import cmd_convert
from .demo import cmd_demo
from .inspect import cmd_inspect
from .main import build_parser, main, run
from .migrate import cmd_migrate
from .output import ProgressBar
from .schema import cmd_schema

__all__ = ["ProgressBar", "build_parser", "cmd_bench", "cmd_check", "cmd_convert", "cmd_demo", "cmd_inspect",
           "cmd_migrate", "cmd_schema", "main", "run"]
