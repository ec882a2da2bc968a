#!/usr/bin/env python3
"""Checks that each module includes only what it may depend on, and links it.

DESIGN.md's module table says which modules each module may depend on (its
"may depend on" column, taken transitively: graph may use base, so every
module that may use graph may use base too). DESIGN.md lives beside the
checkout (../shared/DESIGN.md), not in it, so the table is copied below
(DESIGN_TABLE); when DESIGN.md is there (or given with --design), the copy
must match it. For every module folder, src/<m>/ and include/memwall/<m>/,
this reads each `#include "memwall/<x>/..."` and fails when

  - <x> is not a module <m> may depend on (a module never includes a header
    of a module to its right in the dependency column, DESIGN.md), or
  - <m>'s library target does not link <x>'s, directly or through the
    targets it links (memwall_module(...) and target_link_libraries(...)
    in CMakeLists.txt and src/**/CMakeLists.txt).

It also fails on a module folder that the table does not name. The pairs
of BEYOND_DESIGN are allowed beyond the table, each with its reason. Headers
under include/memwall/cli/ are included by tests only; tests are not
checked. Usage: tools/check_module_deps.py [--root DIR] [--design FILE].
Standard library only; the test ModuleDeps.Check runs it
(tests/CMakeLists.txt).
"""

import argparse
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".cc", ".h", ".cpp", ".hpp", ".in"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]memwall/([A-Za-z0-9_]+)/')
ROW_RE = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*([^|]*?)\s*\|\s*$")


# DESIGN.md's "Modules" table: each module and its "may depend on" column,
# word for word, in the table's order.
DESIGN_TABLE = [
    ("base", "—"),
    ("graph", "base"),
    ("hw", "graph"),
    ("models", "graph"),
    ("plan", "graph"),
    ("sim", "graph, hw, plan"),
    ("layout", "graph, plan"),
    ("remat", "graph, hw, plan, sim"),
    ("swap", "graph, hw, plan, sim"),
    ("planner", "all of the above"),
    ("alloc", "— (own device interface)"),
    ("importers", "graph"),
    ("report", "graph, plan, sim"),
    ("runtime", "alloc"),
    ("exec", "graph, plan, alloc, runtime"),
    ("cli", "everything"),
    ("python/memwall", "the C++ modules through their public headers"),
]


# Modules whose library another module loads at run time instead of
# linking: the includes declare the types of the call. `memwall run` loads
# libmemwall_exec.so (memwall/exec/library.h, in memwall_exec_api, which
# cli links), so that only it needs libtorch.
LOADED_AT_RUN_TIME = {("cli", "exec")}

# Dependencies beyond DESIGN.md's column, each for a reason
# docs/architecture.md gives too. The planner returns plans that run, and
# whether a plan without offsets runs is the runtime allocator's own replay
# of it (Note [Plans that run] in src/planner/runnable_plan.cc); alloc
# depends on nothing, so there is no cycle. The planner's summary of the
# plans it makes (memwall/planner/plan_summary.h: `memwall plan`'s table,
# and the Python package's print(plan)) is written with report's rows;
# report depends only on graph, plan and sim, so there is no cycle either.
BEYOND_DESIGN = {("planner", "alloc"), ("planner", "report")}


def read_design(path):
    """DESIGN.md's module table: [(name, text of its dependency column)]."""
    text = path.read_text(encoding="utf-8")
    start = text.find("| module |")
    if start < 0:
        sys.exit(f"check_module_deps: {path} has no module table (a row starting '| module |')")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        match = ROW_RE.match(line)
        if match:
            rows.append((match.group(1), match.group(3)))
    return rows


def allowed_modules(rows):
    """Module -> the set of modules it may depend on, transitively."""
    names = [name for name, _ in rows]
    direct = {}
    for index, (name, column) in enumerate(rows):
        words = column.strip()
        if words.startswith("—") or words.startswith("-") or not words:
            direct[name] = set()
        elif words.startswith("all of the above"):
            direct[name] = set(names[:index])
        elif words.startswith("everything"):
            direct[name] = set(names) - {name}
        else:
            deps = {word.strip(" `") for word in re.split(r",| and ", words)}
            unknown = sorted(dep for dep in deps if dep not in names)
            if unknown and "/" in name:
                # python/memwall's "the C++ modules through their public
                # headers": no folder under src/, nothing to check.
                direct[name] = None
                continue
            if unknown:
                sys.exit(
                    f"check_module_deps: DESIGN.md: module '{name}' may depend on "
                    f"{', '.join(unknown)}, which the table does not name"
                )
            direct[name] = deps
    closed = {}
    for name in names:
        if direct[name] is None:
            continue
        seen = set()
        stack = list(direct[name])
        while stack:
            dep = stack.pop()
            if dep in seen:
                continue
            seen.add(dep)
            stack.extend(direct.get(dep) or ())
        closed[name] = seen
    return closed


