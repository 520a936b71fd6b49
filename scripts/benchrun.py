"""What every benchmark script does around its work: gnngp's own errors (an unknown dataset, a
device that is not there, a setting out of range) stop it in one line and exit status 2, as
``gnngp run``'s do, never a traceback; and the argparse type of a count with a floor."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional

from gnngp_cli.errors import GnngpError


def guarded(main: Callable[[], Optional[int]]) -> int:
    """``main()``'s exit status (0 for ``None``); a :class:`~gnngp_cli.errors.GnngpError` is one
    line on stderr and status 2."""
    try:
        status = main()
    except GnngpError as err:
        print(f"{Path(sys.argv[0]).name}: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    return int(status or 0)


def at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``low`` (``--rounds 0`` refused before any work)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: give at least {low}")
        return value
    return parse
