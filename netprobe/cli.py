"""The `netprobe` command. Each group lives with the code it drives; this file only wires them."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from netprobe.errors import ConfigError, NetprobeError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Route-quality monitor for LLM inference served across borders.")
err_console = Console(stderr=True, soft_wrap=True)


def _register() -> None:
    from netprobe.agent.cli import app as agent_app
    from netprobe.alerts.cli import app as alerts_app
    from netprobe.budget.cli import budget as budget_cmd
    from netprobe.collector.cli import app as collector_app
    from netprobe.config_cli import app as config_app
    from netprobe.demo.cli import demo as demo_cmd
    from netprobe.diagnose.cli import diagnose as diagnose_cmd
    from netprobe.lab.cli import app as lab_app
    from netprobe.probe_cli import app as probe_app
    from netprobe.report.cli import app as report_app
    from netprobe.store.cli import app as db_app
    from netprobe.target.cli import target as target_cmd

    app.add_typer(probe_app, name="probe", help="Run one probe now and print what it measured.")
    app.add_typer(agent_app, name="agent", help="Run the scheduled agent.")
    app.add_typer(collector_app, name="collector", help="Run the central collector; manage agent tokens.")
    app.add_typer(config_app, name="config", help="Validate configuration files.")
    app.add_typer(db_app, name="db", help="Database maintenance.")
    app.add_typer(lab_app, name="lab", help="Emulated routes for demos and tests (root).")
    app.add_typer(alerts_app, name="alerts", help="Alert notifiers: send a test message through each.")
    app.add_typer(report_app, name="report", help="Reports from the hourly rollups (evening peak).")
    app.command("budget")(budget_cmd)
    app.command("demo")(demo_cmd)
    app.command("diagnose")(diagnose_cmd)
    app.command("target")(target_cmd)  # one command, not a group: `netprobe target --listen …`


_register()


def main() -> None:
    try:
        app()
    except ConfigError as exc:
        where = f"{exc.source}: " if exc.source else ""
        n = len(exc.problems)
        err_console.print(f"[bold red]error:[/] {where}{n} configuration problem{'s' * (n != 1)}",
                          highlight=False)
        for problem in exc.problems:
            err_console.print(f"  {problem}", highlight=False, markup=False)
        sys.exit(exc.exit_code)
    except NetprobeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
