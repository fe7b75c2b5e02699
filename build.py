#!/usr/bin/env python3
"""Build, verify and test PyTorch/CUDA container images: `python build.py --help`."""

import sys

from torchimages.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="build.py"))
