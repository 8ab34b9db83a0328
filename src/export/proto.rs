//! Protobuf's wire format, the part our encoders use: varints, fixed-width numbers and
//! length-delimited fields, written into a byte buffer. Shared by the pprof
//! and Perfetto writers.

/// Protobuf's base-128 varint.
pub(crate) fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The bytes [`varint`] writes for `value`.
#[cfg(any(feature = "otlp", test))]
pub(crate) fn varint_len(value: u64) -> usize {
    // 1 byte per started 7 bits, and 1 for 0.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// Field `field` as a varint (wire type 0); zero, the default, is left out.
pub(crate) fn int_field(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        varint(out, u64::from(field) << 3);
        varint(out, value);
    }
}

/// Field `field` as length-delimited bytes (wire type 2): a string, a message, packed numbers.
pub(crate) fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Repeated numeric field `field`, packed.
pub(crate) fn packed_field(out: &mut Vec<u8>, field: u32, values: impl Iterator<Item = u64>) {
    let mut packed = Vec::new();
    for value in values {
        varint(&mut packed, value);
    }
    bytes_field(out, field, &packed);
}

/// Field `field` as a 64-bit fixed-width number (wire type 1): a `double` or `fixed64`.
pub(crate) fn fixed64_field(out: &mut Vec<u8>, field: u32, value: u64) {
    varint(out, (u64::from(field) << 3) | 1);
    out.extend_from_slice(&value.to_le_bytes());
}

/// Field `field` as a varint (wire type 0), written even when it is zero.
pub(crate) fn varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_protobufs() {
        let encode = |v| {
            let mut out = Vec::new();
            varint(&mut out, v);
            out
        };
        assert_eq!(encode(0), [0]);
        assert_eq!(encode(1), [1]);
        assert_eq!(encode(300), [0xac, 0x02]);
        assert_eq!(encode(u64::MAX).len(), 10);
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            assert_eq!(varint_len(v), encode(v).len(), "{v}");
        }
        let mut field = Vec::new();
        bytes_field(&mut field, 6, b"ab");
        assert_eq!(field, [0x32, 2, b'a', b'b']);
    }
}
