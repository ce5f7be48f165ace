#!/usr/bin/env python3
"""Checks that every relative Markdown link in the repository's documentation resolves.

Scans README.md, docs/**/*.md and bench/**/*.md (tracked files only, so a removed file's link
fails here rather than on a reader's screen). A link resolves when the file or folder it names,
relative to the Markdown file, is tracked in git (or is a folder holding tracked files); a
`#fragment` on a Markdown target must match one of its headings' GitHub anchors. External links
(`http:`, `https:`, `mailto:`) are not fetched. Exits 1 and lists each broken link as
`file:line: target (why)`.

    python3 scripts/check-links.py            # the default set
    python3 scripts/check-links.py FILE.md…   # only these files
"""
import os
import re
import subprocess
import sys
from urllib.parse import unquote

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# [text](target) and [text](target "title"); images too. Reference definitions: [id]: target
INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode()
    files = {f for f in out.split("\0") if f}
    dirs = set()
    for f in files:
        d = os.path.dirname(f)
        while d and d not in dirs:
            dirs.add(d)
            d = os.path.dirname(d)
    return files, dirs


def default_set(files):
    return sorted(f for f in files if f.endswith(".md") and (
        f == "README.md" or f.startswith("docs/") or f.startswith("bench/")))


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = None if in_fence else re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                a = anchor(m.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.add(a if n == 0 else f"{a}-{n}")
    return out


def links(path):
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            # inline code spans are not links
            text = re.sub(r"`[^`]*`", "", line)
            for m in INLINE.finditer(text):
                yield no, m.group(1)
            m = REFDEF.match(text)
            if m:
                yield no, m.group(1)


def check(md, files, dirs):
    errors = []
    base = os.path.dirname(md)
    for no, target in links(os.path.join(ROOT, md)):
        if EXTERNAL.match(target) or target.startswith("//"):
            continue
        path, _, frag = target.partition("#")
        path = unquote(path)
        if path == "":
            resolved = md
        elif path.startswith("/"):
            resolved = os.path.normpath(path.lstrip("/"))
        else:
            resolved = os.path.normpath(os.path.join(base, path))
        resolved = resolved.replace(os.sep, "/")
        if resolved.startswith(".."):
            errors.append(f"{md}:{no}: {target} (leaves the repository)")
        elif resolved not in files and resolved not in dirs and resolved != ".":
            errors.append(f"{md}:{no}: {target} (no such tracked file or folder)")
        elif frag and resolved.endswith(".md") and resolved in files:
            if frag.lower() not in anchors(os.path.join(ROOT, resolved)):
                errors.append(f"{md}:{no}: {target} (no heading #{frag})")
    return errors


def main(argv):
    files, dirs = tracked_files()
    mds = [os.path.relpath(os.path.abspath(a), ROOT) for a in argv] or default_set(files)
    errors = [e for md in mds for e in check(md, files, dirs)]
    for e in errors:
        print(e)
    print(f"check-links: {len(mds)} files, {len(errors)} broken links", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
