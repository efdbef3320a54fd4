"""rmqspec.cli — the ``rmqspec`` command line."""
