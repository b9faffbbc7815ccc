"""The `sharegroup` command line (layer 4). Exit codes: 0 ok, 1 audit violations, 2 usage or environment."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharegroup",
        description="Share-group delivery engine: the broker-side half of Kafka share groups (KIP-932).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "demo",
        help="walk through KIP-932's worked example on one share-partition",
        description="Run KIP-932's worked example step by step against the share-partition leader and the "
        "share coordinator's rules, printing the in-flight window and the durable state after each step.",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "demo":
            from .walkthrough import main as demo_main

            return demo_main()
    except ImportError as exc:  # e.g. the native tracker is not built
        print(f"sharegroup: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
