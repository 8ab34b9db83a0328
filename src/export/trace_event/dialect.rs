//! What a dialect of Trace Event JSON chooses ([`Dialect`]): Chrome's or Kineto's, with
//! their times.

use crate::decode::pieces::Piece;
use crate::export::lanes::{Edge, Lanes};

/// The start and end (ns from `origin`) of each span of one piece of a thread, in the order of
/// its spans, as a dialect writes them: `times(piece, lanes, origin, placed)`, where `placed`
/// is what the thread's earlier pieces left (empty before the first); `None` where they are
/// the recorded ones. A carried span's start is where an earlier piece placed it; an open
/// span's end is not placed yet (the piece where it ends places it).
pub(crate) type Times = fn(&Piece<'_>, &Lanes, u64, &mut Placed) -> Option<Vec<(u64, u64)>>;

/// What a dialect that moves times carries from one piece of a thread to the next.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Per lane, the last edge placed and its time. Between pieces every edge placed is an
    /// end; the Kineto dialect marks the end of an op it placed to last no time as an
    /// [`Edge::Begin`] there.
    pub(crate) last: Vec<Option<(Edge, u64)>>,
    /// Where the spans still open at the end of the last piece (the next piece's carried
    /// spans, all on lane 0) were placed to begin, outermost first.
    pub(crate) open: Vec<u64>,
}

/// What sets one dialect of the Trace Event format apart.
pub(crate) struct Dialect {
    /// The document up to and including the `[` that opens `traceEvents`, and a line break.
    pub(crate) header: Vec<u8>,
    /// Where `ts` counts from, in Unix-epoch nanoseconds (0: absolute times).
    pub(crate) origin: u64,
    /// Writes scopes as `B`/`E` pairs instead of `X` events, so that nesting survives times
    /// that viewers round.
    pub(crate) begin_end: bool,
    /// The category of a scope's slice.
    pub(crate) scope_category: &'static str,
    /// The category of an async call's poll slice.
    pub(crate) poll_category: &'static str,
    /// Puts Kineto's ids (`External id`, `Ev Idx`, `Record function id`) in the args of each
    /// `X` event.
    pub(crate) op_ids: bool,
    /// The category and name of flow events.
    pub(crate) flow: &'static str,
    /// Moves span times. `None`: every time as recorded.
    pub(crate) times: Option<Times>,
    /// Span times are whole microseconds; flow starts then go to their nearest one
    /// ([`nearest_micros`]).
    pub(crate) whole_micros: bool,
    /// Writes each async call as a `b`/`e` pair.
    pub(crate) async_spans: bool,
    /// Writes the `memory` counter when the trace tracked memory.
    pub(crate) memory: bool,
    /// With `memory`, writes each allocation and free as an instant too.
    pub(crate) allocation_instants: bool,
    /// Writes the counters (`C` events, one track per counter and process) and the instants
    /// (`i` events with their `s` scope).
    pub(crate) counters: bool,
}
