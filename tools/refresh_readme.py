#!/usr/bin/env python3
"""Re-runs every `$ memwall ...` command of README.md's console blocks and
pastes its real output in place, so that the README shows what the code
prints today (after a change to the zoo, say).

Usage: tools/refresh_readme.py [BUILD_DIR] [--only SUBSTRING]

Commands run in a scratch directory next to a link to ../shared, so that
relative paths such as ../shared/data/layout (and tests/, linked there)
resolve as from the checkout and files the commands write do not land in
the repository. `echo $?`
prints the exit code of the command before it.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_blocks(text, memwall, only):
    out, lines, i = [], text.split("\n"), 0
    scratch = tempfile.mkdtemp(prefix="memwall-readme-")
    work = os.path.join(scratch, "work")
    os.mkdir(work)
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(scratch, "shared"))
    # Inputs the README names by repository path (tests/python/*.py).
    os.symlink(os.path.join(ROOT, "tests"), os.path.join(work, "tests"))
    bindir = os.path.join(scratch, "bin")
    os.mkdir(bindir)
    os.symlink(memwall, os.path.join(bindir, "memwall"))
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"])
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


def main():
    args = [a for a in sys.argv[1:]]
    only = None
    if "--only" in args:
        k = args.index("--only")
        only = args[k + 1]
        del args[k:k + 2]
    build = args[0] if args else os.path.join(ROOT, "build")
    memwall = os.path.abspath(os.path.join(build, "memwall"))
    if not os.access(memwall, os.X_OK):
        sys.exit(f"refresh_readme: no memwall binary at {memwall}")
    path = os.path.join(ROOT, "README.md")
    text = open(path).read()
    new = run_blocks(text, memwall, only)
    with open(path, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
