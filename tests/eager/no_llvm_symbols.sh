#!/usr/bin/env bash
# Usage: no_llvm_symbols.sh LIBRARY...
# Fails when an object of a static library (or a shared library) references an LLVM or MLIR
# symbol, or a shared library needs libLLVM/libMLIR: these libraries must build and run on a
# machine without those packages (-DKILN_COMPILER=OFF, backends/README.md).
set -euo pipefail
status=0
for library in "$@"; do
  [ -f "$library" ] || { echo "FAIL: $library does not exist" >&2; status=1; continue; }
  # Undefined symbols, demangled: what the library needs from elsewhere.
  found=$(nm -C --undefined-only "$library" 2>/dev/null |
          grep -E '(^|[^A-Za-z_])(llvm|mlir)::|[^A-Za-z_]LLVM[A-Z][A-Za-z]*$|[^A-Za-z_]mlir[A-Z][A-Za-z]*$' |
          sort -u | head -5 || true)
  if [ -n "$found" ]; then
    echo "FAIL: $(basename "$library") references LLVM/MLIR symbols, e.g.:" >&2
    echo "$found" | sed 's/^/  /' >&2
    status=1
  fi
  if [[ "$library" == *.so* ]]; then
    needed=$(readelf -d "$library" | grep NEEDED | grep -Ei 'llvm|mlir' || true)
    if [ -n "$needed" ]; then
      echo "FAIL: $(basename "$library") needs $needed" >&2
      status=1
    fi
  fi
done
[ $status -eq 0 ] && echo "$# libraries checked: no LLVM or MLIR symbol referenced"
exit $status
