//! Help that fits a terminal: each command's help re-wrapped to [`WIDTH`] columns.
//!
//! clap prints doc comments as written, a paragraph per line (its wrapping needs its
//! `wrap_help` feature and another dependency). `tickscope --help` shows each command's first
//! paragraph, one short line; `tickscope help CMD` and `CMD --help` show the whole text, here
//! wrapped so that no line of help passes [`WIDTH`] columns.

use clap::Command;
use tickscope::table::Grid;

/// The widest line of help.
pub(crate) const WIDTH: usize = 80;

/// How far clap indents an option's help under the option (`next_line_help`).
const ARG_INDENT: usize = 10;

/// `cmd` with every subcommand's help wrapped to [`WIDTH`] columns: its long description, and
/// its options' help printed under each option.
pub(crate) fn wrapped(cmd: Command) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    names.into_iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(name, |sub| wrapped(wrap_command(sub)))
    })
}

/// One command's long description and options' help, wrapped.
fn wrap_command(cmd: Command) -> Command {
    let mut cmd = cmd.next_line_help(true);
    if let Some(long) = cmd.get_long_about() {
        let text = wrap(&long.to_string(), WIDTH);
        cmd = cmd.long_about(text);
    }
    let ids: Vec<clap::Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
    for id in ids {
        cmd = cmd.mut_arg(id, |mut arg| {
            arg = list_values(arg);
            let width = WIDTH - ARG_INDENT;
            if let Some(help) = arg.get_help() {
                // `-h` puts the default and the possible values after the help's last line.
                let room = width.saturating_sub(specs_len(&arg));
                let text = wrap(&help.to_string(), if room >= 30 { room } else { width });
                arg = arg.help(text);
            }
            if let Some(help) = arg.get_long_help() {
                let text = wrap(&help.to_string(), width);
                arg = arg.long_help(text);
            }
            arg
        });
    }
    cmd
}

/// `arg` with its possible values, when they have help, listed in its long help only (as
/// clap lists them under `--help`) rather than also inline after its short help under `-h`,
/// which would make a line of 100 columns or more.
fn list_values(arg: clap::Arg) -> clap::Arg {
    let values: Vec<clap::builder::PossibleValue> = (arg.get_possible_values().into_iter())
        .filter(|v| !v.is_hide_set())
        .collect();
    if !arg.get_action().takes_values()
        || arg.is_hide_possible_values_set()
        || !values.iter().any(|v| v.get_help().is_some())
    {
        return arg;
    }
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    // `- name: help`, the helps aligned one space after the longest name.
    let rows: Vec<Vec<String>> = (values.iter())
        .map(|value| {
            let help = value.get_help().map(ToString::to_string);
            vec![format!("{}:", value.get_name()), help.unwrap_or_default()]
        })
        .collect();
    let grid = Grid::new(2).indent("- ").gap(1, " ").whole_cells();
    text.push_str("\n\nPossible values:\n");
    text.push_str(grid.text(&[], &rows).trim_end_matches('\n'));
    arg.hide_possible_values(true).long_help(text)
}

/// The length of what `-h` writes after an option's help: ` [default: …]` and
/// ` [possible values: …]`.
fn specs_len(arg: &clap::Arg) -> usize {
    let mut len = 0;
    let defaults = arg.get_default_values();
    if arg.get_action().takes_values() && !arg.is_hide_default_value_set() && !defaults.is_empty() {
        let values: Vec<String> = defaults
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        len += " [default: ]".len() + values.join(" ").chars().count();
    }
    if arg.get_action().takes_values() && !arg.is_hide_possible_values_set() {
        let values: Vec<String> = (arg.get_possible_values().iter())
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        if !values.is_empty() {
            len += " [possible values: ]".len() + values.join(", ").chars().count();
        }
    }
    len
}

/// `text` with each line longer than `width` characters broken at spaces (a word longer
/// than `width` keeps a line of its own). Lines that fit, and blank lines, stay as they are.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width.max(1));
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut len = 0;
        for (j, word) in line.split(' ').enumerate() {
            let n = word.chars().count();
            if len > 0 && len + 1 + n > width {
                out.push('\n');
                len = 0;
            } else if j > 0 {
                out.push(' ');
                len += 1;
            }
            out.push_str(word);
            len += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(wrap("a bb ccc dddd", 6), "a bb\nccc\ndddd");
        assert_eq!(wrap("a bb ccc", 8), "a bb ccc");
        assert_eq!(wrap("one\n\ntwo three", 5), "one\n\ntwo\nthree");
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            "averyveryverylongword\nx"
        );
        assert_eq!(wrap("µµµ µµµ", 7), "µµµ µµµ");
        assert_eq!(wrap("  - name: x", 80), "  - name: x");
    }
}