def read_cmake_links(root):
    """memwall_<m> target -> the memwall_* targets it names as links."""
    files = [root / "CMakeLists.txt"] + sorted((root / "src").rglob("CMakeLists.txt"))
    links = {}
    for path in files:
        text = re.sub(r"#[^\n]*", "", path.read_text(encoding="utf-8"))
        for match in re.finditer(r"\b(memwall_module|target_link_libraries)\s*\(([^)]*)\)", text):
            words = match.group(2).split()
            if not words:
                continue
            if match.group(1) == "memwall_module":
                target = "memwall_" + words[0]
                args = words[1:]
            else:
                target = words[0]
                args = words[1:]
            if not target.startswith("memwall_"):
                continue
            entry = links.setdefault(target, set())
            entry.update(word for word in args if re.fullmatch(r"memwall_[A-Za-z0-9_]+", word))
    return links


def linked(links, target):
    """Every memwall_* target that `target` links, directly or not."""
    seen = set()
    stack = list(links.get(target, ()))
    while stack:
        dep = stack.pop()
        if dep in seen:
            continue
        seen.add(dep)
        stack.extend(links.get(dep, ()))
    return seen


def module_files(root, module):
    for folder in (root / "src" / module, root / "include" / "memwall" / module):
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.suffix in SOURCE_SUFFIXES:
                    yield path


def module_folders(root):
    found = set()
    src = root / "src"
    if src.is_dir():
        found.update(p.name for p in src.iterdir() if p.is_dir())
    include = root / "include" / "memwall"
    if include.is_dir():
        found.update(p.name for p in include.iterdir() if p.is_dir())
    return sorted(found)


def check(root, rows):
    allowed = allowed_modules(rows)
    links = read_cmake_links(root)
    problems = []
    checked = 0
    for module in module_folders(root):
        if module not in allowed:
            problems.append(
                f"src/{module} or include/memwall/{module}: module '{module}' is not in "
                "DESIGN.md's module table"
            )
            continue
        target = f"memwall_{module}"
        has_target = target in links
        reach = linked(links, target)
        for path in module_files(root, module):
            rel = path.relative_to(root)
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            for number, line in enumerate(lines, 1):
                match = INCLUDE_RE.match(line)
                if not match:
                    continue
                dep = match.group(1)
                if dep == module:
                    continue
                checked += 1
                if dep not in allowed and dep not in (name for name, _ in rows):
                    problems.append(
                        f"{rel}:{number}: includes memwall/{dep}/, which is no module in "
                        "DESIGN.md's table"
                    )
                elif dep not in allowed[module] and (module, dep) not in BEYOND_DESIGN:
                    may = ", ".join(sorted(allowed[module])) or "no other module"
                    problems.append(
                        f"{rel}:{number}: module '{module}' includes memwall/{dep}/, but "
                        f"DESIGN.md lets it depend on {may}"
                    )
                elif (module, dep) in LOADED_AT_RUN_TIME:
                    continue
                elif not has_target:
                    problems.append(
                        f"{rel}:{number}: includes memwall/{dep}/, but the build has no "
                        f"target {target} to link memwall_{dep}"
                    )
                elif f"memwall_{dep}" not in reach:
                    problems.append(
                        f"{rel}:{number}: includes memwall/{dep}/, but {target} does not link "
                        f"memwall_{dep} (CMakeLists.txt)"
                    )
    return problems, checked


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent,
                        type=pathlib.Path, help="the source tree (default: this script's)")
    parser.add_argument("--design", type=pathlib.Path,
                        help="DESIGN.md to hold the copied table against "
                        "(default: ROOT/../shared/DESIGN.md when it exists)")
    args = parser.parse_args()
    root = args.root.resolve()
    design = args.design or root.parent / "shared" / "DESIGN.md"
    if args.design or design.is_file():
        rows = read_design(design)
        if rows != DESIGN_TABLE:
            print(f"check_module_deps: {design}'s module table differs from DESIGN_TABLE in "
                  f"{pathlib.Path(__file__).name}; copy it:")
            for name, column in rows:
                print(f"    ({name!r}, {column!r}),")
            return 1
    problems, checked = check(root, DESIGN_TABLE)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_module_deps: {len(problems)} problem(s) in {checked} includes of other modules")
        return 1
    print(f"check_module_deps: {checked} includes of other modules, each allowed and linked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
