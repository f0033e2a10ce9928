//! Cutting a scenario's TOML text at its top-level table headers, so that each table is
//! deserialized on its own.
//!
//! # Why
//!
//! The TOML library builds a document of the whole text before deserializing it, and that
//! document costs several kilobytes per table: a scenario of 10^5 operations and 10^5
//! semaphores needed over 500 MB of it, although the validated scenario takes a few tens of
//! megabytes. A scenario is a preamble of top-level keys and then a list of tables —
//! `[[queue]]`, `[[semaphore]]`, `[[op]]`, `[expect]` — each of which means the same read
//! alone as in the whole file. So the loader cuts the text into [`Segment`]s and hands each to
//! the TOML library separately; only one table's document exists at a time.
//!
//! # The lexer
//!
//! One pass over the bytes, in one of a few states: at the start of a line, in a key/value
//! line (counting open `[`/`{` brackets of array and inline-table values, which may span
//! lines), in a comment, or in one of TOML's four string forms (basic, literal and their
//! multi-line variants, with backslash escapes in the basic ones). A line that starts, outside
//! any value or string, with `[` is a table header; its keys are read to find the table's
//! root name. Every delimiter is ASCII, so stepping over UTF-8 continuation bytes one byte at a
//! time never misreads them.
//!
//! # When it declines
//!
//! Cutting is only sound where each piece means alone what it means in the whole. [`split`]
//! answers `None` — and the loader reads the whole document instead, as TOML's own rules
//! decide — whenever that is not certain or the text is not plain TOML:
//!
//! - a dotted header (`[op.work]`) whose root is not the table the current segment holds
//!   (it would extend a table of an earlier segment);
//! - a single-key table header (`[expect]`) whose name appeared in an earlier header, or an
//!   array header (`[[op]]`) whose name was earlier a plain table (TOML refuses both; the whole
//!   document reports them exactly);
//! - quoted keys in a header, anything after a header but a comment, an unterminated string or
//!   value, or a closing bracket with none open.
//!
//! The preamble's own keys are checked by the loader: a preamble that sets a table's field
//! inline (`op = [...]`) is also read as a whole document.

use std::collections::HashMap;

/// The top-level table a segment holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Table {
    /// The top-level keys before the first header.
    Preamble,
    /// A `[[queue]]`.
    Queue,
    /// A `[[semaphore]]`.
    Semaphore,
    /// An `[[op]]`.
    Op,
    /// The `[expect]` totals.
    Expect,
    /// Any other header: not part of the format, left to the deserializer to refuse.
    Other,
}

impl Table {
    fn named(root: &[u8]) -> Table {
        match root {
            b"queue" => Table::Queue,
            b"semaphore" => Table::Semaphore,
            b"op" => Table::Op,
            b"expect" => Table::Expect,
            _ => Table::Other,
        }
    }
}

/// A run of the source holding one top-level table (or the preamble): from the start of its
/// header's line to the start of the next header's line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Byte offset of its first line.
    pub start: usize,
    /// Byte offset just past its last line.
    pub end: usize,
    /// What it holds.
    pub table: Table,
}

/// How each root name has been used in headers so far.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HeaderUse {
    Table,
    Array,
}

/// The segments of `source`, in order, covering it exactly; the first is the preamble (empty
/// when the text starts with a header). `None` where cutting is not certain to keep the
/// meaning (see the [module documentation](self)).
pub(crate) fn split(source: &str) -> Option<Vec<Segment>> {
    let bytes = source.as_bytes();
    let mut segments = vec![Segment { start: 0, end: bytes.len(), table: Table::Preamble }];
    let mut current_root: Option<&[u8]> = None;
    let mut header_uses: HashMap<&[u8], HeaderUse> = HashMap::new();
    let mut at = 0;
    while at < bytes.len() {
        let line_start = at;
        at = skip_blanks(bytes, at);
        if bytes.get(at) == Some(&b'[') {
            let header = read_header(bytes, at)?;
            let root = header.keys[0];
            if header.keys.len() > 1 {
                if current_root != Some(root) {
                    return None;
                }
            } else {
                let this_use = if header.array { HeaderUse::Array } else { HeaderUse::Table };
                match header_uses.insert(root, this_use) {
                    Some(HeaderUse::Table) => return None,
                    Some(HeaderUse::Array) if this_use == HeaderUse::Table => return None,
                    _ => {}
                }
                if let Some(last) = segments.last_mut() {
                    last.end = line_start;
                }
                segments.push(Segment {
                    start: line_start,
                    end: bytes.len(),
                    table: Table::named(root),
                });
                current_root = Some(root);
            }
            at = header.line_end;
        } else {
            at = skip_line(bytes, at)?;
        }
    }
    Some(segments)
}

/// A table header's keys and where its line ends.
struct Header<'s> {
    array: bool,
    keys: Vec<&'s [u8]>,
    /// Offset just past the header line's newline (or the end of the source).
    line_end: usize,
}

/// Reads the header starting at the `[` at `at`: bare keys only, then only blanks and an
/// optional comment to the end of the line.
fn read_header(bytes: &[u8], at: usize) -> Option<Header<'_>> {
    let array = bytes.get(at + 1) == Some(&b'[');
    let mut at = at + if array { 2 } else { 1 };
    let mut keys = Vec::new();
    loop {
        at = skip_blanks(bytes, at);
        let key_start = at;
        while bytes.get(at).is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            at += 1;
        }
        if at == key_start {
            return None;
        }
        keys.push(&bytes[key_start..at]);
        at = skip_blanks(bytes, at);
        match bytes.get(at) {
            Some(b'.') => at += 1,
            Some(b']') => break,
            _ => return None,
        }
    }
    let closing: &[u8] = if array { b"]]" } else { b"]" };
    if !bytes[at..].starts_with(closing) {
        return None;
    }
    at = skip_blanks(bytes, at + closing.len());
    let line_end = match bytes.get(at) {
        None => at,
        Some(b'\n') => at + 1,
        Some(b'\r') if bytes.get(at + 1) == Some(&b'\n') => at + 2,
        Some(b'#') => skip_comment(bytes, at),
        Some(_) => return None,
    };
    Some(Header { array, keys, line_end })
}

