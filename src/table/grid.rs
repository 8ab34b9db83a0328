//! Text, Markdown and CSV grids: the one renderer of aligned columns that the tables and the
//! command line use, and the escaping of cells.

use std::fmt;

/// The most characters a cell of a text table or tree shows. A longer cell (a 100 KB scope
/// name, a call tree thousands of levels deep) keeps its first and last characters around an
/// ellipsis, so that marks at its end (`*`, `(poll)`) stay visible; exports keep every name
/// whole.
pub const MAX_CELL_CHARS: usize = 80;

/// `cell` as a text table shows it: its control characters escaped, whole when it then has at
/// most `max` characters, else its first and last characters around `…`, `max` characters in
/// all.
pub(crate) fn shorten(cell: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // Control characters (a newline, a carriage return, an escape sequence) would break the
    // grid or drive the terminal: they show escaped (`\n`, `\u{1b}`).
    if cell.chars().any(char::is_control) {
        let escaped: String = cell
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        return std::borrow::Cow::Owned(shorten(&escaped, max).into_owned());
    }
    let count = cell.chars().count();
    if count <= max {
        return std::borrow::Cow::Borrowed(cell);
    }
    let keep = max.saturating_sub(1);
    let tail = keep / 2;
    let head = keep - tail;
    let mut out: String = cell.chars().take(head).collect();
    out.push('…');
    out.extend(cell.chars().skip(count - tail));
    std::borrow::Cow::Owned(out)
}

/// Writes `rows` under `headers` and a rule of `-` as wide as the columns: the first `left`
/// columns aligned left, the others right, two spaces apart, no space at the end of a line.
/// Cells longer than [`MAX_CELL_CHARS`] are [shortened](shorten). Padding is written out, not
/// passed to `format!` as a width, so no width can make it fail.
pub(super) fn write_grid(
    f: &mut dyn fmt::Write,
    headers: &[&str],
    rows: &[Vec<String>],
    left: usize,
) -> fmt::Result {
    let headers: Vec<String> = headers.iter().map(|&h| h.to_owned()).collect();
    let widths = widths(std::iter::once(&headers).chain(rows));
    line(f, &headers, &widths, left)?;
    let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    f.write_str(&"-".repeat(total))?;
    f.write_char('\n')?;
    for row in rows {
        line(f, row, &widths, left)?;
    }
    Ok(())
}

/// `rows` under `headers` as [`grid`] writes them, for the command line's tables (`diff`).
#[doc(hidden)]
pub fn grid_text(headers: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut out = String::new();
    // Writing to a `String` cannot fail.
    let _ = write_grid(&mut out, headers, rows, left);
    out
}

/// The width of each column: its longest cell, shortened.
fn widths<'a>(rows: impl Iterator<Item = &'a Vec<String>>) -> Vec<usize> {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        if widths.len() < row.len() {
            widths.resize(row.len(), 0);
        }
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(shorten(cell, MAX_CELL_CHARS).chars().count());
        }
    }
    widths
}

/// One line of a grid.
fn line(f: &mut dyn fmt::Write, cells: &[String], widths: &[usize], left: usize) -> fmt::Result {
    let mut text = String::new();
    for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            text.push_str("  ");
        }
        let cell = shorten(cell, MAX_CELL_CHARS);
        let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
        if i < left {
            text.push_str(&cell);
            text.push_str(&pad);
        } else {
            text.push_str(&pad);
            text.push_str(&cell);
        }
    }
    f.write_str(text.trim_end())?;
    f.write_char('\n')
}

/// `rows` under `headers` as a GitHub-flavoured Markdown table: the first `left` columns
/// aligned left, the others right; cells shortened as in the text table ([`MAX_CELL_CHARS`],
/// control characters escaped), `|` and `\` escaped.
#[doc(hidden)] // the command line's; not public API
pub fn markdown_grid(headers: &[&str], rows: &[Vec<String>], left: usize) -> String {
    // Shortened and with control characters escaped, as in the text table.
    let cell = |c: &str| {
        shorten(c, MAX_CELL_CHARS)
            .replace('\\', "\\\\")
            .replace('|', "\\|")
    };
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = String>| {
        out.push('|');
        for c in cells {
            out.push(' ');
            out.push_str(&c);
            out.push_str(" |");
        }
        out.push('\n');
    };
    line(&mut out, &mut headers.iter().map(|h| cell(h)));
    line(
        &mut out,
        &mut (0..headers.len()).map(|i| if i < left { ":--" } else { "--:" }.to_owned()),
    );
    for row in rows {
        line(&mut out, &mut row.iter().map(|c| cell(c)));
    }
    out
}

/// One CSV record (RFC 4180): fields with a comma, a quote or a line break quoted, quotes
/// doubled; ended by `\n`.
#[doc(hidden)] // the command line's; not public API
pub fn csv_record<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let field = field.as_ref();
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
    out.push('\n');
    out
}

/// `s` as a JSON string, quotes included.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
