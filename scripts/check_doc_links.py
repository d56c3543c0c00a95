#!/usr/bin/env python3
"""Every reference into the docs resolves.

Two kinds of reference are checked, in README.md, docs/*.md and every source,
script and CMake file of the tree:

  [text](page.md#anchor)          a Markdown link: the page exists (relative
                                  to the file that links) and, with an anchor,
                                  one of its headings has that GitHub anchor
  docs/page.md, "Section name"    a section named in prose or a comment: the
                                  page has a heading, a bold run-in name, a
                                  list item's lead or a table row's first
                                  cell that starts with that text (a short
                                  name: "Architecture" for "Architecture:
                                  folders are layers, and layers point down")

Usage: check_doc_links.py SOURCE_DIR. Prints one line per broken reference
(file:line: what is wrong) and exits 1 if there is any, else 0.
"""
import os
import re
import sys

SKIP_DIRS = {".git", "build", "shared"}
SOURCE_EXTS = (".md", ".h", ".cc", ".c", ".py", ".sh", ".txt", ".in", ".cmake")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+\.md)(#[^)\s]*)?\)")
# A page named, then a quoted section: `docs/x.md, "Name"` or `x.md "Name"`.
# Comment markers between lines are taken out first, so a name may wrap.
SECTION = re.compile(r"\b((?:docs/)?[a-z][a-z0-9_-]*\.md),?\s+\"([^\"]+)\"")
COMMENT_BREAK = re.compile(r"\s*\n\s*(?://+|#+(?!#)|\*)?\s*")


def anchor(heading):
    """GitHub's anchor for a heading's text."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    """(labels, anchors) of path, outside code fences. Labels are what a
    section may be named by: headings, bold run-in names (**Failing
    together.**), list items' leads (- Who may come in: ...) and a table
    row's first cell (| `--dry-run` | ...); anchors are the headings'."""
    labels, anchors, seen, fenced = set(), set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            labels.update(m.group(1) for m in re.finditer(r"\*\*([^*]+)\*\*", line))
            m = re.match(r"\s*[-*] ([^:]+):", line)
            if m:
                labels.add(m.group(1).strip())
            m = re.match(r"\|([^|]+)\|", line)
            if m:
                labels.update(c.strip(" `") for c in m.group(1).split(","))
            m = re.match(r"#{1,6} (.*)", line)
            if not m:
                continue
            text = m.group(1).strip()
            labels.add(text)
            a = anchor(text)
            n = seen.get(a, 0)
            seen[a] = n + 1
            anchors.add(a if n == 0 else f"{a}-{n}")
    return labels, anchors


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build"))
        for name in sorted(files):
            if name.endswith(SOURCE_EXTS):
                yield os.path.join(d, name)


def flatten(text):
    """text with each line break (and the comment marker after it) made one
    space, and [(position in that text, line number)] where each line starts."""
    out, lines, last, flat_len, n = [], [(0, 1)], 0, 0, 1
    for m in COMMENT_BREAK.finditer(text):
        out.append(text[last:m.start()])
        out.append(" ")
        flat_len += m.start() - last + 1
        last = m.end()
        n += m.group().count("\n")
        lines.append((flat_len, n))
    out.append(text[last:])
    return "".join(out), lines


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def resolve(root, referrer, page):
    """The file a reference to page means: relative to the referrer for a
    Markdown link, else docs/page or page under the root."""
    for base in (os.path.dirname(referrer), os.path.join(root, "docs"), root):
        p = os.path.normpath(os.path.join(base, page))
        if os.path.isfile(p):
            return p
    return None


def check_file(root, path, cache):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    rel = os.path.relpath(path, root)
    errors = []

    def target(page):
        p = resolve(root, path, page)
        if p and p not in cache:
            cache[p] = headings(p)
        return p

    if path.endswith(".md"):
        for m in LINK.finditer(text):
            page, frag = m.group(1), (m.group(2) or "")[1:]
            if "://" in page:
                continue
            p = os.path.normpath(os.path.join(os.path.dirname(path), page))
            if not os.path.isfile(p):
                errors.append(f"{rel}:{line_of(text, m.start())}: link to {page}: no such file")
            elif frag:
                cache.setdefault(p, headings(p))
                if frag not in cache[p][1]:
                    errors.append(f"{rel}:{line_of(text, m.start())}: link to {page}#{frag}: no such heading")
    flat, lines = flatten(text)
    for m in SECTION.finditer(flat):
        page, name = m.group(1), m.group(2)
        p = target(page)
        if p is None or any(h.startswith(name) for h in cache[p][0]):
            continue  # a page that is not one of the docs, or a section it has
        line = lines[sum(1 for pos, _ in lines if pos <= m.start()) - 1][1]
        errors.append(f"{rel}:{line}: {page} has no section \"{name}\"")
    return errors


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    cache, errors = {}, []
    for path in sources(root):
        errors += check_file(root, path, cache)
    for e in errors:
        print(e)
    if errors:
        print(f"check_doc_links: {len(errors)} broken reference(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
