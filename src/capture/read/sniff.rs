//! Files of another kind given by mistake: what they look like, for the error's message.

/// Bytes of a file's start that say what it is when it is not a capture.
pub(super) const SNIFF: usize = 1 << 20;

/// What the input is, when it is a file of another kind that users give tickscope's readers
/// by mistake: the traces tickscope writes (Chrome JSON, Perfetto protobuf, folded stacks) and
/// other JSON. `None` when it is none of those.
pub(super) fn other_format(bytes: &[u8]) -> Option<&'static str> {
    if is_perfetto(bytes) {
        // pprof's `Profile` starts the same way (its field 1, `sample_type`, a message).
        return Some(
            "this looks like a protobuf file: a Perfetto trace (it opens in ui.perfetto.dev) \
             or a pprof profile",
        );
    }
    let text = bytes.trim_ascii_start();
    let head = &text[..text.len().min(4096)];
    let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    if head.starts_with(b"<?xml") || head.starts_with(b"<svg") {
        return Some(if has(b"<svg") {
            "this is an SVG image (a flame graph?)"
        } else {
            "this is an XML file"
        });
    }
    match text.first() {
        Some(b'{' | b'[') if has(b"\"traceEvents\"") || has(b"\"ph\"") => {
            Some("this is a Chrome JSON trace (it opens in ui.perfetto.dev)")
        }
        Some(b'{') if has(b"\"resourceSpans\"") => Some("this is an OTLP JSON trace"),
        Some(b'{' | b'[') => Some("this is a JSON file"),
        Some(_) if is_folded(head) => Some("this looks like a text file of folded stacks"),
        _ => None,
    }
}

/// True when `bytes` start as a Perfetto trace does: a `packet` field (field 1,
/// length-delimited) whose length fits in the input.
fn is_perfetto(bytes: &[u8]) -> bool {
    let Some((&0x0a, rest)) = bytes.split_first() else {
        return false;
    };
    let mut len = 0u64;
    for (i, &b) in rest.iter().take(10).enumerate() {
        len |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return len > 0 && len <= (rest.len() - i - 1) as u64;
        }
    }
    false
}

/// True when the first line of `head` reads as folded stacks do: `a;b;c 42`.
fn is_folded(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    std::str::from_utf8(line).is_ok_and(|line| {
        line.trim_end()
            .rsplit_once(' ')
            .is_some_and(|(stack, n)| !stack.trim().is_empty() && n.parse::<u64>().is_ok())
    })
}
