//! Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing.
//!
//! Each scope is one complete event (`"ph":"X"`); threads get `thread_name` and
//! `thread_sort_index` metadata, the process a `process_name`. Timestamps are microseconds with
//! three decimals (nanosecond precision) from the session start, whose Unix time is in
//! `otherData.start_unix_ns`: viewers read `ts` as a double, and small values keep every
//! nanosecond.

use std::collections::HashMap;
use std::io::{self, Write};

use super::json_str;
use crate::callsite::Callsite;
use crate::trace::Trace;

const BLOCK: usize = 64 * 1024;

/// Appends `v` in decimal.
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Appends nanoseconds as microseconds with exactly three decimals.
fn push_micros(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1000);
    let frac = ns % 1000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

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
    // Events are formatted into `buf` by hand (no `fmt` machinery) and flushed in 64 KiB
    // blocks; each name is escaped once per trace.
    let mut names: HashMap<*const Callsite, Vec<u8>> = HashMap::new();
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + 512);
    let mut ends: Vec<u64> = Vec::new();
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
        let head = format!(",\"pid\":{pid},\"tid\":{tid},\"ts\":");
        ends.clear();
        for span in &thread.spans {
            // A child never outlives its parent in the file, so viewers nest it; only scopes
            // dropped out of order need this.
            let parent_end = span.parent.map_or(u64::MAX, |p| ends[p as usize]);
            let end = span.end_ns.min(parent_end);
            ends.push(end);
            let name = names
                .entry(span.callsite as *const Callsite)
                .or_insert_with(|| {
                    let mut name = Vec::new();
                    json_str(&mut name, span.name()).expect("writing to a Vec cannot fail");
                    name
                });
            buf.extend_from_slice(b",\n{\"ph\":\"X\",\"cat\":\"scope\",\"name\":");
            buf.extend_from_slice(name);
            buf.extend_from_slice(head.as_bytes());
            push_micros(&mut buf, span.start_ns.saturating_sub(origin));
            buf.extend_from_slice(b",\"dur\":");
            push_micros(&mut buf, end.saturating_sub(span.start_ns));
            if span.open_at_stop {
                buf.extend_from_slice(b",\"args\":{\"open_at_stop\":true}");
            }
            buf.push(b'}');
            if buf.len() >= BLOCK {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        buf.clear();
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

#[cfg(test)]
mod tests {
    #[test]
    fn micros_have_three_decimals() {
        for (ns, text) in [
            (0, "0.000"),
            (7, "0.007"),
            (1_250, "1.250"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            let mut buf = Vec::new();
            super::push_micros(&mut buf, ns);
            assert_eq!(String::from_utf8(buf).unwrap(), text);
        }
    }
}
