"""`python -m torchimages.cli`: the command line."""

import sys

from torchimages.cli import main

sys.exit(main(prog="python -m torchimages.cli"))
