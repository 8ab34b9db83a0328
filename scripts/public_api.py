#!/usr/bin/env python3
"""Prints tickscope's public API, one sorted line per item, from rustdoc's JSON output.

    scripts/public_api.py target/doc/tickscope.json > docs/public-api.txt
    scripts/public_api.py --summary target/doc/tickscope.json   # counts

The JSON comes from `cargo +nightly rustdoc -p tickscope --all-features -- -Z unstable-options
--output-format json` (scripts/public_api.sh runs both and compares with docs/public-api.txt).

Each line is `KIND PATH`, with ` #[non_exhaustive]` or ` #[deprecated]` after it when the item
has that attribute: every module, struct, enum, union, trait, function, constant, static, type
alias and macro at each public path it can be named by (re-exports included); under the
shortest of those paths, a type's public fields, variants, inherent methods and associated
items, a trait's items, and the traits a type implements (`impl TRAIT for PATH`; derived and
explicit, not the automatic and blanket ones). Items hidden from the docs (`#[doc(hidden)]`)
are not public API and are left out. A re-export of another crate's item is listed as
`use PATH = SOURCE`.
"""

import json
import sys

KINDS = {
    "module": "mod",
    "struct": "struct",
    "enum": "enum",
    "union": "union",
    "trait": "trait",
    "trait_alias": "trait_alias",
    "function": "fn",
    "constant": "const",
    "static": "static",
    "type_alias": "type",
    "macro": "macro",
    "proc_macro": "proc_macro",
}


# The rustdoc JSON format versions this script was written against (`format_version`).
KNOWN_FORMATS = {57}


