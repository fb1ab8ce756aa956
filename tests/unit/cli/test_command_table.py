"""The lazy command table (``cli.COMMANDS``): every line names a command whose help it repeats."""

import click

from iolab import cli


def test_every_line_of_the_command_table_is_its_command():
    for name, (_where, help_text) in cli.COMMANDS.items():
        command = cli.cli.get_command(click.Context(cli.cli), name)
        assert isinstance(command, click.Command), name
        assert command.name == name
        own = " ".join((command.help or "").split())
        assert own.startswith(help_text), (name, help_text)  # its first sentence (autotune's: its first clause)
    assert set(cli.COMMANDS) >= cli.CREATES_DB


def test_every_command_that_opens_the_database_takes_db_after_its_name():
    for name in sorted(cli.OPENS_DB):
        command = cli.cli.get_command(click.Context(cli.cli), name)
        assert command is not None, name
        assert any("--db" in p.opts for p in command.params if isinstance(p, click.Option)), name
