"""`settings`: every environment variable the tool reads, its effective value and where that came from."""

from __future__ import annotations

import argparse
import json

from torchimages import settings, values
from torchimages.cli.common import EXIT_OK
from torchimages.problems import shown

NAME = "settings"
HELP = "show every environment variable the tool reads: its effective value and where it came from"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def spelled(value: object) -> str:
    """A setting's value as the environment would spell it."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return " ".join(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def shown_value(setting: settings.Setting) -> str:
    """A setting's value as it may be shown: every URL in it without its login (`http://USER:PASSWORD@HOST`: a
    mirror's, an index's, a registry's)."""
    return values.hide_logins(spelled(settings.value(setting.name)))


def run(args: argparse.Namespace) -> int:
    rows = [
        {
            "name": s.name,
            "value": shown_value(s),
            "source": settings.source(s.name),
            "default": s.default,
            "kind": s.kind,
            "meaning": s.meaning,
            "commands": list(s.commands),
        }
        for s in settings.SETTINGS
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(s.name) for s in settings.SETTINGS)
    for row in rows:
        print(f"{row['name']:<{width}}  {row['source']:<11}  {shown(str(row['value']) or '-')}")
    return EXIT_OK
