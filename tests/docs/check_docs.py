#!/usr/bin/env python3
"""The README is a door, not the manual (issue 46): checks, from the
repository root given as the one argument (default: this file's
../..), that

  - README.md has at most 300 lines;
  - every relative link of README.md and docs/**/*.md resolves to a file or
    directory of the checkout, and a `#anchor` on a Markdown page to one of
    its headings (GitHub's anchors: lower case, punctuation dropped, spaces
    to hyphens);
  - README.md links every page under docs/ (its docs index and its table of
    verbs);
  - every page that writes a `--budget` share (`N%gpu`, `80%peak`) says what
    the two mean in the same sentence (docs/cli/plan.md, "Budgets").

Plain python3, no third-party module; one line per problem, exit 1 if any.
"""
import os
import re
import sys

MAX_README_LINES = 300
BUDGET_SENTENCE = ("`N%gpu` is N% of the GPU profile's device memory and `N%peak` is N% of "
                   "the keep-all plan's peak; a bare `N%` is refused as ambiguous")

LINK = re.compile(r"(?<!\!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"\!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


def strip_code(text):
    """`text` without fenced code blocks and inline code spans (links there are
    not links), keeping line count."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return "\n".join(out)


def anchors(text):
    """GitHub's anchors of a page's headings."""
    found, seen = set(), {}
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    # Explicit anchors: <a name="x"> or id="x".
    found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return found


def markdown_pages(root):
    pages = ["README.md"]
    for folder, _, files in os.walk(os.path.join(root, "docs")):
        for name in files:
            if name.endswith(".md"):
                pages.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(pages)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    problems = []
    readme = os.path.join(root, "README.md")
    with open(readme, encoding="utf-8") as f:
        lines = f.read().count("\n")
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines, more than {MAX_README_LINES}: move the "
                        f"detail to docs/ (docs/cli/<verb>.md for a verb)")

    pages = markdown_pages(root)
    texts = {}
    for page in pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            texts[page] = f.read()
    anchor_cache = {}
    linked_from_readme = set()
    links = 0
    for page in pages:
        text = texts[page]
        plain = strip_code(text)
        targets = []
        for pattern in (LINK, IMAGE, REFERENCE):
            for m in pattern.finditer(plain):
                targets.append((plain.count("\n", 0, m.start()) + 1, m.group(1)))
        for line, target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto:, ...
                continue
            links += 1
            path, _, anchor = target.partition("#")
            here = os.path.dirname(os.path.join(root, page))
            resolved = os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, page)
            where = f"{page}:{line}: link {target}"
            if not os.path.exists(resolved):
                problems.append(f"{where}: no such file {os.path.relpath(resolved, root)}")
                continue
            rel = os.path.relpath(resolved, root)
            if page == "README.md":
                linked_from_readme.add(rel)
            if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                if rel not in anchor_cache:
                    with open(resolved, encoding="utf-8") as f:
                        anchor_cache[rel] = anchors(f.read())
                if anchor not in anchor_cache[rel]:
                    problems.append(f"{where}: {rel} has no heading with the anchor #{anchor}")

    for page in pages:
        if page != "README.md" and page not in linked_from_readme:
            problems.append(f"README.md: no link to {page} (its docs index or table of verbs)")

    sentence = re.sub(r"\s+", " ", BUDGET_SENTENCE)
    for page in pages:
        flat = re.sub(r"\s+", " ", texts[page])
        if re.search(r"(?<![\w%])(?:\d+|N)%(?:gpu|peak)\b", flat) and sentence not in flat:
            problems.append(f"{page}: writes a --budget share (N%gpu or N%peak) without the "
                            f"sentence that says what they mean: \"{BUDGET_SENTENCE}\" "
                            f"(docs/cli/plan.md, \"Budgets\")")

    for problem in problems:
        print(problem)
    print(f"check_docs: README.md {lines} lines; {len(pages)} pages, {links} relative links; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
