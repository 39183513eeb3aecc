"""The ``loope`` command line."""

from loope.cli.deferred import defer_inspect

defer_inspect()  # before anything imports click: see loope.cli.deferred
