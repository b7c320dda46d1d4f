"""The Python command every child process of Loadline starts with (Locust, the simulator, the precheck,
a report built for the web UI).

`-P` (safe path, Python 3.11+): the working directory is not put first on the child's sys.path, so a
folder `loadline/` or a file `loadline.py` where the user runs `loadline` cannot shadow the installed
package (every child failed with an ImportError that did not name the folder).

Locust itself puts the working directory first on sys.path when it loads a locustfile
(locust/util/load_locustfile.py), so its launcher imports `loadline` before Locust starts: an
imported package finds its sub-modules through its own __path__, never sys.path again. A
locustfile's own helper modules are still found where Locust looks for them.
"""

from __future__ import annotations

import sys

PYTHON: tuple[str, ...] = (sys.executable, "-P")

# argv[0] set so that Locust's parser says `locust: error:`, not `-c: error:`; a Ctrl-C while Locust
# still imports (seconds on a busy machine, before its own handler is in place) ends it quietly with
# 130, not with a KeyboardInterrupt traceback.
LOCUST: tuple[str, ...] = (
    *PYTHON,
    "-c",
    "import sys\nimport loadline\nsys.argv[0] = 'locust'\ntry:\n"
    "    from locust.main import main\n    main()\n"
    "except KeyboardInterrupt:\n    sys.exit(130)\n",
)
