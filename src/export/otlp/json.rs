//! OTLP/JSON: the requests one per line, to a file or a writer.

use std::io::{self, Write};
use std::path::Path;

use super::map::Otlp;
use super::options::{Options, Stats};
use super::pieces;

impl<'t> Otlp<'t> {
    /// Writes the requests as OTLP/JSON, one `ExportTraceServiceRequest` per line (the
    /// Collector's `otlpjsonfile` receiver reads it), to the file at `path` (gzipped when it
    /// ends in `.gz`; put in place atomically as [`write_file`](crate::export::write_file) does).
    pub fn write_json(&self, path: impl AsRef<Path>) -> io::Result<Stats> {
        crate::capture::output::atomic_write(path.as_ref(), |out| self.write_json_to(out))?;
        Ok(self.stats)
    }

    /// Writes the requests as OTLP/JSON lines into `out`.
    pub fn write_json_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for request in self.requests() {
            serde_json::to_writer(&mut *out, &request).map_err(io::Error::other)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Writes what `captures` decode to ([`Trace::from_captures`](crate::trace::Trace::from_captures))
    /// as OTLP/JSON lines into `out`, as `Otlp::new(&trace, options).write_json_to(out)`
    /// does, and returns its [`Stats`]; but without decoding the trace whole when it can: what
    /// `tickscope convert -o x.otlp.json` does.
    ///
    /// Captures that hold no async call (nor a `tracing` span's `follows_from` of a span
    /// entered on another thread) are decoded thread by thread, a few thousand spans at a
    /// time, each piece mapped and written as it comes, the scopes open at its end carried
    /// into the next piece and sent in the piece where they end: the memory taken is then
    /// bounded by a piece and the scopes open at once, not by the captures' size (plus their
    /// instants and counter samples, and a few words per link). With
    /// [`Options::min_duration`], each thread is read twice (first for the ends of the scopes
    /// open at the end of a piece). A span link points to the span its origin is sent as,
    /// decided in the piece where the origin began: when a thread follows links captured on a
    /// thread written after it, the threads up to that one are first mapped without sending
    /// anything, to decide them. The spans, their ids,
    /// attributes, events and batches are the whole trace's; only with several processes may
    /// the spans that hold events outside every span come later, after every process's spans.
    /// Other captures (and several processes whose threads interleave, with
    /// [`Options::sample_roots`]) are decoded whole.
    ///
    /// ```
    /// use tickscope::export::otlp::{Options, Otlp};
    ///
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// for _ in 0..3 {
    ///     let _outer = tickscope::scope!("outer");
    ///     let _inner = tickscope::scope!("inner");
    /// }
    /// prof.stop();
    /// let options = Options::new().service_name("demo");
    /// let (mut whole, mut pieces) = (Vec::new(), Vec::new());
    /// Otlp::new(&prof.trace(), &options).write_json_to(&mut whole)?;
    /// let stats = Otlp::write_json_from_captures(&[&*prof.capture()], &options, &mut pieces)?;
    /// assert_eq!(whole, pieces);
    /// assert_eq!(stats.sent, 6);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_json_from_captures(
        captures: &[&crate::Capture],
        options: &Options,
        out: &mut dyn Write,
    ) -> io::Result<Stats> {
        if let Some((pieces, calls)) = pieces::of_captures(captures, options) {
            return pieces::write_json((&pieces, calls.as_ref()), options, out);
        }
        let trace = crate::trace::Trace::from_captures(captures.iter().copied());
        let otlp = Otlp::new(&trace, options);
        otlp.write_json_to(out)?;
        Ok(otlp.stats())
    }
}
