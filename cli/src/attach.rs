//! `tickscope ps` and `tickscope record --pid`: the programs that listen
//! ([`ProfilerBuilder::listen`](tickscope::ProfilerBuilder::listen)), and a capture of one of them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{Context, Failure};

/// List the running programs of this user that can be attached to
///
/// Those started with `listen(true)` or `TICKSCOPE_LISTEN=1`, and those with a TCP endpoint
/// (`listen_tcp`), whose address the TCP column shows (attaching there takes the token the
/// program printed: `record --tcp ADDR --token T`). The sockets and TCP entries of programs
/// that died are removed.
#[derive(Debug, clap::Args)]
pub(crate) struct PsArgs {}

/// Capture a running program: the seconds before the attach, then --duration
///
/// A program that listens: its flight recorder's window (the seconds before
/// the attach, marked as such), then everything it records for `--duration`. The program
/// keeps running, and keeps its own session. Ctrl-C ends the window early; the file is
/// written whole either way.
#[derive(Debug, clap::Args)]
pub(crate) struct RecordArgs {
    #[command(flatten)]
    target: Target,
    /// How long to record after attaching: `10s`, `500ms`, `2m`, or seconds; `0` takes the
    /// flight recorder's window alone.
    #[arg(long, short, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// The capture file to write.
    #[arg(long, short)]
    output: PathBuf,
}

/// Which program to attach to: `--pid`, `--socket` or `--tcp` (one of them).
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The process to attach to (see `tickscope ps`).
    #[arg(long, required_unless_present_any = ["socket", "tcp"], conflicts_with_all = ["socket", "tcp"])]
    pid: Option<u32>,
    /// The program's socket, instead of `--pid` (for a socket in another directory).
    #[arg(long, value_name = "PATH", conflicts_with = "tcp")]
    socket: Option<PathBuf>,
    /// The program's TCP endpoint (`ProfilerBuilder::listen_tcp`), instead of `--pid`.
    #[arg(long, value_name = "HOST:PORT")]
    tcp: Option<String>,
    /// The token the program printed on stderr, with `--tcp` (default: $TICKSCOPE_TOKEN).
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
}

impl Target {
    /// The endpoint named.
    #[cfg(unix)]
    pub(crate) fn endpoint(&self) -> Result<tickscope::attach::Endpoint, Failure> {
        use tickscope::attach::Endpoint;
        match (&self.socket, self.pid, &self.tcp) {
            (Some(socket), _, _) => Ok(Endpoint::Socket(socket.clone())),
            (None, Some(pid), _) => tickscope::attach::socket_path(pid)
                .map(Endpoint::Socket)
                .map_err(|e| Failure(format!("the socket directory: {e}"))),
            (None, None, Some(addr)) => {
                let token = match &self.token {
                    Some(token) => token.clone(),
                    None => std::env::var("TICKSCOPE_TOKEN").map_err(|_| {
                        Failure(
                            "--tcp needs the program's token: --token or TICKSCOPE_TOKEN"
                                .to_owned(),
                        )
                    })?,
                };
                let token = token.trim().to_owned();
                Ok(Endpoint::Tcp {
                    addr: addr.clone(),
                    token,
                })
            }
            (None, None, None) => Err(Failure("--pid, --socket or --tcp is needed".to_owned())),
        }
    }
}

/// `10s`, `500ms`, `2m`, `1.5s` or a plain number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("`{text}`: {e}"))
}

