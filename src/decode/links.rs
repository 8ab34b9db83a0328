//! Links: scopes that followed from a [`Link`](crate::Link), matched to where the link was
//! captured by (thread id, sequence number), across threads.

use rustc_hash::FxHashMap;

use crate::trace::{Flow, SpanRef};

/// Links seen while pairing, matched once every thread is in.
#[derive(Default)]
pub(super) struct Links {
    /// Captures: (thread id, sequence number) -> (innermost open span, time).
    pub(super) origins: FxHashMap<(u64, u32), (Option<SpanRef>, u64)>,
    /// Scopes that follow from a link: (the scope, link thread id, sequence number).
    pub(super) followers: Vec<(SpanRef, u64, u32)>,
}

impl Links {
    /// Adds the links another thread saw, after this one's.
    pub(super) fn extend(&mut self, other: Self) {
        self.origins.extend(other.origins);
        self.followers.extend(other.followers);
    }

    pub(super) fn matched(self) -> Vec<Flow> {
        let Links { origins, followers } = self;
        followers
            .into_iter()
            .map(|(follower, origin_thread, seq)| {
                let found = origins.get(&(origin_thread, seq));
                Flow {
                    seq,
                    origin_thread,
                    origin: found.and_then(|&(span, _)| span),
                    origin_ns: found.map(|&(_, ns)| ns),
                    follower,
                }
            })
            .collect()
    }
}
