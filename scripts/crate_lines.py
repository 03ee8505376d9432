#!/usr/bin/env python3
"""Non-test Rust lines per crate, and each crate's share of the project's.

Counts every line of `*.rs` under each crate's `src/` (each folder of the repository
root with a Cargo.toml), leaving out `#[cfg(test)] mod NAME { ... }` blocks,
`tests.rs` files and `tests/` folders. Issue 27 asks that the largest crate hold at
most a quarter. Usage: python3 scripts/crate_lines.py [REPO_ROOT]
"""

import pathlib
import re
import sys

MOD_OPEN = re.compile(r"(pub(\([a-z]+\))? )?mod \w+\s*\{")
MOD_DECL = re.compile(r"(pub(\([a-z]+\))? )?mod \w+;")


def count(path: pathlib.Path) -> int:
    """Lines of `path` outside its `#[cfg(test)] mod ... { ... }` blocks."""
    lines, depth, skipping, pending = 0, 0, False, False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if skipping:
            depth += line.count("{") - line.count("}")
            skipping = depth > 0
            continue
        if stripped == "#[cfg(test)]":
            pending = True
            continue
        if pending and MOD_OPEN.match(stripped):
            depth = line.count("{") - line.count("}")
            skipping, pending = depth > 0, False
            continue
        if pending and MOD_DECL.match(stripped):
            pending = False  # `mod tests;`: its file is left out below
            continue
        if pending:
            lines += 1  # the attribute of an item that is not a test module
            pending = False
        lines += 1
    return lines


def main() -> None:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    per_crate = {}
    for manifest in sorted(root.glob("*/Cargo.toml")):
        src = manifest.parent / "src"
        if not src.is_dir():
            continue
        per_crate[manifest.parent.name] = sum(
            count(p)
            for p in src.rglob("*.rs")
            if p.name != "tests.rs" and "tests" not in p.relative_to(src).parts
        )
    total = sum(per_crate.values())
    for name, lines in sorted(per_crate.items(), key=lambda kv: -kv[1]):
        print(f"{name:12} {lines:6} {100 * lines / total:5.1f} %")
    print(f"{'total':12} {total:6}")


if __name__ == "__main__":
    main()
