//! `tickscope convert`: a capture file to a trace viewer's format, chosen by the output's
//! extension and written atomically by [`tickscope::export::write_file`].

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tickscope::Capture;
use tickscope::export::chrome::{self, TimeOrigin};
#[cfg(feature = "otlp")]
use tickscope::export::otlp::{self, Otlp};
use tickscope::export::{
    Format, flamegraph, folded, html, kineto, perfetto, pprof, write_file_from_captures,
};
use tickscope::trace::Trace;

use crate::{Context, Failure, input, text};

/// Convert captures to Chrome JSON, Perfetto, pprof, flame graphs, OTLP.
///
/// The output's extension names the format: `.json` Chrome Trace
/// Event JSON (ui.perfetto.dev; Kineto's dialect with --kineto), `.folded` folded stacks,
/// `.svg` a flame graph, `.pb` a pprof profile (go tool pprof, Pyroscope, speedscope; usually
/// `.pb.gz`), `.pftrace` a native Perfetto trace (exact ns), `.html` the single-file report
/// that opens offline (as `tickscope report` writes it), `.otlp.json` OpenTelemetry traces
/// (one OTLP request per line, for the Collector's otlpjsonfile receiver; `tickscope push`
/// sends them over HTTP). Each may end in `.gz` to be gzipped. The output appears only when
/// complete; then convert says what it wrote (path, format, size) on stderr, unless --quiet.
///
/// Every session of every file goes into the one trace, lined up on Unix time: each process
/// under its own pid with its threads, so files of several processes or hosts (or a file of
/// several sessions, `cat a.tscope b.tscope > both.tscope`) make one timeline. --session
/// picks one session.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The output file: .json, .folded, .svg, .pb, .pftrace, .html, .otlp.json (each also
    /// with .gz).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// JSON in the PyTorch profiler's (Kineto's) dialect, for HolisticTraceAnalysis.
    #[arg(long)]
    kineto: bool,
    /// Chrome JSON timestamps from the Unix epoch instead of the session start, to line up
    /// traces of several processes.
    #[arg(long, conflicts_with = "kineto")]
    unix_time: bool,
    /// Folded stacks and flame graphs: one tower per thread.
    #[arg(long)]
    by_thread: bool,
    /// Only this session (1 is the first), counting the sessions of the files in order;
    /// by default every session.
    #[arg(long, value_name = "N")]
    session: Option<usize>,
}

/// The output formats, by extension (before an optional `.gz`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Json,
    Folded,
    Svg,
    Pprof,
    Perfetto,
    Otlp,
    Html,
}

const KNOWN: &str = ".json, .json.gz, .folded, .folded.gz, .svg, .svg.gz, .pb, .pb.gz, .pftrace, \
                     .pftrace.gz, .html, .html.gz, .otlp.json, .otlp.json.gz";

impl Kind {
    /// The format `path`'s extension names, `.gz` aside.
    fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".otlp.json") {
            return Some(Self::Otlp);
        }
        match Path::new(name).extension()?.to_str()? {
            "json" => Some(Self::Json),
            "folded" => Some(Self::Folded),
            "svg" => Some(Self::Svg),
            "pb" => Some(Self::Pprof),
            "pftrace" => Some(Self::Perfetto),
            "html" | "htm" => Some(Self::Html),
            _ => None,
        }
    }
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let out = &args.output;
    let Some(kind) = Kind::of(out) else {
        return Err(Failure::about(
            out,
            format!("unknown output extension; known: {KNOWN}"),
        ));
    };
    if kind != Kind::Json && (args.kineto || args.unix_time) {
        let flag = if args.kineto {
            "--kineto"
        } else {
            "--unix-time"
        };
        return Err(Failure::about(
            out,
            format!("{flag} applies to JSON output only (.json or .json.gz)"),
        ));
    }
    if matches!(
        kind,
        Kind::Json | Kind::Pprof | Kind::Perfetto | Kind::Otlp | Kind::Html
    ) && args.by_thread
    {
        return Err(Failure::about(
            out,
            "--by-thread applies to folded stacks and flame graphs only (.folded or .svg)",
        ));
    }
    #[cfg(not(feature = "otlp"))]
    if kind == Kind::Otlp {
        return Err(Failure::about(out, crate::push::WITHOUT_OTLP));
    }
    let progress = input::Progress::new(cx, args.files.iter().map(|f| input::size(f)).sum());
    let captures = input::captures(cx, &args.files, args.session, &progress)?;
    // Chrome JSON (Kineto's dialect too), Perfetto, OTLP/JSON and the HTML report read the
    // records twice (threads summed, then written piece by piece).
    let twice = matches!(kind, Kind::Json | Kind::Perfetto | Kind::Otlp | Kind::Html);
    input::decoding_twice(&progress, &args.files, &captures, twice);
    let captures: Vec<&Capture> = captures.iter().collect();
    let format: Box<dyn Format + '_> = match kind {
        Kind::Json if args.kineto => Box::new(kineto::Options::new(0, 1)),
        Kind::Json => {
            let origin = if args.unix_time {
                TimeOrigin::UnixEpoch
            } else {
                TimeOrigin::SessionStart
            };
            Box::new(chrome::Options::new().time_origin(origin))
        }
        Kind::Folded => Box::new(folded::Options::new().by_thread(args.by_thread)),
        Kind::Svg => Box::new(flamegraph::Options::new().by_thread(args.by_thread)),
        Kind::Pprof => Box::new(pprof::Options::new()),
        #[cfg(feature = "otlp")]
        Kind::Otlp => Box::new(OtlpJson(otlp::Options::new())),
        #[cfg(not(feature = "otlp"))]
        Kind::Otlp => return Err(Failure::about(out, crate::push::WITHOUT_OTLP)),
        Kind::Perfetto => Box::new(perfetto::Options::new()),
        Kind::Html => Box::new(html::Options::new()),
    };
    let counted = Counted {
        format: format.as_ref(),
        progress: &progress,
        path: out,
    };
    // Folded stacks, flame graphs and pprof are summed as the records are decoded; Chrome JSON
    // (Kineto's dialect too), Perfetto, OTLP/JSON and the HTML report are decoded and written
    // piece by piece where they can be.
    write_file_from_captures(&captures, out, &counted).map_err(|e| Failure::about(out, e))?;
    drop(progress);
    if !cx.quiet {
        let what = describe(kind, args.kineto, is_gz(out));
        text::wrote(out, &what);
    }
    Ok(ExitCode::SUCCESS)
}