def main():
    args = sys.argv[1:]
    summary = "--summary" in args
    args = [a for a in args if a != "--summary"]
    if len(args) != 1:
        sys.exit("usage: public_api.py [--summary] RUSTDOC_JSON")
    with open(args[0], encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format_version") not in KNOWN_FORMATS:
        print(
            f"public_api.py: rustdoc JSON format {doc.get('format_version')}, written for "
            f"{sorted(KNOWN_FORMATS)}: check the listing by eye",
            file=sys.stderr,
        )
    index = doc["index"]

    def item(id_):
        return index.get(str(id_))

    # Pass 1: every public path of every item reachable from the crate root.
    paths = {}  # id -> set of paths
    external = set()  # lines for re-exports of other crates' items

    def walk(id_, path, seen):
        it = item(id_)
        if it is None:
            return
        kind, inner = next(iter(it["inner"].items()))
        if kind == "use":
            target = inner["id"]
            if inner["is_glob"]:
                tgt = item(target) if target is not None else None
                if tgt is not None and "module" in tgt["inner"]:
                    for child in tgt["inner"]["module"]["items"]:
                        walk(child, path, seen)
                elif tgt is not None and "enum" in tgt["inner"]:
                    for child in tgt["inner"]["enum"]["variants"]:
                        walk(child, path, seen)
                else:
                    external.add(f"use {'::'.join(path)}::* = {inner['source']}::*")
                return
            sub = path + [inner["name"]]
            if target is None or item(target) is None:
                external.add(f"use {'::'.join(sub)} = {inner['source']}")
                return
            walk(target, sub, seen)
            return
        if kind not in KINDS:
            return
        if it["crate_id"] != 0:
            # An item of another crate that rustdoc inlined.
            paths.setdefault(id_, set()).add(tuple(path))
            return
        paths.setdefault(id_, set()).add(tuple(path))
        if kind == "module":
            if id_ in seen:
                return
            seen = seen | {id_}
            for child in inner["items"]:
                child_item = item(child)
                name = child_item["name"] if child_item else None
                if child_item and "use" in child_item["inner"]:
                    walk(child, path, seen)
                elif name is not None:
                    walk(child, path + [name], seen)

    root = item(doc["root"])
    walk(doc["root"], [root["name"]], frozenset())

    def canonical(id_):
        return min(paths[id_], key=lambda p: (len(p), p)) if id_ in paths else None

    def marks(it):
        out = ""
        attrs = json.dumps(it.get("attrs", []))
        if "non_exhaustive" in attrs:
            out += " #[non_exhaustive]"
        if it.get("deprecation") is not None:
            out += " #[deprecated]"
        return out

    def type_name(ty):
        """A short name for an impl's self type or trait."""
        if ty is None:
            return "?"
        if "resolved_path" in ty:
            p = ty["resolved_path"]
            c = canonical(p["id"])
            return "::".join(c) if c else p["path"]
        if "path" in ty and "id" in ty:
            c = canonical(ty["id"])
            return "::".join(c) if c else ty["path"]
        if "primitive" in ty:
            return ty["primitive"]
        if "borrowed_ref" in ty:
            r = ty["borrowed_ref"]
            return "&" + ("mut " if r["is_mutable"] else "") + type_name(r["type"])
        if "generic" in ty:
            return ty["generic"]
        return next(iter(ty)) if isinstance(ty, dict) else str(ty)

    lines = set(external)

    def public(it):
        return it is not None and it["visibility"] in ("public", "default")

    def members(it, base):
        """Lines for the fields, variants, methods and trait impls of the item at `base`."""
        kind, inner = next(iter(it["inner"].items()))
        if kind == "struct":
            k = inner["kind"]
            fields = []
            if "plain" in k:
                fields = k["plain"]["fields"]
            elif "tuple" in k:
                fields = [f for f in k["tuple"] if f is not None]
            for f in fields:
                fi = item(f)
                if fi is not None and fi["visibility"] == "public":
                    lines.add(f"field {base}::{fi['name']}{marks(fi)}")
        if kind == "union":
            for f in inner["fields"]:
                fi = item(f)
                if fi is not None and fi["visibility"] == "public":
                    lines.add(f"field {base}::{fi['name']}{marks(fi)}")
        if kind == "enum":
            for v in inner["variants"]:
                vi = item(v)
                if vi is None:
                    continue
                vpath = f"{base}::{vi['name']}"
                lines.add(f"variant {vpath}{marks(vi)}")
                vk = vi["inner"]["variant"]["kind"]
                if isinstance(vk, dict) and "struct" in vk:
                    for f in vk["struct"]["fields"]:
                        fi = item(f)
                        if fi is not None:
                            lines.add(f"field {vpath}::{fi['name']}{marks(fi)}")
        if kind == "trait":
            for m in inner["items"]:
                mi = item(m)
                if mi is not None:
                    mk = next(iter(mi["inner"]))
                    lines.add(f"{assoc_kind(mk)} {base}::{mi['name']}{marks(mi)}")
        for impl_id in inner.get("impls", []) if isinstance(inner, dict) else []:
            ii = item(impl_id)
            if ii is None:
                continue
            impl = ii["inner"]["impl"]
            if impl["is_synthetic"] or impl["blanket_impl"] is not None:
                continue
            if impl["trait"] is None:
                for m in impl["items"]:
                    mi = item(m)
                    if mi is not None and mi["visibility"] == "public":
                        mk = next(iter(mi["inner"]))
                        lines.add(f"{assoc_kind(mk)} {base}::{mi['name']}{marks(mi)}")
            else:
                neg = "!" if impl["is_negative"] else ""
                lines.add(f"impl {neg}{type_name(impl['trait'])} for {base}")

    def assoc_kind(mk):
        return {"function": "fn", "assoc_const": "const", "assoc_type": "type"}.get(mk, mk)

    for id_, ps in paths.items():
        it = item(id_)
        kind = next(iter(it["inner"]))
        for p in ps:
            lines.add(f"{KINDS[kind]} {'::'.join(p)}{marks(it)}")
        if public(it) and it["crate_id"] == 0:
            members(it, "::".join(canonical(id_)))

    if summary:
        root_name = root["name"]
        root_exports = {
            line.split(" ")[1]
            for line in lines
            if not line.startswith(("impl ", "field ", "variant "))
            and line.split(" ")[1].count("::") == 1
            and line.split(" ")[1].startswith(root_name + "::")
        }
        types = {
            id_
            for id_ in paths
            if next(iter(item(id_)["inner"])) in ("struct", "enum", "union", "trait", "type_alias")
        }
        print(f"root exports: {len(root_exports)}")
        print(f"public types (structs, enums, unions, traits, type aliases): {len(types)}")
        print(f"lines: {len(lines)}")
        return

    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
