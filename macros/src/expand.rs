//! What `#[profile]` turns an item into.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Ident, ImplItem, ImplItemFn, Item, ItemFn, ItemImpl, LitStr, ReturnType, Type};

use crate::attr::{Args, is_profile};

/// Expands `#[profile(args)]` on `item`. With `enabled` false the item is checked the same
/// way but comes back unchanged (helper attributes inside an `impl` block removed).
pub(crate) fn profile(args: TokenStream, item: TokenStream, enabled: bool) -> TokenStream {
    let args = match Args::parse(args) {
        Ok(args) => args,
        Err(e) => return with_error(item, e),
    };
    // An item that does not parse is re-emitted as it is, so that rustc reports its own error.
    let Ok(parsed) = syn::parse2::<Item>(item.clone()) else {
        return item;
    };
    let result = match parsed {
        Item::Fn(f) => function(&args, f, enabled),
        Item::Impl(i) => impl_block(&args, i, enabled),
        other => Err(not_a_function(&other)),
    };
    result.unwrap_or_else(|e| with_error(item, e))
}

/// The original item with an error beside it, so that the error is the only one shown.
fn with_error(item: TokenStream, error: syn::Error) -> TokenStream {
    let error = error.to_compile_error();
    quote!(#item #error)
}

fn not_a_function(item: &Item) -> syn::Error {
    let (what, token): (&str, Span) = match item {
        Item::Struct(i) => ("a struct", i.struct_token.span),
        Item::Enum(i) => ("an enum", i.enum_token.span),
        Item::Union(i) => ("a union", i.union_token.span),
        Item::Trait(i) => ("a trait", i.trait_token.span),
        Item::Mod(i) => ("a module", i.mod_token.span),
        Item::Const(i) => ("a const", i.const_token.span),
        Item::Static(i) => ("a static", i.static_token.span),
        Item::Type(i) => ("a type alias", i.type_token.span),
        Item::Use(i) => ("a `use`", i.use_token.span),
        Item::Verbatim(tokens) if tokens.to_string().contains("fn") => {
            return syn::Error::new(
                tokens.span(),
                "#[profile] needs a function with a body to instrument",
            );
        }
        other => ("this item", other.span()),
    };
    syn::Error::new(
        token,
        format!("#[profile] applies to functions, methods and impl blocks, not to {what}"),
    )
}

/// `#[profile]` on a function (free, associated or a method outside a profiled `impl`).
fn function(args: &Args, mut f: ItemFn, enabled: bool) -> syn::Result<TokenStream> {
    if let Some(constness) = &f.sig.constness {
        return Err(const_error(constness.span));
    }
    if args.skip.is_none() && enabled {
        let krate = crate_path(args);
        let name = match &args.name {
            Some(name) => Name::Literal(name.clone()),
            // A method (or an associated function that names `Self`) profiled on its own: the
            // type is known at run time only.
            None if in_impl(&f.sig) => Name::Method(f.sig.ident.clone()),
            None => Name::Literal(default_name(None, &f.sig.ident)),
        };
        *f.block = instrumented(&krate, &name, &f.sig, &f.block);
    }
    Ok(f.into_token_stream())
}

/// True when `sig` can only be a method or an associated function of an `impl` block or a
/// trait: it takes `self` or names `Self`.
fn in_impl(sig: &syn::Signature) -> bool {
    fn names_self(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "Self",
            proc_macro2::TokenTree::Group(g) => names_self(g.stream()),
            _ => false,
        })
    }
    sig.receiver().is_some() || names_self(sig.to_token_stream())
}

/// What a profiled function's scope is named.
enum Name {
    /// A name known when the macro expands.
    Literal(LitStr),
    /// `Type::method` for the method `ident` of the type `Self` stands for, made at run time.
    Method(Ident),
}

impl Name {
    /// An expression of the `&'static Callsite` of the scope.
    fn callsite(&self, krate: &TokenStream) -> TokenStream {
        match self {
            Self::Literal(name) => quote!(#krate::__callsite!(#name)),
            Self::Method(ident) => {
                let method = LitStr::new(&ident.unraw().to_string(), ident.span());
                let cache = Ident::new("__TICKSCOPE_METHOD", Span::mixed_site());
                quote!({
                    static #cache: #krate::__private::MethodCallsite =
                        #krate::__private::MethodCallsite::new();
                    #krate::__private::method_callsite(
                        &#cache,
                        ::core::any::type_name::<Self>(),
                        #method,
                        ::core::file!(),
                        ::core::line!(),
                        ::core::module_path!(),
                    )
                })
            }
        }
    }
}

