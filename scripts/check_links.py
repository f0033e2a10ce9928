#!/usr/bin/env python3
"""Checks every link of the guide (docs/src, an mdBook) and of README.md, offline.

Usage: scripts/check_links.py BOOK_DIR   (BOOK_DIR: the built book, target/book)

In the Markdown sources (README.md and every page under docs/src):
- a relative link or image resolves to a file or folder of the repository, from the page's own
  folder, without leaving the repository;
- a `#anchor` (alone, or after a page) names a heading or id of that page: for a book page the
  ids mdbook gave it in BOOK_DIR, for any other Markdown file the ids GitHub and mdbook derive
  from its headings; an anchor on anything but a Markdown page is an error;
- an external link is a well-formed http(s) address (it is not fetched: the check is offline);
  any other scheme is an error.
In the built book, every relative href and src of every page resolves the same way: inside the
book, or through the page's source folder into the repository (mdbook rewrites links to `.md`
files into `.html`, so a link to a Markdown file outside the book breaks there and is caught).
The book's pages are exactly those SUMMARY.md lists, and each is included by src/lib.rs under
cfg(doctest), so its Rust snippets are compiled and run with the crate's doctests.

Code spans and fenced code blocks are not read for links. Prints every problem with its file
and line, and exits 1 if there is any.
"""

import html.parser
import os
import re
import sys
import urllib.parse

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
BOOK_SRC = os.path.join(ROOT, "docs", "src")
SHIM = os.path.join(ROOT, "src", "lib.rs")

problems = []


def problem(path, line, text):
    problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {text}")


def prose_lines(text, blank_code=True):
    """(line number, line) for the lines outside fenced code blocks, code spans blanked."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        opener = re.match(r"(`{3,}|~{3,})", stripped)
        if fence is None and opener:
            fence = opener.group(1)
            continue
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip() == fence[0] * len(stripped.strip()):
                fence = None
            continue
        if blank_code:
            line = re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)
        yield number, line


# [text](target "title"), ![alt](target); the target may hold one level of parentheses.
INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))*)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^>\s]*)>")
HTML_ATTRIBUTE = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"")


def markdown_links(path):
    with open(path, encoding="utf-8") as file:
        text = file.read()
    # A link may wrap onto the next line: each line is read joined to the next, and a link is
    # reported on the line it starts on.
    lines = list(prose_lines(text))
    for index, (number, line) in enumerate(lines):
        joined = line
        if index + 1 < len(lines) and lines[index + 1][0] == number + 1:
            joined = line + " " + lines[index + 1][1]
        for pattern in (INLINE, AUTOLINK, HTML_ATTRIBUTE):
            for match in pattern.finditer(joined):
                if match.start() < len(line):
                    yield number, match.group(1)
        match = DEFINITION.match(line)
        if match:
            yield number, match.group(1)


def heading_id(text):
    """mdbook's id for a heading's text (GitHub's differs only in cases this guide avoids)."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[*_]{1,3}([^*_]+)[*_]{1,3}", r"\1", text)
    return "".join(
        c if c.isalnum() or c in "_-" else "-" if c.isspace() else ""
        for c in text.strip().lower()
    )


def markdown_ids(path):
    """The ids GitHub and mdbook give a Markdown file's headings, and its explicit ids."""
    ids = set()
    with open(path, encoding="utf-8") as file:
        text = file.read()
    for _, line in prose_lines(text, blank_code=False):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = heading_id(heading.group(1))
            candidate, counter = base, 0
            while candidate in ids:
                counter += 1
                candidate = f"{base}-{counter}"
            ids.add(candidate)
        ids.update(re.findall(r"\bid=\"([^\"]+)\"", line))
    return ids


class PageReader(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attributes):
        for name, value in attributes:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.links.append((self.getpos()[0], value))


def read_page(path):
    reader = PageReader()
    with open(path, encoding="utf-8") as file:
        reader.feed(file.read())
    return reader


def book_pages():
    """The chapters SUMMARY.md lists, as paths relative to docs/src."""
    summary = os.path.join(BOOK_SRC, "SUMMARY.md")
    pages = []
    for number, target in markdown_links(summary):
        page = urllib.parse.unquote(target.split("#")[0])
        if not page.endswith(".md"):
            problem(summary, number, f"'{target}' is not a chapter (a .md page)")
            continue
        pages.append(os.path.normpath(page))
    return pages


html_ids_cache = {}


def ids_of(target, book_dir, pages):
    """The anchors a Markdown file offers: the built page's ids for a book chapter."""
    if target not in html_ids_cache:
        source = os.path.relpath(target, BOOK_SRC)
        if not source.startswith("..") and source in pages:
            built = os.path.join(book_dir, source[: -len(".md")] + ".html")
            html_ids_cache[target] = read_page(built).ids if os.path.isfile(built) else set()
        else:
            html_ids_cache[target] = markdown_ids(target)
    return html_ids_cache[target]


def check_external(path, line, target):
    parsed = urllib.parse.urlsplit(target)
    if parsed.scheme not in ("http", "https"):
        problem(path, line, f"'{target}': only http(s) links may leave the repository")
    elif not re.fullmatch(r"[A-Za-z0-9.-]+(:[0-9]+)?", parsed.netloc or "") or "." not in parsed.netloc:
        problem(path, line, f"'{target}': not a well-formed address (host '{parsed.netloc}')")
    elif re.search(r"[\s<>\"{}|\\^`]", target):
        problem(path, line, f"'{target}': characters an address cannot hold")


def check_relative(path, line, target, base_dir, book_dir, pages):
    """A relative target from a page whose folder (in the repository) is base_dir."""
    page_part, _, anchor = target.partition("#")
    page_part = urllib.parse.unquote(page_part.split("?")[0])
    resolved = os.path.normpath(os.path.join(base_dir, page_part)) if page_part else path
    if page_part.startswith("/"):
        problem(path, line, f"'{target}': an absolute path; links are relative to the page")
        return
    if os.path.commonpath([ROOT, resolved]) != ROOT:
        problem(path, line, f"'{target}' leaves the repository")
        return
    if not os.path.exists(resolved):
        problem(path, line, f"'{target}': {os.path.relpath(resolved, ROOT)} does not exist")
        return
    if anchor:
        if not resolved.endswith(".md"):
            problem(path, line, f"'{target}': an anchor into a file that is not a Markdown page")
        elif urllib.parse.unquote(anchor) not in ids_of(resolved, book_dir, pages):
            problem(path, line, f"'{target}': no heading or id '{anchor}' in {os.path.relpath(resolved, ROOT)}")


def check_markdown(path, book_dir, pages):
    for line, target in markdown_links(path):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
            check_external(path, line, target)
        else:
            check_relative(path, line, target, os.path.dirname(path), book_dir, pages)


def check_built(book_dir, pages):
    """Every relative href and src of the built chapters, and their anchors."""
    for page in pages:
        built = os.path.join(book_dir, page[: -len(".md")] + ".html")
        if not os.path.isfile(built):
            problem(os.path.join(BOOK_SRC, page), 1, f"mdbook built no {os.path.relpath(built, ROOT)}")
            continue
        reader = read_page(built)
        for line, target in reader.links:
            if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
                continue
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part.split("?")[0])
            where = f"{os.path.relpath(built, ROOT)}:{line}"
            if path_part.startswith("/"):
                problems.append(f"{where}: '{target}': an absolute path")
                continue
            inside = os.path.normpath(os.path.join(os.path.dirname(built), path_part)) if path_part else built
            if os.path.commonpath([os.path.realpath(book_dir), os.path.realpath(inside)]) == os.path.realpath(book_dir):
                resolved = inside
            else:
                # Out of the book: where the same link leads from the page's source folder.
                resolved = os.path.normpath(os.path.join(BOOK_SRC, os.path.dirname(page), path_part))
            if not os.path.exists(resolved):
                problems.append(f"{where}: '{target}' leads nowhere in the built book ({os.path.relpath(resolved, ROOT)})")
            elif anchor and resolved.endswith(".html"):
                if urllib.parse.unquote(anchor) not in read_page(resolved).ids:
                    problems.append(f"{where}: '{target}': no id '{anchor}' on that page")


