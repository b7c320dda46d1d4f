"""`python -m simulator ...` is the same as `loadline sim ...`."""

import sys

from loadline.cli import main

sys.exit(main(["sim", *sys.argv[1:]]))