/// `#[profile]` on an `impl` block: every method with a body, named `Type::method`, except
/// those marked `#[profile(skip)]` and `const fn`s (which cannot read a clock).
fn impl_block(args: &Args, mut block: ItemImpl, enabled: bool) -> syn::Result<TokenStream> {
    if let Some(name) = &args.name {
        return Err(syn::Error::new_spanned(
            name,
            "`name` names one function: put `#[profile(name = \"...\")]` on the method",
        ));
    }
    let owner = type_name(&block.self_ty);
    let mut errors: Option<syn::Error> = None;
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        if let Err(e) = method_in_impl(args, &owner, method, enabled) {
            match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            }
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(block.into_token_stream()),
    }
}

fn method_in_impl(
    outer: &Args,
    owner: &str,
    method: &mut ImplItemFn,
    enabled: bool,
) -> syn::Result<()> {
    // The method's own `#[profile(...)]` refines the block's and is consumed here.
    let mut own: Option<Args> = None;
    let mut kept = Vec::with_capacity(method.attrs.len());
    for attr in std::mem::take(&mut method.attrs) {
        if is_profile(&attr) {
            if own.is_some() {
                return Err(syn::Error::new_spanned(
                    attr,
                    "duplicate #[profile] attribute",
                ));
            }
            own = Some(Args::from_attribute(&attr)?);
        } else {
            kept.push(attr);
        }
    }
    method.attrs = kept;
    let skip = outer.skip.is_some() || own.as_ref().is_some_and(|a| a.skip.is_some());
    if let Some(constness) = &method.sig.constness {
        // Asked for explicitly: an error; implied by the block: left alone.
        return match own {
            Some(ref a) if a.skip.is_none() => Err(const_error(constness.span)),
            _ => Ok(()),
        };
    }
    if skip || !enabled {
        return Ok(());
    }
    let own = own.unwrap_or_default();
    let name = own
        .name
        .clone()
        .unwrap_or_else(|| default_name(Some(owner), &method.sig.ident));
    let krate = match (&own.krate, &outer.krate) {
        (Some(k), _) | (None, Some(k)) => k.to_token_stream(),
        (None, None) => quote!(::tickscope),
    };
    method.block = instrumented(&krate, &Name::Literal(name), &method.sig, &method.block);
    Ok(())
}

fn const_error(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "#[profile] cannot instrument a `const fn`: a scope reads the clock at run time",
    )
}

fn crate_path(args: &Args) -> TokenStream {
    args.krate
        .as_ref()
        .map_or_else(|| quote!(::tickscope), ToTokens::to_token_stream)
}

/// `Type::method` when the type is known, otherwise `method`.
fn default_name(owner: Option<&str>, ident: &Ident) -> LitStr {
    let method = ident.unraw().to_string();
    let name = match owner {
        Some(owner) => format!("{owner}::{method}"),
        None => method,
    };
    LitStr::new(&name, ident.span())
}

/// The name of an `impl` block's type without its generics: `Foo` for `Foo<T>`, `&Foo`, etc.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(String::new, |s| s.ident.unraw().to_string()),
        Type::Reference(r) => type_name(&r.elem),
        Type::Paren(p) => type_name(&p.elem),
        Type::Group(g) => type_name(&g.elem),
        other => other
            .to_token_stream()
            .to_string()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect(),
    }
}

