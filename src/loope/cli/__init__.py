"""The ``loope`` command line."""

from loope.cli.deferred import defer_unused

defer_unused()  # before anything imports click: see loope.cli.deferred
