#!/usr/bin/env bash
# Builds llama.cpp's C++ llama-server from the sources vendored in the llama-cpp-python sdist
# (PyPI has no Linux wheel with the server binary, and the machines reach no other source host).
# The binary is cached outside the repo: about 13 minutes on 2 cores the first time, instant after.
# Prints the binary's path last. Needs cmake and a C++ compiler (make real-engine installs them when
# missing); PYTHON picks the interpreter whose pip downloads the sdist (default python3).
set -euo pipefail
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=${LOADLINE_CACHE:-$HOME/.cache/loadline}/llama.cpp-$version
bin=$cache/build/bin/llama-server
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
"${PYTHON:-python3}" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$cache/sdist" >&2
src=$cache/src
rm -rf "$src" && mkdir -p "$src"
tar -xzf "$cache"/sdist/llama_cpp_python-"$version".tar.gz -C "$src" --strip-components=1
generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
# Portable x86-64 flags (no -march=native) so the cached binary survives a move to another CPU.
cmake -S "$src/vendor/llama.cpp" -B "$cache/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_CUDA=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
cmake --build "$cache/build" --target llama-server -j "${JOBS:-$(nproc)}" >&2
echo "$bin"
