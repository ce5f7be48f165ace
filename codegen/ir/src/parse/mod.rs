//! The textual IR's parser: the inverse of the printer (`impl Display for Kernel`).
//!
//! `parse(&kernel.to_string())` rebuilds `kernel` exactly, and printing the result gives the same
//! text back. The grammar, the limits and the error format are documented in `docs/ir-format.md`;
//! the file extension is `.wfir`.
//!
//! The parser checks syntax and references only: every name it reads must be defined by an
//! earlier line, exactly once. Whether the kernel makes sense (types, shapes, sharding, roles) is
//! the validator's question, so a text the validator would reject still parses, and the parsed
//! kernel validates exactly when the printed one does.
//!
//! Entity names (`buf3`, `v7`) are labels: the parsed kernel numbers buffers and values in
//! definition order, as the [`Builder`](crate::Builder) does, so a hand-written text may skip or
//! reorder numbers and printing renumbers them. The grammar has no nesting, so parsing uses no
//! recursion; numbers are capped (see [`parse`]) so that no text can ask a later stage for an
//! absurd allocation.

mod lexer;
mod ops;
mod parser;

use std::fmt;

use crate::kernel::Kernel;

pub(crate) use lexer::is_bare_name;

/// The largest TP group a text may declare.
const MAX_TP: u64 = 1024;
/// The largest dimension, column index, block or group size: a 32-bit signed index.
const MAX_DIM: u64 = i32::MAX as u64;
/// The most axes a tensor may have.
const MAX_RANK: usize = 8;
/// The most elements of one buffer a text may declare (`2^34`: 32 GiB of FP16). Whatever builds
/// kernels from other inputs (a model's `config.json`) bounds them the same way, so that every
/// kernel it prints parses back.
pub const MAX_ELEMENTS: u64 = 1 << 34;

/// Parse one kernel from its textual IR (the format the printer writes; `docs/ir-format.md`).
///
/// Never panics. Numbers are capped so that a text cannot ask for an absurd allocation later: a
/// TP group of at most 1024 ranks, dimensions (and column indices, blocks, group sizes) of at most
/// `2^31 - 1`, tensors of at most 8 axes and buffers of at most `2^34` elements; a text beyond a cap
/// is an error that names it.
///
/// ```
/// let text = "\
/// kernel copy(tp=1) {
///     buf0 = input x : f16[1, 8] replicated @global index=local
///     buf1 = output y : f16[1, 8] replicated @global index=local
///     v0 = load buf0
///     store v0, buf1
/// }
/// ";
/// let kernel = wavefuse_ir::parse(text)?;
/// assert_eq!(kernel.name(), "copy");
/// wavefuse_ir::validate(&kernel).expect("a copy is valid");
/// // The printer adds the inferred types as comments.
/// assert!(kernel.to_string().contains("v0 = load buf0                          ; f16[1, 8] replicated"));
///
/// let err = wavefuse_ir::parse("kernel k(tp=1) {\n    v0 = lod buf0\n}\n").unwrap_err();
/// assert_eq!(err.to_string(), "2:10: expected an op, found `lod`; did you mean `load`?");
/// # Ok::<(), wavefuse_ir::ParseError>(())
/// ```
pub fn parse(text: &str) -> Result<Kernel, ParseError> {
    parse_named(text, "<text>")
}

/// [`parse`] of the text of file `file` (a path, as messages should show it): every op of the
/// kernel remembers its line and column there ([`Kernel::loc`]), so a validation error or a
/// lowering refusal about it reads `file:line:column: …`.
pub fn parse_named(text: &str, file: &str) -> Result<Kernel, ParseError> {
    parser::Parser::new(text, file).kernel()
}

/// Why a text is not a kernel: where, what was found there, and what was expected.
///
/// Displays as `LINE:COLUMN: expected WHAT, found WHAT` and, where there is more to say (a
/// suggestion, the first definition of a duplicated name, an op's usage), `; NOTE`:
/// ``3:14: expected `,`, found `]` ``. Lines and columns count from 1; a column counts
/// characters, not bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: expected {expected}, found {found}{}", note.as_ref().map(|n| format!("; {n}")).unwrap_or_default())]
pub struct ParseError {
    /// The line of the offending token, from 1.
    pub line: usize,
    /// Its column, from 1, in characters.
    pub column: usize,
    /// The offending token.
    pub found: Found,
    /// What the parser expected there, as a phrase (``"`,`"``, `"a value name like `v3`"`).
    pub expected: String,
    /// More help, if any: a "did you mean", where a name was first defined, an op's usage.
    pub note: Option<String>,
}

/// The offending token of a [`ParseError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// A token, as written (shortened if very long).
    Token(String),
    /// The end of a line.
    EndOfLine,
    /// The end of the text.
    EndOfInput,
}

impl Found {
    /// A token as written, shortened to at most 40 characters.
    fn token(text: &str) -> Found {
        const MAX: usize = 40;
        let mut s: String = text.chars().take(MAX).collect();
        if text.chars().nth(MAX).is_some() {
            s.push('…');
        }
        Found::Token(s)
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Token(t) => write!(f, "`{t}`"),
            Found::EndOfLine => f.write_str("end of line"),
            Found::EndOfInput => f.write_str("end of input"),
        }
    }
}

impl ParseError {
    fn new(line: usize, column: usize, found: Found, expected: impl Into<String>) -> Self {
        ParseError {
            line,
            column,
            found,
            expected: expected.into(),
            note: None,
        }
    }

    fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// The error followed by the offending line of `source` (the text given to [`parse`]) and a
    /// caret under the offending token, for a terminal:
    ///
    /// ```text
    /// 2:36: expected `,`, found `]`
    ///   |
    /// 2 |     buf0 = input x : gptq<group=128]
    ///   |                                    ^
    /// ```
    ///
    /// Tabs in the line are shown as one space each, so that the caret lines up with the column.
    pub fn report(&self, source: &str) -> String {
        let Some(line) = source.lines().nth(self.line.saturating_sub(1)) else {
            return self.to_string();
        };
        let shown: String = line
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let width = match &self.found {
            Found::Token(t) => t.chars().count().max(1),
            Found::EndOfLine | Found::EndOfInput => 1,
        };
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        let indent = " ".repeat(self.column.saturating_sub(1));
        format!(
            "{self}\n{pad} |\n{number} | {shown}\n{pad} | {indent}{}",
            "^".repeat(width)
        )
    }
}