/// The instrumented body of a function with signature `sig` and body `block`.
///
/// A sync function gets one statement in front of its own (after the items that open its body):
/// the `let` of a `scope!` guard, which early returns, `?` and panics drop. An async function
/// runs its statements as an `async move` block under `__private::instrument`, which records the
/// call's span and one slice per poll.
///
/// The user's statements stay in one block with the user's braces, as written, never in a block
/// of their own nested in a generated one: lints see the code they would see without the
/// attribute (a one-line `{ expr }` nested as a tail is rustc's `unused_braces`), so what they
/// report there is the user's own. Generated tokens carry this expansion's spans, which most
/// lints leave alone.
fn instrumented(
    krate: &TokenStream,
    name: &Name,
    sig: &syn::Signature,
    block: &syn::Block,
) -> syn::Block {
    let mut block = block.clone();
    if sig.asyncness.is_none() {
        let guard = Ident::new("__tickscope_guard", Span::mixed_site());
        let guard: syn::Stmt = match name {
            Name::Literal(name) => syn::parse_quote!(let #guard = #krate::scope!(#name);),
            Name::Method(_) => {
                let callsite = name.callsite(krate);
                syn::parse_quote!(let #guard = #krate::__private::enter(#callsite);)
            }
        };
        insert_after_items(&mut block, guard);
        return block;
    }
    if let Some(hint) = return_hint(&sig.output) {
        insert_after_items(&mut block, hint);
    }
    let callsite = name.callsite(krate);
    syn::parse_quote!({
        #krate::__private::instrument(#callsite, async move #block).await
    })
}

/// Inserts `stmt` after the items that open `block`, before its first statement: items run
/// nothing, and a statement in front of them would be clippy's `items_after_statements`.
fn insert_after_items(block: &mut syn::Block, stmt: syn::Stmt) {
    let items = block
        .stmts
        .iter()
        .take_while(|s| matches!(s, syn::Stmt::Item(_)))
        .count();
    block.stmts.insert(items, stmt);
}

/// A statement that pins an async block's output to the declared return type, so that `?` and
/// `return` inside it infer as they did in the function. None for `impl Trait` outputs, whose
/// type is inferred from the body anyway, and for `!`, which cannot be named in a `let`.
///
/// Its tokens are this expansion's, placed at the return type. rustc reports `unreachable_code`
/// in macro expansions too, hence the `allow`: it covers these generated tokens and the copy of
/// the return type, where none of the lints it names can fire on the user's code.
fn return_hint(output: &ReturnType) -> Option<syn::Stmt> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    if matches!(&**ty, Type::Never(_)) || mentions_impl(ty.to_token_stream()) {
        return None;
    }
    let ret = Ident::new("__tickscope_return", Span::mixed_site());
    let span = Span::mixed_site().located_at(ty.span());
    Some(syn::parse_quote_spanned! {span=>
        #[allow(unreachable_code, clippy::diverging_sub_expression, clippy::needless_return)]
        if false {
            let #ret: #ty = ::core::unreachable!();
            return #ret;
        }
    })
}

/// True when the tokens contain `impl` at any depth (`impl Trait`, `Box<impl Trait>`, ...).
fn mentions_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "impl",
        proc_macro2::TokenTree::Group(g) => mentions_impl(g.stream()),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::profile;

    #[test]
    fn disabled_returns_the_function_unchanged() {
        let item = quote! {
            /// Docs.
            #[inline]
            pub(crate) unsafe fn f<'a, T: Copy>(x: &'a T) -> T where T: 'a { *x }
        };
        let out = profile(quote!(), item.clone(), false);
        assert_eq!(out.to_string(), item.to_string());
        let item = quote!(
            async fn g() -> u8 {
                1
            }
        );
        assert_eq!(
            profile(quote!(), item.clone(), false).to_string(),
            item.to_string()
        );
    }

    #[test]
    fn disabled_impl_block_only_loses_its_helper_attributes() {
        let item = quote! {
            impl S {
                #[profile(skip)]
                fn a(&self) {}
                #[inline]
                fn b(&self) {}
            }
        };
        let expected = quote! {
            impl S {
                fn a(&self) {}
                #[inline]
                fn b(&self) {}
            }
        };
        assert_eq!(
            profile(quote!(), item, false).to_string(),
            expected.to_string()
        );
    }

    #[test]
    fn enabled_sync_function_opens_one_scope() {
        let out = profile(
            quote!(name = "n"),
            quote!(
                fn f() -> u8 {
                    1
                }
            ),
            true,
        )
        .to_string();
        assert!(out.contains(":: tickscope :: scope ! (\"n\")"), "{out}");
        assert!(!out.contains("instrument"), "{out}");
    }

    #[test]
    fn enabled_async_function_is_instrumented() {
        let out = profile(
            quote!(),
            quote!(
                async fn f() -> u8 {
                    1
                }
            ),
            true,
        )
        .to_string();
        assert!(
            out.contains(":: tickscope :: __private :: instrument"),
            "{out}"
        );
        assert!(
            out.contains(":: tickscope :: __callsite ! (\"f\")"),
            "{out}"
        );
        assert!(out.contains("let __tickscope_return : u8"), "{out}");
    }

    #[test]
    fn sync_body_keeps_its_block_and_gets_the_guard_after_its_items() {
        let out = profile(
            quote!(),
            quote!(
                fn f() -> u8 {
                    const K: u8 = 1;
                    K
                }
            ),
            true,
        )
        .to_string();
        // The user's block, not a block nested in a generated one (`unused_braces` on one line).
        assert_eq!(
            out,
            "fn f () -> u8 { const K : u8 = 1 ; \
             let __tickscope_guard = :: tickscope :: scope ! (\"f\") ; K }"
        );
    }

    #[test]
    fn async_body_runs_its_statements_in_the_async_block() {
        let out = profile(
            quote!(),
            quote!(
                async fn f() -> u8 {
                    1
                }
            ),
            true,
        )
        .to_string();
        assert!(out.contains("async move { # [allow"), "{out}");
        assert!(
            out.ends_with("return __tickscope_return ; } 1 }) . await }"),
            "{out}"
        );
        // `!` cannot be named in a `let`: no hint.
        let out = profile(
            quote!(),
            quote!(
                async fn f() -> ! {
                    loop {}
                }
            ),
            true,
        )
        .to_string();
        assert!(out.contains("async move { loop { } }"), "{out}");
    }

    #[test]
    fn errors_keep_the_item() {
        let out = profile(
            quote!(bogus),
            quote!(
                fn f() {}
            ),
            true,
        )
        .to_string();
        assert!(out.starts_with("fn f () { }"), "{out}");
        assert!(out.contains("compile_error"), "{out}");
    }
}
