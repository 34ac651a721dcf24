#!/usr/bin/env python3
"""Keeps the `kiln` command lines shown in docs/ true: runs every command of each block marked
with the line below and compares what it prints with what the block shows.

    <!-- checked by tests/cli/check_docs.py -->
    ```text
    $ kiln summary --model batch_norm_cnn
    (its output, exactly)
    ```

A block may hold several `$ kiln ...` lines, each followed by its output (stdout and stderr
together). Commands run from the repository root with KILN_LOG unset, so the output must not
depend on timing or on the machine: mark only such blocks.

Usage: check_docs.py KILN_BINARY [--update]   (--update rewrites the blocks from real runs)
"""
import difflib
import os
import pathlib
import shlex
import subprocess
import sys

MARK = "<!-- checked by tests/cli/check_docs.py -->"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(kiln, command):
    args = shlex.split(command)
    assert args[0] == "kiln", f"a checked block runs kiln only, found: {command}"
    env = {k: v for k, v in os.environ.items() if k != "KILN_LOG"}
    done = subprocess.run([kiln] + args[1:], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    return [line.rstrip() for line in done.stdout.splitlines()]


def blocks(lines):
    """(start, end) line indices of the body of every marked ```text block."""
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            assert lines[i + 1].startswith("```"), f"line {i + 2}: expected ``` after the mark"
            end = i + 2
            while not lines[end].startswith("```"):
                end += 1
            yield i + 2, end
            i = end
        i += 1


def expected_runs(body):
    """[(command, expected output lines)] of one block body."""
    runs = []
    for line in body:
        if line.startswith("$ "):
            runs.append((line[2:], []))
        else:
            assert runs, f"a checked block starts with '$ kiln ...', found: {line}"
            runs[-1][1].append(line.rstrip())
    for command, output in runs:  # a blank line separates two commands in a block
        while output and output[-1] == "":
            output.pop()
    return runs


def main():
    kiln, update = sys.argv[1], "--update" in sys.argv[2:]
    failures, checked = 0, 0
    for doc in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        lines = doc.read_text().split("\n")
        rewritten = list(lines)
        for start, end in reversed(list(blocks(lines))):
            new_body = []
            for command, want in expected_runs(lines[start:end]):
                got = run(kiln, command)
                checked += 1
                if new_body:
                    new_body.append("")
                new_body += ["$ " + command] + got
                if got != want and not update:
                    failures += 1
                    print(f"FAIL {doc.relative_to(ROOT)}: `{command}` prints something else:")
                    sys.stdout.writelines(
                        line + "\n" for line in difflib.unified_diff(
                            want, got, "documented", "printed", lineterm=""))
            rewritten[start:end] = new_body
        if update and rewritten != lines:
            doc.write_text("\n".join(rewritten))
            print(f"updated {doc.relative_to(ROOT)}")
    if failures:
        print(f"{failures} documented command(s) out of date. Fix: "
              f"tests/cli/check_docs.py {kiln} --update, then review the diff.")
        return 1
    print(f"check_docs.py: {checked} documented commands print what the docs show")
    return 0


if __name__ == "__main__":
    sys.exit(main())
