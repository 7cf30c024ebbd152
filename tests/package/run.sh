#!/usr/bin/env bash
# Installs fluxion from BUILD into a fresh prefix, builds tests/package against it, runs it.
set -euo pipefail
src=$1 build=$2
prefix=$build/package-test/prefix
rm -rf "$build/package-test"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/tests/package" -B "$build/package-test/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build/package-test/build" >/dev/null
"$build/package-test/build/basic_gradient"
