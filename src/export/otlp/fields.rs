//! Protobuf fields as the OTLP messages hold them: `AnyValue`s, key-values, strings and
//! messages with their length prefixes, `fixed64`s; each length computed before it is written.

use crate::export::proto::{varint, varint_len};
use crate::trace::{Number, Value};

/// An `AnyValue` to write.
#[derive(Clone, Copy)]
pub(super) enum Any<'a> {
    Str(&'a str),
    Bool(bool),
    Int(i64),
    Double(f64),
    /// A `u64` above `i64::MAX`: its decimal string.
    Big(u64),
}

/// A `u64` as [`uint`](super::requests::uint) maps it: an int, or the decimal string above
/// `i64::MAX`.
pub(super) fn uint(v: u64) -> Any<'static> {
    i64::try_from(v).map_or(Any::Big(v), Any::Int)
}

pub(super) fn number(n: Number) -> Any<'static> {
    match n {
        Number::Int(v) => Any::Int(v),
        Number::Float(v) => Any::Double(v),
    }
}

pub(super) fn value(v: &Value) -> Any<'_> {
    match v {
        Value::I64(v) => Any::Int(*v),
        Value::U64(v) => uint(*v),
        Value::F64(v) => Any::Double(*v),
        Value::Bool(v) => Any::Bool(*v),
        Value::Str(v) => Any::Str(v),
    }
}

/// The decimal digits of `v`, right-aligned in the array, and where they start.
pub(super) fn decimal(mut v: u64) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return (digits, at);
        }
    }
}

impl Any<'_> {
    /// The length of the `AnyValue` message: its one field (a oneof, written even when it
    /// is the default).
    fn len(self) -> usize {
        match self {
            Any::Str(s) => 1 + varint_len(s.len() as u64) + s.len(),
            Any::Bool(_) => 2,
            Any::Int(v) => 1 + varint_len(v as u64),
            Any::Double(_) => 9,
            Any::Big(v) => {
                let digits = 20 - decimal(v).1;
                1 + varint_len(digits as u64) + digits
            }
        }
    }

    fn write(self, out: &mut Vec<u8>) {
        match self {
            Any::Str(s) => string_field(out, 1 << 3 | 2, s.as_bytes()),
            Any::Bool(v) => out.extend_from_slice(&[2 << 3, u8::from(v)]),
            Any::Int(v) => {
                out.push(3 << 3);
                varint(out, v as u64);
            }
            Any::Double(v) => {
                out.push(4 << 3 | 1);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Any::Big(v) => {
                let (digits, at) = decimal(v);
                string_field(out, 1 << 3 | 2, &digits[at..]);
            }
        }
    }
}

/// A length-delimited field of one-byte key `key`, written even when empty.
pub(super) fn string_field(out: &mut Vec<u8>, key: u8, bytes: &[u8]) {
    out.push(key);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A `KeyValue` as the field of one-byte key `field` of the message being written.
pub(super) fn attribute(out: &mut Vec<u8>, field: u8, key: &str, value: Any<'_>) {
    let any = value.len();
    // prost leaves an empty key out.
    let key_len = if key.is_empty() {
        0
    } else {
        1 + varint_len(key.len() as u64) + key.len()
    };
    let body = key_len + 1 + varint_len(any as u64) + any;
    out.push(field);
    varint(out, body as u64);
    if !key.is_empty() {
        string_field(out, 1 << 3 | 2, key.as_bytes());
    }
    out.push(2 << 3 | 2);
    varint(out, any as u64);
    value.write(out);
}

/// Writes `len`, the length of the body after the two bytes at `at` kept for it, into them:
/// moves the body when its length takes one byte or more than two.
pub(super) fn fix_length(out: &mut Vec<u8>, at: usize, len: usize) {
    match varint_len(len as u64) {
        2 => {
            out[at] = (len as u8) | 0x80;
            out[at + 1] = (len >> 7) as u8;
        }
        1 => {
            out[at] = len as u8;
            out.remove(at + 1);
        }
        n => {
            let mut prefix = Vec::with_capacity(n);
            varint(&mut prefix, len as u64);
            out.splice(at..at + 2, prefix);
        }
    }
}

/// A message field of one-byte key `key` whose body is `body`.
pub(super) fn message_field(out: &mut Vec<u8>, key: u8, body: &[u8]) {
    string_field(out, key, body);
}

/// A `fixed64` field of one-byte key `key`, left out when zero as prost does.
pub(super) fn fixed64(out: &mut Vec<u8>, key: u8, v: u64) {
    if v != 0 {
        out.push(key);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_fixed_in_place_whatever_their_size() {
        for len in [0usize, 1, 127, 128, 16_383, 16_384, 70_000] {
            let mut out = vec![9, 0, 0];
            out.extend(std::iter::repeat_n(7u8, len));
            fix_length(&mut out, 1, len);
            let mut want = vec![9];
            varint(&mut want, len as u64);
            want.extend(std::iter::repeat_n(7u8, len));
            assert_eq!(out, want, "{len}");
        }
    }

    #[test]
    fn values_are_measured_as_written() {
        for v in [
            Any::Str(""),
            Any::Str("abc"),
            Any::Bool(false),
            Any::Int(-1),
            Any::Int(0),
            Any::Double(0.0),
            Any::Big(u64::MAX),
            Any::Big(1 << 63),
        ] {
            let mut out = Vec::new();
            v.write(&mut out);
            assert_eq!(out.len(), v.len());
        }
        let mut out = Vec::new();
        Any::Big(u64::MAX).write(&mut out);
        assert_eq!(&out[2..], u64::MAX.to_string().as_bytes());
    }
}
