"""``namesrv``: start a worker (``mqnamesrv``-compatible flags), or run a tool.

namesrv [-c FILE] [-p]      serve; -c takes TOML or a Java namesrv.properties; -p prints the
                            effective configuration and exits
namesrv events export --out DIR
                            copy the change log to files (see namesrv.events.export)
namesrv admin COMMAND ...   admin writes through this machine's worker over loopback
                            (see namesrv.admin_cli)
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from namesrv import logs
from namesrv.config import ConfigError, Settings, read_settings
from namesrv.javaprops import format_properties
from namesrv.security.redact import redact_text

log = logging.getLogger("namesrv.config")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="namesrv",
        description="A RocketMQ NameServer fleet worker: stateless, routes in Redis.",
        epilog="Tools: 'namesrv events export --out DIR' copies the change log to files; "
        "'namesrv admin --help' lists the admin writes (wipe-write-perm, kv-put, ...).",
    )
    parser.add_argument(
        "-c",
        "--config",
        "--configFile",
        dest="config",
        metavar="FILE",
        help="config file: TOML (see config/default.toml) or a Java namesrv.properties",
    )
    parser.add_argument(
        "-p",
        "--print-config",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print the effective configuration and exit",
    )
    parser.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv_addr",
        metavar="ADDR",
        help="accepted for mqnamesrv compatibility; has no effect",
    )
    return parser


def print_config(settings: Settings) -> None:
    sys.stdout.write(format_properties(settings.as_properties()))
    if settings.embedded_redis:
        sys.stdout.write(
            "# redisUrl is empty: an embedded redis-server will be started. It serves one "
            "process on one machine only; set NAMESRV_REDIS_URL to share a registry.\n"
        )


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["events"]:
        from namesrv.events.cli import main as events_main  # a tool: keep the server's imports out

        return events_main(given[1:])
    if given[:1] == ["admin"]:
        from namesrv.admin_cli import main as admin_main

        return admin_main(given[1:])
    args = build_parser().parse_args(given)
    try:
        settings, notices = read_settings(args.config)
    except ConfigError as exc:
        print(f"namesrv: configuration error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    if args.print_config:
        for _, text in notices:
            print(f"namesrv: {text}", file=sys.stderr)
        print_config(settings)
        return 0
    logs.configure(settings.logLevel, settings.logFormat)
    for level, text in notices:  # only now: before configure() INFO lines would be dropped
        log.log(level, "%s", text)
    from namesrv.runner import StartupError, run  # keep `-p` free of the server's imports

    try:
        run(settings)
    except StartupError as exc:
        print(f"namesrv: cannot start: {redact_text(str(exc))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
