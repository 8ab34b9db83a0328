//! The `#[profile]` attribute of [tickscope](https://docs.rs/tickscope); use it as
//! `tickscope::profile`, which documents it.

mod attr;
mod expand;

use proc_macro::TokenStream;

/// Records every call of a function as a tickscope scope. See `tickscope::profile`.
#[proc_macro_attribute]
pub fn profile(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::profile(args.into(), item.into(), cfg!(feature = "enabled")).into()
}
