#!/usr/bin/env bash
# Makes llama-cpp-python's `llama_cpp.server` runnable without a second compile of llama.cpp.
# `pip install llama-cpp-python[server]` builds the vendored llama.cpp again (15-20+ min on 2 cores);
# the same sdist's shared libraries already exist beside the llama-server build_llama_server.sh made,
# and the package loads them from LLAMA_CPP_LIB_PATH (its llama_cpp/llama_cpp.py reads that variable).
# So: a venv with the server's pure-Python dependencies (the sdist's [server] extra), a .pth file that
# puts the sdist's llama_cpp package on its path, and the libraries from the build. Prints the venv's
# interpreter last; run it with LLAMA_CPP_LIB_PATH=<cache>/build/bin.
set -euo pipefail
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=${LOADLINE_CACHE:-$HOME/.cache/loadline}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/build_llama_server.sh" >/dev/null  # the sources and the shared libraries
venv=$cache/llama-cpp-python-$version-venv
if ! "$venv/bin/python" -c "import llama_cpp.server.app" 2>/dev/null; then
  python3 -m venv "$venv"
  # the [server] extra and the base dependencies of llama-cpp-python 0.3.36's pyproject.toml
  "$venv/bin/pip" install -q "uvicorn>=0.22.0" "fastapi>=0.100.0" "pydantic-settings>=2.0.1" \
    "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4" "PyYAML>=5.1" "typing-extensions>=4.5.0" \
    "numpy>=1.20.0" "diskcache>=5.6.1" "jinja2>=2.11.3" >&2
  purelib=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$cache/llama.cpp-$version/src" > "$purelib/llama_cpp_sdist.pth"
fi
LLAMA_CPP_LIB_PATH=$cache/llama.cpp-$version/build/bin "$venv/bin/python" -c "import llama_cpp.server.app" >&2
echo "$venv/bin/python"
