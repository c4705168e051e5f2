"""The ``hetune`` command: parse arguments, load config, call a library function."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from hetune import commands_adapt, commands_real, commands_sim
from hetune.common import MissingExtra, require_torch, resolve_config, resolve_overrides
from hetune.sim import plugins
from hetune.sim.errors import ConfigError, RunFailed, WriteFailed, one_line


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one group of subcommands per module."""
    ap = argparse.ArgumentParser(prog="hetune", description="Plan and run PBT on heterogeneous clusters.")
    sub = ap.add_subparsers(dest="command", required=True)
    commands_sim.register(sub)
    commands_real.register(sub)
    commands_adapt.register(sub)
    return ap


def _resolve_paths(args: argparse.Namespace) -> None:
    """Config paths that name no file here fall back to the configs shipped with hetune."""
    for attr in ("experiment", "cluster"):
        if isinstance(getattr(args, attr, None), str):
            setattr(args, attr, resolve_config(getattr(args, attr)))
    if getattr(args, "overrides", None):
        args.overrides = resolve_overrides(args.overrides)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input prints one line and returns 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] in (["calibrate", "curves"], ["calibrate", "spread"]):  # `hetune calibrate curves` is calibrate-curves
        argv = [f"calibrate-{argv[1]}"] + argv[2:]
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "needs_torch", False) or getattr(args, "adapt_policy", None):
            require_torch(" ".join(a for a in (args.command, getattr(args, "adapt_command", None)) if a))
        _resolve_paths(args)
        for spec in getattr(args, "plugins", None) or []:
            plugins.load(spec, "--plugin", "")
        return int(args.fn(args) or 0)
    except ConfigError as exc:
        print(f"hetune: error: {exc.line()}", file=sys.stderr)
        return 2
    except MissingExtra as exc:
        print(f"hetune: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except (RunFailed, WriteFailed) as exc:  # not bad input: the run or a write could not finish
        print(f"hetune: {'failed' if isinstance(exc, RunFailed) else 'error'}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hetune: interrupted; finished results were kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`hetune ... | head`): files are written before anything is
        # printed, so stop quietly with the shell's SIGPIPE status, as other CLIs do; point
        # stdout at /dev/null so the flush at exit does not raise a second time
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
