"""The `netprobe` command. Each group lives with the code it drives; this file only wires them."""

from __future__ import annotations

import importlib
import os
import sys

import click

from netprobe.errors import ConfigError, NetprobeError
from netprobe.textout import Group

HELP = "Route-quality monitor for LLM inference served across borders."

# word → (module, attribute: a click group or command named by the word, help in the command list)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "probe": ("netprobe.probes.cli", "app", "Run one probe now and print what it measured."),
    "agent": ("netprobe.agent.cli", "app", "Run the scheduled agent."),
    "collector": ("netprobe.collector.cli", "app", "Run the central collector; manage agent tokens."),
    "config": ("netprobe.config.cli", "app", "Validate configuration files."),
    "db": ("netprobe.store.cli", "app", "Database maintenance."),
    "lab": ("netprobe.lab.cli", "app", "Emulated routes for demos and tests (root)."),
    "alerts": ("netprobe.alerts.cli", "app", "Alert notifiers: send a test message through each."),
    "report": ("netprobe.report.cli", "app", "Reports from the hourly rollups (evening peak)."),
    "budget": ("netprobe.budget.cli", "app", "What a TTFT target leaves the GPU; GPU memory sizing."),
    "demo": ("netprobe.demo.cli", "demo", "Lab, agent, a compressed day, report, budget, alerts (root)."),
    "diagnose": ("netprobe.diagnose.cli", "diagnose", "Why the first token is slow: network, region, model."),
    "compare": ("netprobe.compare.cli", "compare", "OpenAI-compatible endpoints under the same load."),
    "target": ("netprobe.farend.cli", "app", "The datacenter end: SSE emitter and owd reflector."),
}


class _Root(Group):
    """Imports a word's module only when the word is used: `netprobe agent run` does not load (and
    keep for the daemon's lifetime) the lab, the reports, the collector, …"""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr, _ = _COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[2]) for name, entry in _COMMANDS.items()])


app = _Root("netprobe", help=HELP)


def _error(text: str) -> None:
    click.echo(click.style("error:", fg="red", bold=True) + " " + text, err=True)


def main() -> None:
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    # NumPy's OpenBLAS starts a thread per core at import: 70 ms of CPU per command, for arrays too
    # small to share (a report's products are matrix × vector). One thread, unless the user says.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        if "--help" not in sys.argv[2:]:
            _check_extra(word)
        code = app.main(sys.argv[1:], prog_name="netprobe", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, as a usage error
        click.echo(exc.ctx.get_help() if exc.ctx else exc.message)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:  # click's word for KeyboardInterrupt
        sys.exit(130)
    except ConfigError as exc:
        where = f"{exc.source}: " if exc.source else ""
        n = len(exc.problems)
        _error(f"{where}{n} configuration problem{'s' * (n != 1)}")
        for problem in exc.problems:
            click.echo(f"  {problem}", err=True)
        sys.exit(exc.exit_code)
    except NetprobeError as exc:
        _error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except ModuleNotFoundError as exc:
        from netprobe.extras import extra_for

        extra = extra_for(exc)
        if extra is None:
            raise
        _needs(extra)
    sys.exit(code if isinstance(code, int) else 0)  # click.exceptions.Exit(n) comes back as n


def _check_extra(word: str) -> None:
    from netprobe.extras import missing_for_command

    extra = missing_for_command(word)
    if extra is not None:
        _needs(extra)


def _needs(extra: str) -> None:
    from netprobe.extras import install_hint

    command = " ".join(a for a in sys.argv[1:3] if not a.startswith("-"))
    click.echo(f"error: netprobe {command} needs the '{extra}' extra: {install_hint(extra)}", err=True)
    sys.exit(2)


if __name__ == "__main__":
    main()
