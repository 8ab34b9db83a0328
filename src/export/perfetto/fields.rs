//! Field numbers of Perfetto's `Trace` protos, and the encoder's sizes and limits.

/// Bytes buffered before they are written out.
pub(super) const BLOCK: usize = 64 * 1024;
/// Room for a packet of [`Writer::short_packet`]: 3 bytes before the time delta (at most 10),
/// 4 of the event before its name iid (at most 1 + 10), and its sequence's [`TAIL`].
pub(super) const SHORT_PACKET: usize = 3 + 10 + 4 + 11 + TAIL;
/// Room for the sequence id and flags fields closing a sequence's packets: 1 + 5 + 1 + 1 bytes.
pub(super) const TAIL: usize = 8;
/// Slots of the callsite cache: `1 << CALLSITE_CACHE_BITS`.
pub(super) const CALLSITE_CACHE_BITS: u32 = 8;
pub(super) const CALLSITE_CACHE: usize = 1 << CALLSITE_CACHE_BITS;

// Field numbers of the messages written (Perfetto's `protos/perfetto/trace/`).
/// `Trace.packet`.
pub(super) const TRACE_PACKET: u32 = 1;
/// `TracePacket` fields.
pub(super) const PACKET_CLOCK_SNAPSHOT: u32 = 6;
pub(super) const PACKET_TIMESTAMP: u32 = 8;
pub(super) const PACKET_SEQUENCE_ID: u32 = 10;
pub(super) const PACKET_TRACK_EVENT: u32 = 11;
pub(super) const PACKET_INTERNED_DATA: u32 = 12;
pub(super) const PACKET_SEQUENCE_FLAGS: u32 = 13;
pub(super) const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;
pub(super) const PACKET_DEFAULTS: u32 = 59;
pub(super) const PACKET_TRACK_DESCRIPTOR: u32 = 60;
/// `TracePacket.sequence_flags` values.
pub(super) const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
pub(super) const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `BUILTIN_CLOCK_BOOTTIME`, the trace processor's default trace clock.
pub(super) const CLOCK_BOOTTIME: u64 = 6;
/// The sequence-scoped incremental clock (ids 64 to 127 are the sequence's own).
pub(super) const CLOCK_INCREMENTAL: u64 = 64;
/// `TrackEvent` fields.
pub(super) const EVENT_CATEGORY_IIDS: u32 = 3;
pub(super) const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
pub(super) const EVENT_TYPE: u32 = 9;
pub(super) const EVENT_NAME_IID: u32 = 10;
pub(super) const EVENT_TRACK_UUID: u32 = 11;
pub(super) const EVENT_COUNTER_VALUE: u32 = 30;
pub(super) const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
pub(super) const EVENT_FLOW_IDS: u32 = 47;
pub(super) const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
/// `TrackEvent.type` values.
pub(super) const TYPE_SLICE_BEGIN: u64 = 1;
pub(super) const TYPE_SLICE_END: u64 = 2;
#[cfg_attr(not(test), allow(dead_code))] // Instants are written once `Trace` has them.
pub(super) const TYPE_INSTANT: u64 = 3;
pub(super) const TYPE_COUNTER: u64 = 4;
/// `InternedData` fields.
pub(super) const INTERNED_CATEGORIES: u32 = 1;
pub(super) const INTERNED_NAMES: u32 = 2;
pub(super) const INTERNED_ANNOTATION_NAMES: u32 = 3;

/// The sequence of the track descriptors, which need no incremental state.
pub(super) const DESCRIPTOR_SEQUENCE: u32 = 1;
