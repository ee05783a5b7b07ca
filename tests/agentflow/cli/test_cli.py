"""The dispatcher: --help everywhere, --version, exit codes."""

from __future__ import annotations

import pytest

from agentflow.cli import SUBCOMMANDS, CLIError, build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("agentflow ")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert f"agentflow {command}" in capsys.readouterr().out


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["no-such-command"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["step", "--message", "hi"])  # --tools missing
    assert info.value.code == 2
    assert "--tools" in capsys.readouterr().err


def test_cli_error_is_exit_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()

    def fail(_: object) -> int:
        raise CLIError("the tools file is empty")

    args = parser.parse_args(["bench", "--list"])
    args.func = fail
    import agentflow.cli as cli

    original = cli.build_parser
    cli.build_parser = lambda: _Fixed(args)  # type: ignore[assignment]
    try:
        assert main(["bench"]) == 2
    finally:
        cli.build_parser = original
    assert "agentflow bench: error: the tools file is empty" in capsys.readouterr().err


class _Fixed:
    def __init__(self, args: object) -> None:
        self.args = args

    def parse_args(self, argv: object) -> object:
        return self.args
