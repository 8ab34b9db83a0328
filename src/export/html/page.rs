//! The page: its head, style and script around the two data blocks.

use std::io::{self, Write};

use crate::trace::Trace;

use super::encode::{base64, escape_html, script_safe};
use super::json::data;
use super::names::Names;
use super::options::Options;

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// The page's title: the options' own, else "tickscope report".
pub(super) fn title(options: &Options) -> &str {
    if options.title.is_empty() {
        "tickscope report"
    } else {
        options.title.as_str()
    }
}

/// Writes the report of `trace` as one HTML page into `out`.
pub fn write(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    let title = title(options);
    let mut names = Names::default();
    let (meta, blob) = data(trace, options, title, &mut names);
    page(out, title, &meta, &blob)
}

/// The page of title `title` around the JSON block `meta` and the binary block `blob`.
pub(super) fn page(
    out: &mut (impl Write + ?Sized),
    title: &str,
    meta: &str,
    blob: &[u8],
) -> io::Result<()> {
    out.write_all(b"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")?;
    // No request of any kind: only the inline style and script run, images only from data.
    out.write_all(
        b"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
          script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n\
          <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
          <meta name=\"color-scheme\" content=\"light dark\">\n",
    )?;
    writeln!(out, "<title>{}</title>", escape_html(title))?;
    writeln!(out, "<style>\n{STYLE}</style>\n</head>\n<body>")?;
    out.write_all(
        b"<noscript>This report is drawn by JavaScript: allow scripts for this file.</noscript>\n\
          <div id=\"app\"><p id=\"loading\">Loading the report\xE2\x80\xA6</p></div>\n",
    )?;
    out.write_all(b"<script type=\"application/json\" id=\"ts-meta\">")?;
    out.write_all(script_safe(meta).as_bytes())?;
    out.write_all(b"</script>\n<script type=\"application/octet-stream\" id=\"ts-blob\">")?;
    base64(blob, out)?;
    out.write_all(b"</script>\n<script>\n")?;
    out.write_all(SCRIPT.as_bytes())?;
    out.write_all(b"</script>\n</body>\n</html>\n")
}
