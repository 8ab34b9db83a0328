//! Text, Markdown and CSV grids: the one renderer of aligned columns that the tables and the
//! command line use, and the escaping of cells.

use std::borrow::Cow;
use std::fmt;

/// The most characters a cell of a text table or tree shows. A longer cell (a 100 KB scope
/// name, a call tree thousands of levels deep) keeps its first and last characters around an
/// ellipsis, so that marks at its end (`*`, `(poll)`) stay visible; exports keep every name
/// whole.
pub const MAX_CELL_CHARS: usize = 80;

/// `cell` as a text table shows it: its control characters escaped, whole when it then has at
/// most `max` characters, else its first and last characters around `…`, `max` characters in
/// all.
pub(crate) fn shorten(cell: &str, max: usize) -> Cow<'_, str> {
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
        return Cow::Owned(shorten(&escaped, max).into_owned());
    }
    let count = cell.chars().count();
    if count <= max {
        return Cow::Borrowed(cell);
    }
    let keep = max.saturating_sub(1);
    let tail = keep / 2;
    let head = keep - tail;
    let mut out: String = cell.chars().take(head).collect();
    out.push('…');
    out.extend(cell.chars().skip(count - tail));
    Cow::Owned(out)
}

/// How a column of a [`Grid`] aligns its cells.
#[doc(hidden)] // the command line's; not public API
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right: names and labels.
    Left,
    /// Padded on the left: numbers.
    Right,
}

/// The layout of one column of a [`Grid`].
#[derive(Clone, Copy, Debug)]
struct Column {
    align: Align,
    /// The least width, in characters.
    min: usize,
    /// What separates the column from the one before it.
    gap: &'static str,
}

impl Default for Column {
    fn default() -> Self {
        Self {
            align: Align::Right,
            min: 0,
            gap: "  ",
        }
    }
}

/// Aligned columns of text: the one renderer of the text grids of the library's tables (flat
/// and tree, counters, values, memory live at stop) and of the command line (`diff`, `info`,
/// `ps`).
///
/// A grid writes its headers, when it has some, and a rule of `-` under them as wide as the
/// lines; then a line per row. Each column is as wide as its widest cell (at least its
/// [minimum](Grid::min_width)); cells are padded to it on the right ([`Align::Left`]) or on
/// the left ([`Align::Right`]); columns are two spaces apart unless [`Grid::gap`] says
/// otherwise. No line ends in padding. Cells longer than [`MAX_CELL_CHARS`] are
/// [shortened](shorten) and control characters escaped, unless [`Grid::whole_cells`].
/// Padding is written out, not passed to `format!` as a width, so no width can make it fail.
#[doc(hidden)] // the command line's; not public API
#[must_use]
#[derive(Clone, Debug)]
pub struct Grid {
    /// The columns with a layout of their own; the others are [`Column::default`].
    columns: Vec<Column>,
    /// Written before every line.
    indent: &'static str,
    /// A rule under the headers.
    rule: bool,
    /// Cells written as they are, not shortened.
    whole: bool,
    /// A row shorter than the headers has a last cell that spans the columns left.
    spans: bool,
}

impl Grid {
    /// A grid whose first `left` columns align left and the others right, two spaces apart,
    /// with a rule under the headers.
    pub fn new(left: usize) -> Self {
        let aligned_left = Column {
            align: Align::Left,
            ..Column::default()
        };
        Self {
            columns: vec![aligned_left; left],
            indent: "",
            rule: true,
            whole: false,
            spans: false,
        }
    }

    fn column_mut(&mut self, column: usize) -> &mut Column {
        if self.columns.len() <= column {
            self.columns.resize(column + 1, Column::default());
        }
        &mut self.columns[column]
    }

    fn column(&self, column: usize) -> Column {
        self.columns.get(column).copied().unwrap_or_default()
    }

    /// Aligns `column` (0 is the first) as `align` says.
    pub fn align(mut self, column: usize, align: Align) -> Self {
        self.column_mut(column).align = align;
        self
    }

    /// Makes `column` at least `width` characters wide, even with no cell that long.
    pub fn min_width(mut self, column: usize, width: usize) -> Self {
        self.column_mut(column).min = width;
        self
    }

