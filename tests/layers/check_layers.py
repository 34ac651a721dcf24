#!/usr/bin/env python3
"""No source file of kiln includes a header of a layer above its own.

Usage: check_layers.py [REPO_ROOT]

Each folder below belongs to one layer; the layers are ordered bottom to top (the order
backends/README.md states). Every `#include "..."` of every .h/.cpp is resolved the way the
build resolves it (the including file's folder, then the include folders), and the folder the
header lives in must be of the same layer or a lower one. Two more rules: the layers that build
without LLVM/MLIR (everything but the code generator, the cpu compiler, export and the CLI)
include none of those, and passes/ names no CPU-codegen fact. Last, the names of each library
below backends/ agree: folder backends/X/Y = headers kiln/X/Y/ = namespace kiln::X::Y = CMake
target kiln_X_Y (the interface in backends/ itself is kiln/backends/, kiln::backends,
kiln_backends). Prints every violation and exits 1, or prints a summary and exits 0.
"""
import os
import re
import sys

# (layer name, folders), bottom to top. A folder listed later wins for files under it.
LAYERS = [
    ("runtime", ["runtime"]),
    ("ir", ["ir"]),
    ("passes", ["passes"]),
    ("backends interface", ["backends/include", "backends/src"]),
    ("backends/interp", ["backends/interp"]),
    ("backends/cpu", ["backends/cpu"]),
    ("backends/cuda", ["backends/cuda"]),
    ("backends codegen common", ["backends/codegen_common"]),
    ("backends/cpu codegen", ["backends/cpu/codegen"]),
    ("backends/cuda codegen", ["backends/cuda/codegen"]),
    ("backends/cpu compiler", ["backends/cpu/compiler"]),
    ("backends/cuda compiler", ["backends/cuda/compiler"]),
    ("frontend artifact format", ["frontend/artifact"]),
    ("frontend rt", ["frontend/rt"]),
    ("frontend eager", ["frontend/include", "frontend/src"]),
    ("frontend compiler (export)", ["frontend/src/export", "frontend/src/compiler",
                                     "frontend/include/kiln/export.h"]),
    # The umbrella header: the whole public API (export only with KILN_WITH_COMPILER).
    ("frontend umbrella", ["frontend/include/kiln/kiln.h"]),
    ("frontend cli", ["frontend/src/cli"]),
]
# Folders that build only with the code generator (they link LLVM/MLIR).
COMPILER_ONLY = {"backends codegen common", "backends/cpu codegen", "backends/cuda codegen", "backends/cpu compiler",
                 "backends/cuda compiler", "frontend compiler (export)",
                 "frontend umbrella", "frontend cli"}
# rt does not sit above the frontend's eager library: it must not include it.
NOT_BELOW = {("frontend rt", "frontend eager"), ("frontend artifact format", "frontend eager"),
             ("frontend rt", "frontend compiler (export)")}
INCLUDE_DIRS = ["runtime/include", "ir/include", "passes/include", "backends/include",
                "backends/interp/include", "backends/cpu/kernels/include", "backends/cpu/gemm/include",
                "backends/cuda/include", "backends/codegen_common/include",
                "backends/cuda/codegen/include",
                "backends/cpu/exec/include", "backends/cpu/codegen/include",
                "backends/cpu/compiler/include", "backends/cuda/exec/include",
                "backends/cuda/compiler/include", "frontend/artifact/include",
                "frontend/rt/include", "frontend/include", "frontend/src", "ir/src",
                "passes/src", "."]
