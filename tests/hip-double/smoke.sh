#!/usr/bin/env bash
# Smoke test of the wavefuse HIP TEST DOUBLE (see README.md): builds the double and smoke.c into
# a temporary directory and runs smoke against it, then again with both built under
# -fsanitize=address,undefined where the compiler supports that. Without libcuda.so.1 it checks
# the no-driver answers (hipInit -> 100 hipErrorNoDevice); with it, a real kernel round trip.
# Exits 0 on success, non-zero with a message on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cc="${CC:-cc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

die() { echo "hip-double smoke.sh: FAIL: $*" >&2; exit 1; }

run_variant() { # NAME EXTRA_CFLAGS
    local name="$1" flags="$2"
    echo "== hip-double smoke: $name build"
    EXTRA_CFLAGS="$flags" "$here/build.sh" "$tmp/$name" >/dev/null || die "$name build of hip_double.c"
    # shellcheck disable=SC2086  # flags is a list
    "$cc" -std=c11 -O1 -g -Wall -Wextra -Werror $flags -o "$tmp/$name/smoke" "$here/smoke.c" \
        -ldl -lpthread || die "$name build of smoke.c"
    "$tmp/$name/smoke" "$tmp/$name/libamdhip64.so" || die "$name smoke run"
}

run_variant plain ""

if echo 'int main(void){return 0;}' | "$cc" -fsanitize=address,undefined -x c -o "$tmp/probe" - 2>/dev/null \
    && "$tmp/probe"; then
    # protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap would be.
    # detect_leaks=0: the driver's own allocations live for the process and would be reported.
    ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:abort_on_error=1" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
        run_variant sanitized "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
else
    echo "== hip-double smoke: $cc cannot build -fsanitize=address,undefined here; sanitized run skipped"
fi
echo "hip-double smoke.sh: OK"