    /// Separates `column` from the one before it by `gap` instead of two spaces.
    pub fn gap(mut self, column: usize, gap: &'static str) -> Self {
        self.column_mut(column).gap = gap;
        self
    }

    /// Writes `indent` before every line.
    pub fn indent(mut self, indent: &'static str) -> Self {
        self.indent = indent;
        self
    }

    /// Writes no rule under the headers.
    pub fn no_rule(mut self) -> Self {
        self.rule = false;
        self
    }

    /// Writes every cell as it is: not shortened, control characters not escaped.
    pub fn whole_cells(mut self) -> Self {
        self.whole = true;
        self
    }

    /// Lets the last cell of a row shorter than the headers span the columns left: it is
    /// written as it is after the columns before it, and widens no column (`ps`'s line for a
    /// program that did not answer: its pid, then the error).
    pub fn spanning_last_cells(mut self) -> Self {
        self.spans = true;
        self
    }

    /// `rows` under `headers` (none when `headers` is empty) as [`Grid::write`] writes them.
    pub fn text(&self, headers: &[&str], rows: &[Vec<String>]) -> String {
        let mut out = String::new();
        // Writing to a `String` cannot fail.
        let _ = self.write(&mut out, headers, rows);
        out
    }

    /// Writes `rows` under `headers` (none when `headers` is empty) to `f`.
    pub fn write(
        &self,
        f: &mut dyn fmt::Write,
        headers: &[&str],
        rows: &[Vec<String>],
    ) -> fmt::Result {
        let columns = rows.iter().map(Vec::len).fold(headers.len(), usize::max);
        let widths = self.widths(columns, headers, rows);
        if !headers.is_empty() {
            self.line(f, headers, &widths, false)?;
            if self.rule {
                let gaps: usize = (1..widths.len())
                    .map(|i| self.column(i).gap.chars().count())
                    .sum();
                f.write_str(self.indent)?;
                f.write_str(&"-".repeat(widths.iter().sum::<usize>() + gaps))?;
                f.write_char('\n')?;
            }
        }
        for row in rows {
            self.line(f, row, &widths, self.spans && row.len() < headers.len())?;
        }
        Ok(())
    }

    /// `cell` as the grid shows it.
    fn cell<'c>(&self, cell: &'c str) -> Cow<'c, str> {
        if self.whole {
            Cow::Borrowed(cell)
        } else {
            shorten(cell, MAX_CELL_CHARS)
        }
    }

    /// The width of each of `columns` columns: its minimum or its longest cell as shown.
    fn widths(&self, columns: usize, headers: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
        let mut widths: Vec<usize> = (0..columns).map(|i| self.column(i).min).collect();
        let mut widen = |cells: &mut dyn Iterator<Item = &str>| {
            for (width, cell) in widths.iter_mut().zip(cells) {
                *width = (*width).max(self.cell(cell).chars().count());
            }
        };
        widen(&mut headers.iter().copied());
        for row in rows {
            let spanning = self.spans && row.len() < headers.len();
            let counted = row.len() - usize::from(spanning && !row.is_empty());
            widen(&mut row[..counted].iter().map(String::as_str));
        }
        widths
    }

    /// One line; with `spanning`, its last cell spans the columns left.
    fn line<S: AsRef<str>>(
        &self,
        f: &mut dyn fmt::Write,
        cells: &[S],
        widths: &[usize],
        spanning: bool,
    ) -> fmt::Result {
        let mut text = self.indent.to_owned();
        // The end of the last cell that is not empty: no line ends in padding.
        let mut end = 0;
        for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
            let column = self.column(i);
            if i > 0 {
                text.push_str(column.gap);
            }
            let cell = self.cell(cell.as_ref());
            let pad = if spanning && i + 1 == cells.len() {
                0
            } else {
                width.saturating_sub(cell.chars().count())
            };
            if column.align == Align::Right {
                text.extend(std::iter::repeat_n(' ', pad));
            }
            text.push_str(&cell);
            if !cell.is_empty() {
                end = text.len();
            }
            if column.align == Align::Left {
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.truncate(end);
        f.write_str(&text)?;
        f.write_char('\n')
    }
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