def check_pages(pages):
    """Every page under docs/src is a chapter, and every chapter is a doctest."""
    on_disk = {
        os.path.relpath(os.path.join(folder, name), BOOK_SRC)
        for folder, _, names in os.walk(BOOK_SRC)
        for name in names
        if name.endswith(".md")
    } - {"SUMMARY.md"}
    for page in sorted(on_disk - set(pages)):
        problem(os.path.join(BOOK_SRC, page), 1, "not in SUMMARY.md, so not in the book")
    with open(SHIM, encoding="utf-8") as file:
        included = set(re.findall(r'include_str!\("\.\./docs/src/([^"]+)"\)', file.read()))
    for page in pages:
        if page not in included:
            problem(SHIM, 1, f"docs/src/{page} is not included under cfg(doctest): its Rust snippets go untested")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/check_links.py BOOK_DIR")
    book_dir = os.path.realpath(sys.argv[1])
    if not os.path.isfile(os.path.join(book_dir, "index.html")):
        sys.exit(f"check_links: {book_dir} holds no built book (index.html)")
    pages = book_pages()
    check_pages(pages)
    sources = [os.path.join(ROOT, "README.md"), os.path.join(BOOK_SRC, "SUMMARY.md")]
    sources += [os.path.join(BOOK_SRC, page) for page in pages]
    links = 0
    for source in sources:
        if os.path.isfile(source):
            links += sum(1 for _ in markdown_links(source))
            check_markdown(source, book_dir, pages)
    check_built(book_dir, pages)
    if problems:
        print("\n".join(dict.fromkeys(problems)), file=sys.stderr)
        sys.exit(f"check_links: {len(set(problems))} broken or malformed links")
    print(f"check_links: {links} links in {len(sources)} pages and the built book: all resolve")


if __name__ == "__main__":
    main()
