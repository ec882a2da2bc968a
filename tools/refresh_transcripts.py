#!/usr/bin/env python3
"""Re-runs every `$ memwall ...` command of the console blocks of the
command pages (docs/cli/*.md) and README.md, and pastes its real output in
place, so that the pages show what the code prints today (after a change
to the zoo, say).

Usage: tools/refresh_transcripts.py [BUILD_DIR] [--only SUBSTRING] [--file PAGE]...
                                    [--list | --check]

  --only SUBSTRING  run only the commands that contain SUBSTRING (the
                    others keep their old output)
  --file PAGE       only this page (a path from the repository root, e.g.
                    docs/cli/plan.md); repeat for several
  --list            print each page's commands and run nothing (needs no
                    binary)
  --check           run them but write nothing: print a diff of each page
                    that would change, exit 1 if any would (timings change
                    from run to run, so read the diff; it is not a test)

Commands run in a scratch directory next to a link to ../shared, so that
relative paths such as ../shared/data/layout (and tests/, linked there)
resolve as from the checkout and files the commands write do not land in
the repository. `echo $?` prints the exit code of the command before it.
"""
import difflib
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pages():
    """The pages with transcripts, relative to ROOT: docs/cli/*.md, then README.md."""
    found = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "cli", "*.md")))
    return found + ["README.md"]


def commands(text):
    """The `$ ...` lines of the console blocks of `text`."""
    found, in_console = [], False
    for line in text.split("\n"):
        if line.startswith("```console"):
            in_console = True
        elif line.startswith("```"):
            in_console = False
        elif in_console and line.startswith("$ "):
            found.append(line[2:])
    return found


def scratch_env(memwall):
    """A scratch working directory and the environment the commands run in."""
    scratch = tempfile.mkdtemp(prefix="memwall-transcripts-")
    work = os.path.join(scratch, "work")
    os.mkdir(work)
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(scratch, "shared"))
    # Inputs the pages name by repository path (tests/python/*.py).
    os.symlink(os.path.join(ROOT, "tests"), os.path.join(work, "tests"))
    bindir = os.path.join(scratch, "bin")
    os.mkdir(bindir)
    os.symlink(memwall, os.path.join(bindir, "memwall"))
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"])
    return work, env


def run_blocks(text, work, env, only):
    out, lines, i = [], text.split("\n"), 0
    in_console, last_rc, ran_previous = False, 0, False
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.startswith("```console"):
            in_console = True
            continue
        if line.startswith("```"):
            in_console = False
            continue
        if not (in_console and line.startswith("$ ")):
            continue
        command = line[2:]
        # The old output: up to the next command or the end of the block.
        j = i
        while j < len(lines) and not lines[j].startswith("$ ") and not lines[j].startswith("```"):
            j += 1
        skip = only and only not in command
        if command == "echo $?":
            skip = not ran_previous
        if skip:
            ran_previous = False
            out.extend(lines[i:j])
            i = j
            continue
        ran_previous = True
        if command == "echo $?":
            output = f"{last_rc}\n"
        else:
            print(f"running: {command}", file=sys.stderr, flush=True)
            done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env,
                                  capture_output=True, text=True)
            # The status of `memwall` itself, not of a `| head` after it.
            last_rc = done.returncode
            output = done.stdout + done.stderr
        out.extend(output.rstrip("\n").split("\n") if output.strip() else [])
        i = j
    return "\n".join(out)


def take(args, flag, with_value):
    """Removes every `flag` (and its value) from args; returns the values, or
    whether the flag was there."""
    values = []
    while flag in args:
        k = args.index(flag)
        if with_value:
            if k + 1 >= len(args):
                sys.exit(f"refresh_transcripts: {flag} needs a value")
            values.append(args[k + 1])
            del args[k:k + 2]
        else:
            values.append(True)
            del args[k]
    return values if with_value else bool(values)


def main():
    args = sys.argv[1:]
    only = (take(args, "--only", True) or [None])[-1]
    files = take(args, "--file", True)
    listing = take(args, "--list", False)
    check = take(args, "--check", False)
    if any(a.startswith("--") for a in args) or len(args) > 1:
        sys.exit(__doc__)
    chosen = pages()
    if files:
        wanted = [os.path.normpath(f) for f in files]
        unknown = [f for f in wanted if f not in chosen]
        if unknown:
            sys.exit(f"refresh_transcripts: not a page with transcripts: {', '.join(unknown)} "
                     f"(pages: docs/cli/*.md, README.md)")
        chosen = [p for p in chosen if p in wanted]
    if listing:
        for page in chosen:
            for command in commands(open(os.path.join(ROOT, page)).read()):
                if command != "echo $?" and (not only or only in command):
                    print(f"{page}: $ {command}")
        return 0
    build = args[0] if args else os.path.join(ROOT, "build")
    memwall = os.path.abspath(os.path.join(build, "memwall"))
    if not os.access(memwall, os.X_OK):
        sys.exit(f"refresh_transcripts: no memwall binary at {memwall}")
    work, env = scratch_env(memwall)
    changed = 0
    for page in chosen:
        path = os.path.join(ROOT, page)
        text = open(path).read()
        new = run_blocks(text, work, env, only)
        if new == text:
            continue
        changed += 1
        if check:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                       f"a/{page}", f"b/{page}"))
        else:
            with open(path, "w") as f:
                f.write(new)
            print(f"refreshed {page}", file=sys.stderr)
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
