"""`python -m loadline ...` is the same as the `loadline` command."""

import sys

from loadline.commands.main import main

sys.exit(main())
