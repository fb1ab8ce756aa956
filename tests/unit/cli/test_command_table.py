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
