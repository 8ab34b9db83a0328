//! The arguments of `#[profile(...)]`.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Attribute, LitStr, Path};

/// Parsed `#[profile(...)]` arguments.
#[derive(Default)]
pub(crate) struct Args {
    /// `name = "..."`: the scope name instead of the function's.
    pub(crate) name: Option<LitStr>,
    /// `skip`: leave this method out of an instrumented `impl` block.
    pub(crate) skip: Option<Span>,
    /// `crate = path`: where tickscope is, when it is not `::tickscope`.
    pub(crate) krate: Option<Path>,
}

impl Args {
    /// Parses the tokens inside `#[profile(...)]`.
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut args = Self::default();
        syn::meta::parser(|meta| args.parse_one(meta)).parse2(tokens)?;
        args.check()?;
        Ok(args)
    }

    /// Parses the arguments of a `#[profile]` or `#[profile(...)]` attribute on a method.
    pub(crate) fn from_attribute(attr: &Attribute) -> syn::Result<Self> {
        match &attr.meta {
            syn::Meta::Path(_) => Ok(Self::default()),
            syn::Meta::List(list) => Self::parse(list.tokens.clone()),
            syn::Meta::NameValue(nv) => Err(syn::Error::new_spanned(
                nv.eq_token,
                "expected `#[profile]` or `#[profile(...)]`",
            )),
        }
    }

    fn parse_one(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path.is_ident("name") {
            if self.name.is_some() {
                return Err(meta.error("duplicate `name` argument"));
            }
            let value = meta.value().map_err(|_| meta.error(NAME_FORM))?;
            let lit: syn::Lit = value.parse()?;
            let syn::Lit::Str(name) = lit else {
                return Err(syn::Error::new_spanned(
                    lit,
                    "`name` takes a string literal: `name = \"...\"`",
                ));
            };
            if name.value().is_empty() {
                return Err(syn::Error::new_spanned(name, "the scope name is empty"));
            }
            self.name = Some(name);
        } else if meta.path.is_ident("skip") {
            if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
                return Err(meta.error("`skip` takes no value"));
            }
            if self.skip.is_some() {
                return Err(meta.error("duplicate `skip` argument"));
            }
            self.skip = Some(meta.path.segments[0].ident.span());
        } else if meta.path.is_ident("crate") {
            if self.krate.is_some() {
                return Err(meta.error("duplicate `crate` argument"));
            }
            let value = meta.value().map_err(|_| meta.error(CRATE_FORM))?;
            self.krate = Some(value.call(Path::parse_mod_style)?);
        } else {
            let shown = quote::ToTokens::to_token_stream(&meta.path).to_string();
            return Err(meta.error(format!(
                "unknown argument `{shown}`: expected `name = \"...\"`, `skip` or `crate = path`"
            )));
        }
        Ok(())
    }

    fn check(&self) -> syn::Result<()> {
        if let (Some(skip), true) = (self.skip, self.name.is_some() || self.krate.is_some()) {
            return Err(syn::Error::new(
                skip,
                "`skip` leaves the function uninstrumented: it takes no other argument",
            ));
        }
        Ok(())
    }
}

const NAME_FORM: &str = "expected `name = \"...\"`";
const CRATE_FORM: &str = "expected `crate = path`, e.g. `crate = ::my_reexport::tickscope`";

/// True for `#[profile]`, `#[profile(...)]` and `#[<path>::profile(...)]`.
pub(crate) fn is_profile(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "profile")
}
