//! `tickscope push`: capture files sent to an OpenTelemetry backend over OTLP/HTTP, through
//! [`tickscope::export::otlp`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[cfg(feature = "otlp")]
use tickscope::Capture;
#[cfg(feature = "otlp")]
use tickscope::export::otlp::{Endpoint, Options, Otlp, PushOptions};

#[cfg(feature = "otlp")]
use crate::input;
use crate::{Context, Failure};

/// What `push` and `convert -o x.otlp.json` say where the command was built without OTLP.
#[cfg(not(feature = "otlp"))]
pub(crate) const WITHOUT_OTLP: &str = "this tickscope was built without OTLP support: \
     install it with `cargo install --locked --path cli --features otlp` (or build with \
     `-p tickscope-cli --features otlp`)";

/// Without the `otlp` feature: says how to get it.
#[cfg(not(feature = "otlp"))]
pub(crate) fn run(_cx: &Context, _args: Args) -> Result<ExitCode, Failure> {
    Err(Failure(WITHOUT_OTLP.to_owned()))
}

/// Send captures to an OpenTelemetry backend as OTLP traces.
///
/// To a Collector, Jaeger, Tempo or Phoenix: protobuf over HTTP, gzipped, `POST URL/v1/traces`, in batches, retried on 429, 500, 502,
/// 503 and 504. Every session of every file goes into one push, each process as its own
/// resource. Prints the spans sent, folded and sampled out, and the span events; nothing on disk changes, so a
/// failed push can be run again.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The backend's OTLP/HTTP base URL (requests go to URL/v1/traces); by default
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL), else OTEL_EXPORTER_OTLP_ENDPOINT,
    /// else http://localhost:4318. Headers come from OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// service.name of every process (by default OTEL_SERVICE_NAME, else the executable name).
    #[arg(long, value_name = "NAME")]
    service: Option<String>,
    /// Folds scopes shorter than this into their parent (which counts them): 500ns, 10us,
    /// 2ms, 1s.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    min_duration: Option<Duration>,
    /// Folds scopes deeper than this (roots are at depth 0) into their ancestor.
    #[arg(long, value_name = "DEPTH")]
    max_depth: Option<u32>,
    /// Sends one root call in N, with everything under it.
    #[arg(long, value_name = "N", default_value_t = 1)]
    sample_roots: u32,
    /// One trace id per process instead of one per root scope.
    #[arg(long)]
    trace_per_process: bool,
    /// The most time one request may take.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "10s")]
    timeout: Duration,
}

/// `500ns`, `10us` (or `10µs`), `2ms`, `1s`, `1.5s`.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{s}` has no unit (ns, us, ms, s)"))?;
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` does not start with a number"))?;
    let ns_per_unit = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("unknown unit `{unit}` (ns, us, ms, s)")),
    };
    let ns = number * ns_per_unit;
    if !ns.is_finite() || ns > u64::MAX as f64 {
        return Err(format!("`{s}` is too long"));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

#[cfg(feature = "otlp")]
pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let mut options = Options::new()
        .sample_roots(args.sample_roots)
        .trace_per_process(args.trace_per_process);
    if let Some(name) = args.service {
        options = options.service_name(name);
    }
    if let Some(d) = args.min_duration {
        options = options.min_duration(d);
    }
    if let Some(depth) = args.max_depth {
        options = options.max_depth(depth);
    }
    let endpoint = args
        .endpoint
        .as_deref()
        .map_or_else(Endpoint::from_env, Endpoint::base);
    let push = PushOptions::from_env()
        .map_err(|e| Failure(e.to_string()))?
        .timeout(args.timeout);
    // Decoded piece by piece where the captures allow it, each request sent when it is
    // full: the bar counts the records decoded (a first pass sums the threads).
    let progress = input::Progress::new(cx, args.files.iter().map(|f| input::size(f)).sum());
    let captures = input::captures(cx, &args.files, None, &progress)?;
    input::decoding_twice(&progress, &args.files, &captures, true);
    let captures: Vec<&Capture> = captures.iter().collect();
    let url = endpoint.url().to_owned();
    let report = Otlp::push_from_captures(&captures, &options, endpoint, &push, |r| {
        progress.message(format!(
            "pushing to {url}: {} spans in {} requests",
            r.accepted_spans, r.requests
        ));
    })
    .map_err(|e| Failure(e.to_string()))?;
    drop(progress);
    let stats = report.stats;
    println!(
        "pushed {} spans to {} in {} requests ({} bytes gzipped, {} retries); \
         {} folded, {} sampled out; {} span events ({} sampled out); {} processes",
        report.accepted_spans,
        url,
        report.requests,
        report.wire_bytes,
        report.retries,
        stats.folded,
        stats.sampled_out,
        stats.events,
        stats.events_sampled_out,
        report.processes
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(duration("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(duration("500ns"), Ok(Duration::from_nanos(500)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(duration("3"), Err("`3` has no unit (ns, us, ms, s)".into()));
        assert_eq!(
            duration("3h"),
            Err("unknown unit `h` (ns, us, ms, s)".into())
        );
        assert_eq!(
            duration("ms"),
            Err("`ms` does not start with a number".into())
        );
    }
}