/// True when `path` ends in `.gz`: the library gzips the output (the extension as written:
/// `.GZ` is not gzipped).
pub(crate) fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// What convert says it wrote: the format, and `gzipped` for `.gz`.
fn describe(kind: Kind, kineto: bool, gz: bool) -> String {
    let format = match kind {
        Kind::Json if kineto => "Kineto JSON (PyTorch profiler trace)",
        Kind::Json => "Chrome Trace Event JSON",
        Kind::Folded => "folded stacks",
        Kind::Svg => "flame graph SVG",
        Kind::Pprof => "pprof profile",
        Kind::Perfetto => "Perfetto trace",
        Kind::Otlp => "OTLP/JSON traces",
        Kind::Html => "HTML report",
    };
    if gz {
        format!("{format}, gzipped")
    } else {
        format.to_owned()
    }
}

/// The OTLP/JSON lines of [`Otlp::write_json_to`] as a [`Format`], so that they are written as
/// every other format is (atomically, gzipped for `.gz`, with the bytes counted); from the
/// captures, decoded piece by piece where they can be ([`Otlp::write_json_from_captures`]).
#[cfg(feature = "otlp")]
struct OtlpJson(otlp::Options);

#[cfg(feature = "otlp")]
impl Format for OtlpJson {
    fn write(&self, trace: &Trace, out: &mut dyn io::Write) -> io::Result<()> {
        Otlp::new(trace, &self.0).write_json_to(out)
    }

    fn write_captures(
        &self,
        captures: &[&Capture],
        out: &mut dyn io::Write,
    ) -> Option<io::Result<()>> {
        Some(Otlp::write_json_from_captures(captures, &self.0, out).map(drop))
    }
}

/// `format`, with the bytes it writes counted on `progress`.
struct Counted<'a> {
    format: &'a dyn Format,
    progress: &'a input::Progress,
    path: &'a Path,
}

impl Format for Counted<'_> {
    fn write(&self, trace: &Trace, out: &mut dyn io::Write) -> io::Result<()> {
        self.format
            .write(trace, &mut self.progress.writer(self.path, out))
    }

    fn write_captures(
        &self,
        captures: &[&Capture],
        out: &mut dyn io::Write,
    ) -> Option<io::Result<()>> {
        self.format
            .write_captures(captures, &mut self.progress.writer(self.path, out))
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, describe, is_gz};
    use std::path::Path;

    #[test]
    fn says_what_it_wrote() {
        assert_eq!(
            describe(Kind::Json, false, false),
            "Chrome Trace Event JSON"
        );
        assert_eq!(
            describe(Kind::Svg, false, is_gz(Path::new("t.svg.gz"))),
            "flame graph SVG, gzipped"
        );
        assert!(!is_gz(Path::new("t.json")));
        assert!(
            !is_gz(Path::new("t.JSON.GZ")),
            "as export::write_file reads it"
        );
    }

    #[test]
    fn kinds() {
        let kind = |p: &str| Kind::of(Path::new(p));
        assert_eq!(kind("a/t.json"), Some(Kind::Json));
        assert_eq!(kind("t.JSON.gz"), Some(Kind::Json));
        assert_eq!(kind("t.folded"), Some(Kind::Folded));
        assert_eq!(kind("t.svg.gz"), Some(Kind::Svg));
        assert_eq!(kind("cpu.pb.gz"), Some(Kind::Pprof));
        assert_eq!(kind("t.otlp.json"), Some(Kind::Otlp));
        assert_eq!(kind("T.OTLP.JSON.gz"), Some(Kind::Otlp));
        assert_eq!(kind("t.pftrace"), Some(Kind::Perfetto));
        assert_eq!(kind("t.PFTRACE.gz"), Some(Kind::Perfetto));
        assert_eq!(kind("run.html"), Some(Kind::Html));
        assert_eq!(kind("run.HTM.gz"), Some(Kind::Html));
        assert_eq!(kind("t.gz"), None);
        assert_eq!(kind("t.txt"), None);
        assert_eq!(kind("json"), None);
    }
}