# CPU-codegen facts a target-independent pass must not know (passes ask FusionRules).
PASSES_FORBIDDEN = [r"is_cpu\(\)", r"supported_dtype", r'#\s*include\s+"kiln/(cpu|interp|backends)/']
# Where passes/ may still test for the CPU, and why.
PASSES_ALLOWED = {
    # Constant folding evaluates nodes at compile time with the eager CPU kernels: where the
    # folding runs, not what a backend generates.
    ("passes/src/canonicalize_fold.cpp", "is_cpu()"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    best, rank = None, -1
    for i, (name, folders) in enumerate(LAYERS):
        for f in folders:
            if path == f or path.startswith(f + "/"):
                if best is None or len(f) >= len(best[1]):
                    best, rank = (name, f), i
    return (best[0], rank) if best else (None, -1)


def resolve(root, source, header):
    for base in [os.path.dirname(source)] + INCLUDE_DIRS:
        candidate = os.path.normpath(os.path.join(base, header))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


NAMESPACE = re.compile(r"^namespace (kiln(?:::\w+)*) \{", re.M)
ADD_LIBRARY = re.compile(r"add_library\((kiln_\w+) (?:STATIC|SHARED)")


def name_problems(root):
    """Folder = include path = namespace = CMake target, for every library under backends/."""
    problems, libraries = [], 0
    for folder, dirs, files in os.walk(os.path.join(root, "backends")):
        if "CMakeLists.txt" not in files:
            continue
        cmake = open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8").read()
        targets = ADD_LIBRARY.findall(cmake)
        if not targets:
            continue
        libraries += 1
        rel = os.path.relpath(folder, os.path.join(root, "backends"))
        parts = ["backends"] if rel == "." else rel.split(os.sep)
        where = os.path.relpath(folder, root)
        want_target, want_ns = "kiln_" + "_".join(parts), "kiln::" + "::".join(parts)
        want_include = os.path.join("include", "kiln", *parts)
        if targets != [want_target]:
            problems.append(f"{where}/CMakeLists.txt: the library is {targets}, expected "
                            f"{want_target} (the folder's name)")
        for sub, _, names in os.walk(folder):
            if os.path.relpath(sub, folder) != "." and rel == "." and \
                    os.path.relpath(sub, folder).split(os.sep)[0] != "include" and \
                    os.path.relpath(sub, folder).split(os.sep)[0] != "src":
                continue  # another library's folder below the interface
            if sub != folder and os.path.isfile(os.path.join(sub, "CMakeLists.txt")):
                continue
            for name in names:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(sub, name)
                source = os.path.relpath(path, root)
                inside = os.path.relpath(path, folder)
                if inside.startswith("include" + os.sep) and \
                        not inside.startswith(want_include + os.sep):
                    problems.append(f"{source}: a public header of {want_target} belongs under "
                                    f"{where}/{want_include}/")
                text = open(path, encoding="utf-8").read()
                for m in NAMESPACE.finditer(text):
                    ns = m.group(1)
                    if ns == want_ns or ns.startswith(want_ns + "::"):
                        continue
                    if ns in OTHER_NAMESPACE_DECLARATIONS:
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{source}:{line}: namespace {ns} in {where}; expected "
                                    f"{want_ns}")
    return problems, libraries


# Namespaces a library may open besides its own: forward declarations of a lower layer's types.
OTHER_NAMESPACE_DECLARATIONS = {"kiln", "kiln::ir", "kiln::interp", "kiln::passes",
                                "kiln::cpu::gemm", "kiln::cpu::codegen", "kiln::cpu::exec"}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
    root = os.path.abspath(root)
    problems, checked = [], 0
    for top in ["runtime", "ir", "passes", "backends", "frontend"]:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".hpp")):
                    continue
                source = os.path.relpath(os.path.join(folder, name), root)
                own, own_rank = layer_of(source)
                if own is None:
                    continue
                text = open(os.path.join(root, source), encoding="utf-8").read()
                checked += 1
                if own == "passes":
                    for pattern in PASSES_FORBIDDEN:
                        for m in re.finditer(pattern, text):
                            if (source, m.group(0)) in PASSES_ALLOWED:
                                continue
                            line = text.count("\n", 0, m.start()) + 1
                            problems.append(f"{source}:{line}: passes/ names a CPU-codegen fact "
                                            f"({m.group(0)}); ask PassContext::fusion instead")
                for m in INCLUDE.finditer(text):
                    header = resolve(root, source, m.group(1))
                    if header is None:
                        continue
                    theirs, their_rank = layer_of(header)
                    line = text.count("\n", 0, m.start()) + 1
                    if their_rank > own_rank or (own, theirs) in NOT_BELOW:
                        problems.append(f"{source}:{line}: {own} includes {header} "
                                        f"({theirs}, a layer above)")
                    elif theirs in COMPILER_ONLY and own not in COMPILER_ONLY:
                        problems.append(f"{source}:{line}: {own} builds without LLVM/MLIR but "
                                        f"includes {header} ({theirs})")
    naming, libraries = name_problems(root)
    problems += naming
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering or naming problems in {checked} files")
        return 1
    print(f"{checked} files: no include of a higher layer, no CPU-codegen fact in passes/; "
          f"{libraries} libraries under backends/ whose folder, headers, namespace and target agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
