#!/usr/bin/env bash
# Builds the wavefuse HIP TEST DOUBLE (libamdhip64.so over the CUDA driver API; see README.md)
# into OUTDIR and prints the path it wrote. EXTRA_CFLAGS (optional) is appended to the compiler
# flags, e.g. EXTRA_CFLAGS='-fsanitize=address,undefined -g'.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
outdir="$1"
mkdir -p "$outdir"
# shellcheck disable=SC2086  # EXTRA_CFLAGS is a list of flags
${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror ${EXTRA_CFLAGS:-} -shared -fPIC \
    -o "$outdir/libamdhip64.so" "$here/hip_double.c" -ldl -lpthread
echo "$outdir/libamdhip64.so"