/// Steps over a key/value line (or a blank or comment line) starting at `at`, including values
/// and strings that continue onto later lines; the offset just past its last newline.
fn skip_line(bytes: &[u8], mut at: usize) -> Option<usize> {
    let mut open_brackets = 0usize;
    while let Some(&byte) = bytes.get(at) {
        at = match byte {
            b'\n' if open_brackets == 0 => return Some(at + 1),
            b'#' => skip_comment_text(bytes, at),
            b'"' | b'\'' => skip_string(bytes, at)?,
            b'[' | b'{' => {
                open_brackets += 1;
                at + 1
            }
            b']' | b'}' => {
                open_brackets = open_brackets.checked_sub(1)?;
                at + 1
            }
            _ => at + 1,
        };
    }
    (open_brackets == 0).then_some(at)
}

/// Steps over the string whose opening quote is at `at`; the offset just past its closing
/// quote(s).
fn skip_string(bytes: &[u8], at: usize) -> Option<usize> {
    let quote = bytes[at];
    let escapes = quote == b'"';
    let triple = [quote; 3];
    if bytes[at..].starts_with(&triple) {
        let mut at = at + 3;
        loop {
            match bytes.get(at)? {
                b'\\' if escapes => at += 2,
                &b if b == quote && bytes[at..].starts_with(&triple) => {
                    // Up to two more quotes right before the closing three belong to the text.
                    let mut end = at + 3;
                    for _ in 0..2 {
                        if bytes.get(end) == Some(&quote) {
                            end += 1;
                        }
                    }
                    return Some(end);
                }
                _ => at += 1,
            }
        }
    }
    let mut at = at + 1;
    loop {
        match bytes.get(at)? {
            b'\\' if escapes => at += 2,
            b'\n' => return None,
            &b if b == quote => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// Steps over the comment starting at `at` and its newline.
fn skip_comment(bytes: &[u8], at: usize) -> usize {
    let end = skip_comment_text(bytes, at);
    if end < bytes.len() {
        end + 1
    } else {
        end
    }
}

/// Steps over the comment starting at `at`, stopping at its newline.
fn skip_comment_text(bytes: &[u8], at: usize) -> usize {
    bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |offset| at + offset)
}

fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t')) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(source: &str) -> Option<Vec<(Table, &str)>> {
        let segments = split(source)?;
        let mut covered = 0;
        for segment in &segments {
            assert_eq!(segment.start, covered, "segments cover the source in order");
            covered = segment.end;
        }
        assert_eq!(covered, source.len());
        Some(segments.iter().map(|s| (s.table, &source[s.start..s.end])).collect())
    }

    #[test]
    fn headers_start_segments_and_sub_tables_stay_in_theirs() {
        let source = "name = \"x\"\n[[queue]]\nname = \"q\"\n  [[op]] # first\nname = \"a\"\n\
                      [op.work]\nkind = \"noop\"\n[expect]\nelided = 0\n";
        assert_eq!(
            tables(source).unwrap(),
            [
                (Table::Preamble, "name = \"x\"\n"),
                (Table::Queue, "[[queue]]\nname = \"q\"\n"),
                (Table::Op, "  [[op]] # first\nname = \"a\"\n[op.work]\nkind = \"noop\"\n"),
                (Table::Expect, "[expect]\nelided = 0\n"),
            ]
        );
    }

    #[test]
    fn brackets_inside_values_strings_and_comments_are_not_headers() {
        let source = "[[op]]\nwait = [\n[\"a\", 'b]'],\n# [[op]]\n\"\"\"\n[[op]]\"\"\"\"\"\n]\n\
                      text = '''\n[[op]]\n'''\nkey = \"\\\"[[op]]\"\n[[op]]\n";
        let found = tables(source).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found[2], (Table::Op, "[[op]]\n"));
    }

    #[test]
    fn a_text_that_starts_with_a_header_has_an_empty_preamble() {
        assert_eq!(
            tables("[[queue]]\r\nname = \"q\"\r\n").unwrap(),
            [(Table::Preamble, ""), (Table::Queue, "[[queue]]\r\nname = \"q\"\r\n")]
        );
    }

    #[test]
    fn cutting_declines_where_a_piece_would_mean_something_else_alone() {
        for source in [
            "[[op]]\n[[queue]]\n[op.work]\n",
            "[expect]\n[[op]]\n[expect]\n",
            "[expect]\n[[expect]]\n",
            "[[op]]\n[op]\n",
            "[[\"op\"]]\n",
            "[[op]] x\n",
            "[[op\n",
            "[ [op]]\n",
            "a = [1\n",
            "a = ]\n",
            "a = \"open\n[[op]]\n",
            "a = '''open\n",
            "a = \"\"\"open\\\"\"\"\n",
        ] {
            assert_eq!(split(source), None, "{source:?}");
        }
    }

    #[test]
    fn repeated_array_headers_are_separate_segments() {
        let found = tables("[[op]]\n[op.work]\n[[op]]\n[[op.x]]\n").unwrap();
        assert_eq!(
            found,
            [
                (Table::Preamble, ""),
                (Table::Op, "[[op]]\n[op.work]\n"),
                (Table::Op, "[[op]]\n[[op.x]]\n")
            ]
        );
    }
}
