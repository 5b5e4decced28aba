"""``namesrv events ...``: tools for the change log (``namesrv events export --out DIR``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import redis

from namesrv.config import ConfigError, load_settings
from namesrv.events.export import EXIT_GAP, Exporter, ExportError
from namesrv.events.layout import FORMATS, FormatUnavailable
from namesrv.store.keyspace import Keyspace


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="namesrv events", description="Tools for the registry's change log."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser(
        "export",
        help="copy the change log to gzip JSON-lines or Parquet files, resumable from a checkpoint",
        description="Copy {<namespace>}:events to OUT/day=YYYY-MM-DD/*.jsonl.gz (or *.parquet with "
        "--format parquet). Resumes after the "
        "checkpoint in OUT/_export; safe to run on a schedule. Exit status 3: events were lost "
        "because the stream was trimmed past the checkpoint (recorded in OUT/_export/gaps.jsonl).",
    )
    export.add_argument("--out", required=True, metavar="DIR", help="output folder (local filesystem)")
    export.add_argument(
        "-c", "--config", metavar="FILE", help="the service's config file (for redisUrl, namespace)"
    )
    export.add_argument("--redis-url", metavar="URL", help="Redis URL (default: the service's redisUrl)")
    export.add_argument("--namespace", metavar="NS", help="key namespace (default: the service's namespace)")
    export.add_argument("--batch", type=int, default=20_000, metavar="N", help="entries per XRANGE and file")
    export.add_argument(
        "--format",
        choices=FORMATS,
        default="jsonl",
        help="jsonl: gzip JSON lines (default, no extra package); parquet: columnar, several times "
        "faster for the pipeline to read, needs pyarrow (the pipeline extra)",
    )
    export.add_argument(
        "--max-events", type=int, default=0, metavar="N", help="stop after N entries (0: all)"
    )
    export.add_argument(
        "--shard",
        type=_shard,
        default=(0, 1),
        metavar="I/N",
        help="run as shard I of N exporters into the same --out (each writes the entries whose "
        "ID millisecond is I mod N, with its own checkpoint; default 0/1: all)",
    )
    return parser


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count) <= 1024):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 0 <= I < N <= 1024")
    return int(index), int(count)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"namesrv events: configuration error: {exc}", file=sys.stderr)
        return 2
    url = args.redis_url or settings.redisUrl
    if not url:
        print(
            "namesrv events export: no Redis URL: pass --redis-url or set NAMESRV_REDIS_URL "
            "(an embedded Redis belongs to the worker that started it)",
            file=sys.stderr,
        )
        return 2
    stream = Keyspace(args.namespace or settings.namespace).events
    client = redis.Redis.from_url(url, decode_responses=False, socket_timeout=30.0)
    try:
        exporter = Exporter(client, stream, args.out, batch=args.batch, fmt=args.format, shard=args.shard)
        result = exporter.run(max_events=args.max_events)
    except (ExportError, FormatUnavailable, ValueError) as exc:
        print(f"namesrv events export: {exc}", file=sys.stderr)
        return 2
    except redis.RedisError as exc:
        print(f"namesrv events export: Redis error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(
        f"exported {result.exported} events in {result.files} files from {stream} to {args.out}; "
        f"last id {result.last_id}"
    )
    if result.gap_found:
        print(f"namesrv events export: EVENTS WERE LOST, see {args.out}/_export/gaps.jsonl", file=sys.stderr)
        return EXIT_GAP
    return 0
