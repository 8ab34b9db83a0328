//! The JSON the Trace Event writers need, appended by hand to a byte buffer: strings, integers,
//! microsecond timestamps and argument values. No `fmt` machinery on the per-event path, and
//! nothing here can fail (the buffer is a `Vec`).

use crate::trace::Value;

/// Appends `s` as a JSON string literal, quotes included.
pub(crate) fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..0x20 => b"",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            buf.extend_from_slice(b"\\u00");
            buf.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        } else {
            buf.extend_from_slice(escape);
        }
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

/// The decimal digits of 0 to 99, two each.
const PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// The two digits of `v` (below 100).
fn pair(v: u64) -> [u8; 2] {
    let i = 2 * (v % 100) as usize;
    [PAIRS[i], PAIRS[i + 1]]
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_u64(buf: &mut Vec<u8>, v: u64) {
    let at = buf.len();
    let len = decimals(v);
    // Room for the most digits, written at a width known here: stores in line, not a call to
    // copy as many bytes as the number has (an event has several numbers).
    buf.extend_from_slice(&[0; 20]);
    write_digits(&mut buf[at..at + len], v);
    buf.truncate(at + len);
}

/// Appends nanoseconds as microseconds with exactly three decimals.
#[inline]
pub(crate) fn push_micros(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1000);
    let frac = ns % 1000;
    let [tens, units] = pair(frac);
    buf.extend_from_slice(&[b'.', b'0' + (frac / 100) as u8, tens, units]);
}

/// The number of decimal digits of `v`.
#[inline(always)]
fn decimals(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Writes `v` in decimal into `digits`, which holds exactly its [`decimals`].
#[inline(always)]
fn write_digits(digits: &mut [u8], mut v: u64) {
    let mut i = digits.len();
    // Two digits a division.
    while v >= 100 {
        i -= 2;
        digits[i..i + 2].copy_from_slice(&pair(v));
        v /= 100;
    }
    if v >= 10 {
        digits[..2].copy_from_slice(&pair(v));
    } else {
        digits[0] = b'0' + v as u8;
    }
}

/// Appends a scope argument's value: numbers and booleans as themselves, strings and the
/// floats JSON has no literal for (NaN, infinities) as strings.
pub(crate) fn push_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::I64(v) => buf.extend_from_slice(v.to_string().as_bytes()),
        Value::U64(v) => push_u64(buf, *v),
        Value::F64(v) if v.is_finite() => buf.extend_from_slice(v.to_string().as_bytes()),
        Value::Bool(v) => buf.extend_from_slice(if *v { b"true" } else { b"false" }),
        Value::Str(s) => push_str(buf, s),
        Value::F64(_) => push_str(buf, &value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(push: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut buf = Vec::new();
        push(&mut buf);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn strings_are_escaped() {
        let s = text(|buf| push_str(buf, "a\"b\\c\nd\u{1}\u{1f}é"));
        assert_eq!(s, r#""a\"b\\c\nd\u0001\u001fé""#);
    }

    #[test]
    fn integers() {
        for v in [
            0,
            7,
            10,
            99,
            100,
            101,
            999,
            1000,
            12_345,
            1_000_000,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(text(|buf| push_u64(buf, v)), v.to_string());
        }
        // Each width, at both ends, after other bytes.
        for digits in 1..20u32 {
            for v in [10u64.pow(digits - 1), 10u64.pow(digits) - 1] {
                let s = text(|buf| {
                    buf.extend_from_slice(b"ts:");
                    push_u64(buf, v);
                    push_micros(buf, v);
                });
                let micros = format!("{}.{:03}", v / 1000, v % 1000);
                assert_eq!(s, format!("ts:{v}{micros}"));
            }
        }
    }

    #[test]
    fn micros_have_three_decimals() {
        for (ns, want) in [
            (0, "0.000"),
            (7, "0.007"),
            (1_250, "1.250"),
            (1_005, "1.005"),
            (99_999, "99.999"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            assert_eq!(text(|buf| push_micros(buf, ns)), want);
        }
    }

    #[test]
    fn values() {
        for (value, want) in [
            (Value::I64(-4), "-4"),
            (Value::U64(u64::MAX), "18446744073709551615"),
            (Value::F64(1.5), "1.5"),
            (Value::F64(f64::NAN), "\"NaN\""),
            (Value::F64(f64::NEG_INFINITY), "\"-inf\""),
            (Value::Bool(false), "false"),
            (Value::Str("a\"b".into()), r#""a\"b""#),
        ] {
            assert_eq!(text(|buf| push_value(buf, &value)), want);
        }
    }
}
