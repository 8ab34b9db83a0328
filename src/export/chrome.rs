//! Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing.
//!
//! Each scope is one complete event (`"ph":"X"`); threads get `thread_name` and
//! `thread_sort_index` metadata, the process a `process_name`. Timestamps are microseconds with
//! three decimals (nanosecond precision) from the session start, whose Unix time is in
//! `otherData.start_unix_ns`: viewers read `ts` as a double, and small values keep every
//! nanosecond.

use std::io::{self, Write};

use super::json_str;
use crate::trace::Trace;

/// Streams `trace` as Chrome JSON into `out`; memory use does not depend on the trace size.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    let pid = std::process::id();
    let origin = trace.start_ns;
    out.write_all(b"{\"traceEvents\":[\n")?;
    let process = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tickscope".to_owned());
    write!(
        out,
        "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":"
    )?;
    json_str(out, &process)?;
    out.write_all(b"}}")?;
    for (index, thread) in trace.threads.iter().enumerate() {
        let tid = thread.id;
        write!(
            out,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
        )?;
        json_str(out, &thread.display_name())?;
        write!(
            out,
            "}}}},\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{index}}}}}"
        )?;
        let mut ends: Vec<u64> = Vec::with_capacity(thread.spans.len());
        for span in &thread.spans {
            // A child never outlives its parent in the file, so viewers nest it; only scopes
            // dropped out of order need this.
            let parent_end = span.parent.map_or(u64::MAX, |p| ends[p as usize]);
            let end = span.end_ns.min(parent_end);
            ends.push(end);
            let start = span.start_ns.saturating_sub(origin);
            let dur = end.saturating_sub(span.start_ns);
            out.write_all(b",\n{\"ph\":\"X\",\"cat\":\"scope\",\"name\":")?;
            json_str(out, span.name())?;
            write!(
                out,
                ",\"pid\":{pid},\"tid\":{tid},\"ts\":{}.{:03},\"dur\":{}.{:03}",
                start / 1000,
                start % 1000,
                dur / 1000,
                dur % 1000
            )?;
            if span.open_at_stop {
                out.write_all(b",\"args\":{\"open_at_stop\":true}")?;
            }
            out.write_all(b"}")?;
        }
    }
    write!(
        out,
        "\n],\"otherData\":{{\"producer\":\"tickscope {}\",\"start_unix_ns\":{},\"end_unix_ns\":{},\"dropped_events\":{}}}}}\n",
        env!("CARGO_PKG_VERSION"),
        trace.start_ns,
        trace.end_ns,
        trace.dropped_events
    )
}