#[cfg(unix)]
pub(crate) fn ps(_cx: &Context, _args: PsArgs) -> Result<ExitCode, Failure> {
    use tickscope::table::{Align, Grid};

    let programs = tickscope::attach::list().map_err(|e| Failure(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    // PID and WINDOW aligned right, the others left; an error spans the columns after the
    // PID.
    let grid = Grid::new(0)
        .min_width(0, 8)
        .align(1, Align::Left)
        .min_width(1, 24)
        .align(2, Align::Left)
        .min_width(2, 20)
        .align(3, Align::Left)
        .min_width(3, 6)
        .min_width(4, 9)
        .align(5, Align::Left)
        .no_rule()
        .whole_cells()
        .spanning_last_cells();
    let rows: Vec<Vec<String>> = (programs.iter())
        .map(|program| match &program.info {
            Ok(info) => vec![
                info.pid.to_string(),
                info.program.clone(),
                utc(info.start_unix_ns),
                info.mode.name().to_owned(),
                match info.flight_bytes {
                    0 => "-".to_owned(),
                    bytes => size(bytes),
                },
                program.tcp.map_or("-".to_owned(), |addr| addr.to_string()),
            ],
            Err(e) => vec![pid_of(&program.path), format!("({e})")],
        })
        .collect();
    let headers = ["PID", "PROGRAM", "STARTED (UTC)", "MODE", "WINDOW", "TCP"];
    let text = grid.text(&headers, &rows);
    out.write_all(text.as_bytes())
        .map_err(|e| Failure(format!("cannot write: {e}")))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
fn pid_of(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(unix)]
pub(crate) fn record(cx: &Context, args: RecordArgs) -> Result<ExitCode, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // The first Ctrl-C ends the window (the file is still written whole); a second one
    // gives up at once.
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::AcqRel) {
            std::process::exit(130);
        }
    })
    .map_err(|e| Failure(format!("cannot catch Ctrl-C: {e}")))?;
    let endpoint = args.target.endpoint()?;
    let quiet = cx.quiet;
    let mut attached = |info: &tickscope::attach::protocol::Info| {
        if !quiet {
            let what = if args.duration.is_zero() {
                "taking the flight recorder's window".to_owned()
            } else {
                format!(
                    "recording for {:.1} s (Ctrl-C ends it early)",
                    args.duration.as_secs_f64()
                )
            };
            eprintln!(
                "attached to pid {} ({}, {}): {what}",
                info.pid,
                info.program,
                info.mode.name(),
            );
        }
    };
    let recorded = tickscope::attach::record_from(
        &endpoint,
        args.duration,
        &args.output,
        &stop,
        &mut attached,
    )
    .map_err(|e| Failure(e.to_string()))?;
    if !cx.quiet {
        let info = &recorded.info;
        let first = recorded.first_data.map_or("-".to_owned(), |d| {
            format!("{:.1} ms", d.as_secs_f64() * 1e3)
        });
        eprintln!(
            "{}: {} session{}, {} bytes from pid {} ({}, {}){}; first data after {first}",
            args.output.display(),
            recorded.sessions,
            if recorded.sessions == 1 { "" } else { "s" },
            recorded.bytes,
            info.pid,
            info.program,
            info.mode.name(),
            if recorded.stopped {
                ", window ended early by Ctrl-C"
            } else {
                ""
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(unix))]
pub(crate) fn ps(_cx: &Context, _args: PsArgs) -> Result<ExitCode, Failure> {
    Err(Failure(
        "attaching needs Unix domain sockets: not on this platform".to_owned(),
    ))
}

#[cfg(not(unix))]
pub(crate) fn record(_cx: &Context, _args: RecordArgs) -> Result<ExitCode, Failure> {
    Err(Failure(
        "attaching needs Unix domain sockets: not on this platform".to_owned(),
    ))
}

/// `bytes` as KiB, MiB or GiB.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{:.0} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.0} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Unix nanoseconds as `YYYY-MM-DD HH:MM:SS`, UTC.
pub(crate) fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The Gregorian date of day `days` since 1970-01-01 (days counted in 400-year eras of
/// 146,097 days, from 0000-03-01, so that leap days end each era's years).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("3x"),
            Err("`3x`: unknown unit `x` (ms, s, m, h)".to_owned())
        );
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_795_654_800 * 1_000_000_000), "2026-11-26 01:00:00");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(0), "0 B");
    }
}
