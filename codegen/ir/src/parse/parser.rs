//! The parser: one kernel, line by line, into a [`Builder`].
//!
//! Each statement is one line. The grammar has no nesting, so every rule is a loop, never a
//! recursive call: no text can exhaust the stack.

use std::collections::HashMap;

use crate::buffer::{BufferType, Role, Tensor, Weight};
use crate::builder::{BufferDecl, Builder};
use crate::entities::{Buffer, Value};
use crate::kernel::Kernel;
use crate::types::{
    AwqLayout, GptqLayout, GroupSize, IndexSpace, MemorySpace, ScalarType, Sharding, WeightFormat,
    ZeroPoint,
};

use super::lexer::{Lexer, Tok, Token};
use super::ops::{self, Attr, AttrKind, Operand, SIGNATURES, Signature, Slot};
use super::{Found, MAX_DIM, MAX_ELEMENTS, MAX_RANK, MAX_TP, ParseError};

type Result<T> = std::result::Result<T, ParseError>;

/// The most values one op defines (`quantize_int8`'s codes and scales).
const MAX_RESULTS: usize = 2;

const SCALARS: [(&str, ScalarType); 6] = [
    ("f16", ScalarType::F16),
    ("bf16", ScalarType::Bf16),
    ("f32", ScalarType::F32),
    ("i8", ScalarType::I8),
    ("i32", ScalarType::I32),
    ("u32", ScalarType::U32),
];

const SPACES: [(&str, MemorySpace); 5] = [
    ("reg", MemorySpace::Register),
    ("lds", MemorySpace::Lds),
    ("global", MemorySpace::Global),
    ("peer", MemorySpace::PeerGlobal),
    ("host", MemorySpace::HostVisible),
];

const ZEROS: [(&str, ZeroPoint); 3] = [
    ("v1", ZeroPoint::V1),
    ("v2", ZeroPoint::V2),
    ("sym", ZeroPoint::Symmetric),
];

/// Where a name was defined, for "already defined at" notes.
#[derive(Copy, Clone)]
struct Def<E> {
    entity: E,
    line: usize,
    column: usize,
}

pub(super) struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Token<'a>>,
    buffers: HashMap<&'a str, Def<Buffer>>,
    values: HashMap<&'a str, Def<Value>>,
    /// The file the text came from, for the ops' source locations.
    file: &'a str,
}

impl<'a> Parser<'a> {
    pub fn new(text: &'a str, file: &'a str) -> Self {
        Parser {
            lexer: Lexer::new(text),
            peeked: None,
            buffers: HashMap::new(),
            values: HashMap::new(),
            file,
        }
    }

    // --- tokens -----------------------------------------------------------------------------

    fn peek(&mut self) -> Result<&Token<'a>> {
        let t = match self.peeked.take() {
            Some(t) => t,
            None => self.lexer.next_token()?,
        };
        Ok(self.peeked.insert(t))
    }

    fn next(&mut self) -> Result<Token<'a>> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lexer.next_token(),
        }
    }

    /// Consume `c` if it is next.
    fn eat_punct(&mut self, c: char) -> Result<bool> {
        let found = self.peek()?.tok == Tok::Punct(c);
        if found {
            self.next()?;
        }
        Ok(found)
    }

    fn expect_punct(&mut self, c: char) -> Result<Token<'a>> {
        let t = self.next()?;
        if t.tok == Tok::Punct(c) {
            Ok(t)
        } else {
            Err(t.error(format!("`{c}`")))
        }
    }

    /// The next token, which must be one of `words`; returns its index.
    fn expect_word(&mut self, words: &[&str], what: Option<&str>) -> Result<usize> {
        let t = self.next()?;
        if let Tok::Ident(s) = t.tok {
            if let Some(i) = words.iter().position(|w| *w == s) {
                return Ok(i);
            }
        }
        let expected = match what {
            Some(what) => what.to_owned(),
            None => one_of(words),
        };
        Err(suggest(t.error(expected), &t, words))
    }

    /// The next token, which must be the name of one of `table`'s entries.
    fn expect_named<T: Copy>(&mut self, table: &[(&str, T)], what: Option<&str>) -> Result<T> {
        let words: Vec<&str> = table.iter().map(|(w, _)| *w).collect();
        let i = self.expect_word(&words, what)?;
        Ok(table[i].1)
    }

    /// `word =`.
    fn expect_key(&mut self, word: &str) -> Result<()> {
        self.expect_word(&[word], None)?;
        self.expect_punct('=')?;
        Ok(())
    }

    /// The end of a statement's line (or of the input, which the caller then reports).
    fn expect_end_of_line(&mut self, usage: Option<&str>) -> Result<()> {
        let t = self.next()?;
        match t.tok {
            Tok::Newline | Tok::Eof => {
                if t.tok == Tok::Eof {
                    self.peeked = Some(t);
                }
                Ok(())
            }
            _ => {
                let err = t.error("end of line");
                Err(match usage {
                    Some(u) => err.note(format!("usage: `{u}`")),
                    None => err,
                })
            }
        }
    }

    fn skip_newlines(&mut self) -> Result<()> {
        while self.peek()?.tok == Tok::Newline {
            self.next()?;
        }
        Ok(())
    }

    // --- numbers ----------------------------------------------------------------------------

    /// An unsigned integer of at most `max`; `what` names it in errors.
    fn integer(&mut self, what: &str, max: u64) -> Result<u64> {
        let t = self.next()?;
        let digits = match t.tok {
            Tok::Number(s) if s.bytes().all(|b| b.is_ascii_digit()) => s,
            _ => return Err(t.error(format!("{what} (an unsigned integer)"))),
        };
        match digits.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(t.error(format!("{what} of at most {max} (the parser's limit)"))),
        }
    }

    fn dim(&mut self) -> Result<usize> {
        let n = self.integer("a dimension", MAX_DIM)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn tp(&mut self) -> Result<u32> {
        let n = self.integer("a TP group size", MAX_TP)?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    fn float(&mut self) -> Result<f64> {
        let t = self.next()?;
        match t.tok {
            Tok::Number(s) | Tok::Ident(s) => s.parse::<f64>().ok(),
            _ => None,
        }
        .ok_or_else(|| t.error("a number (`1e-6`, `0.5`, `inf`, `NaN`)"))
    }

    // --- the kernel -------------------------------------------------------------------------

    /// `kernel NAME(tp=N) {`, statements, `}`.
    pub fn kernel(mut self) -> Result<Kernel> {
        self.skip_newlines()?;
        self.expect_word(&["kernel"], None)?;
        let name = self.name("a kernel name")?;
        self.expect_punct('(')?;
        self.expect_key("tp")?;
        let tp = self.tp()?;
        self.expect_punct(')')?;
        self.expect_punct('{')?;
        self.expect_end_of_line(None)?;
        let mut builder = Builder::new(&name, tp);
        loop {
            self.skip_newlines()?;
            let t = self.peek()?;
            match t.tok {
                Tok::Punct('}') => break,
                Tok::Eof => return Err(t.error("a statement or `}`")),
                _ => self.statement(&mut builder)?,
            }
        }
        self.next()?;
        self.skip_newlines()?;
        let t = self.next()?;
        if t.tok != Tok::Eof {
            return Err(t.error("end of input (one kernel per text)"));
        }
        Ok(builder.finish())
    }

    /// A bare or quoted name.
    fn name(&mut self, what: &str) -> Result<String> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident(s) => Ok(s.to_owned()),
            Tok::Str { value, .. } => Ok(value),
            _ => Err(t.error(what)),
        }
    }

    /// A buffer declaration or an op.
    fn statement(&mut self, builder: &mut Builder) -> Result<()> {
        let t = self.peek()?.clone();
        match t.tok {
            Tok::Ident(s) if is_entity(s, "buf") => self.buffer_decl(builder),
            Tok::Ident(s) if is_entity(s, "v") => self.op(builder),
            Tok::Ident(_) => self.op(builder),
            _ => Err(t.error("a buffer declaration (`buf0 = …`) or an op (`v0 = …`, `store …`)")),
        }
    }

    // --- buffers ----------------------------------------------------------------------------

    /// `bufN = input|output NAME : TYPE SHARDING @SPACE index=local|global`.
    fn buffer_decl(&mut self, builder: &mut Builder) -> Result<()> {
        let t = self.next()?;
        let Tok::Ident(label) = t.tok else {
            return Err(t.error("a buffer name like `buf0`"));
        };
        if let Some(first) = self.buffers.get(label) {
            return Err(already_defined(&t, "buffer", first.line, first.column));
        }
        self.expect_punct('=')?;
        let role = self.expect_named(
            &[("input", Role::Input), ("output", Role::Output)],
            Some("`input` or `output`"),
        )?;
        let name = self.name("a parameter name")?;
        self.expect_punct(':')?;
        let ty = self.buffer_type()?;
        let sharding = self.sharding()?;
        self.expect_punct('@')?;
        let space = self.expect_named(&SPACES, None)?;
        self.expect_key("index")?;
        let index = [("local", IndexSpace::Local), ("global", IndexSpace::Global)];
        let index_space = self.expect_named(&index, None)?;
        self.expect_end_of_line(None)?;
        let decl = match role {
            Role::Input => BufferDecl::input(&name, ty, sharding),
            Role::Output => BufferDecl::output(&name, ty, sharding),
        };
        let entity = builder.param(decl.space(space).index_space(index_space));
        let (line, column) = (t.line, t.column);
        let def = Def {
            entity,
            line,
            column,
        };
        self.buffers.insert(label, def);
        Ok(())
    }

    /// `f16[1, 5120]`, `f16_nk[k=…, n=…]`, `gptq<…>[k=…, n=…]`, `awq<…>[k=…, n=…]`.
    fn buffer_type(&mut self) -> Result<BufferType> {
        let t = self.next()?;
        let word = match t.tok {
            Tok::Ident(s) => s,
            _ => "",
        };
        if let Some(&(_, dtype)) = SCALARS.iter().find(|(w, _)| *w == word) {
            let shape = self.shape()?;
            let ty = BufferType::Tensor(Tensor { dtype, shape });
            return self.check_elements(&t, ty);
        }
        let format = match word {
            "f16_nk" => WeightFormat::F16,
            "gptq" => WeightFormat::Gptq(self.gptq()?),
            "awq" => WeightFormat::Awq(self.awq()?),
            _ => {
                let mut words: Vec<&str> = SCALARS.iter().map(|(w, _)| *w).collect();
                words.extend(["f16_nk", "gptq", "awq"]);
                let expected = "a type (`f16[…]`, `bf16`, `f32`, `i8`, `i32`, `u32`, `f16_nk[…]`, `gptq<…>[…]` or `awq<…>[…]`)";
                return Err(suggest(t.error(expected), &t, &words));
            }
        };
        self.expect_punct('[')?;
        self.expect_key("k")?;
        let k = self.dim()?;
        self.expect_punct(',')?;
        self.expect_key("n")?;
        let n = self.dim()?;
        self.expect_punct(']')?;
        self.check_elements(&t, BufferType::Weight(Weight { format, k, n }))
    }

    /// `[d0, d1, …]`, possibly empty.
    fn shape(&mut self) -> Result<Vec<usize>> {
        self.expect_punct('[')?;
        let mut shape = Vec::new();
        if self.eat_punct(']')? {
            return Ok(shape);
        }
        loop {
            if shape.len() == MAX_RANK {
                let t = self.next()?;
                let expected = format!("`]` (at most {MAX_RANK} axes, the parser's limit)");
                return Err(t.error(expected));
            }
            shape.push(self.dim()?);
            let t = self.next()?;
            match t.tok {
                Tok::Punct(']') => return Ok(shape),
                Tok::Punct(',') => {}
                _ => return Err(t.error("`,` or `]`")),
            }
        }
    }

    /// Reject a buffer beyond [`MAX_ELEMENTS`], reported at its type.
    fn check_elements(&self, at: &Token<'_>, ty: BufferType) -> Result<BufferType> {
        let dims: Vec<usize> = match &ty {
            BufferType::Tensor(t) => t.shape.clone(),
            BufferType::Weight(w) => vec![w.k, w.n],
        };
        let elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        if elements.is_some_and(|e| e <= MAX_ELEMENTS) {
            return Ok(ty);
        }
        let expected = format!("a buffer of at most {MAX_ELEMENTS} elements (the parser's limit)");
        let mut err = at.error(expected);
        err.found = Found::token(&ty.to_string());
        Err(err)
    }

    /// `<group=G, zero=Z, scale=T[, g_idx]>`.
    fn gptq(&mut self) -> Result<GptqLayout> {
        self.expect_punct('<')?;
        self.expect_key("group")?;
        let group = self.group()?;
        self.expect_punct(',')?;
        self.expect_key("zero")?;
        let zero = self.expect_named(&ZEROS, None)?;
        self.expect_punct(',')?;
        self.expect_key("scale")?;
        let scale = self.expect_named(&SCALARS, Some("a scale type"))?;
        let mut act_order = false;
        if self.eat_punct(',')? {
            self.expect_word(&["g_idx"], None)?;
            act_order = true;
        }
        let t = self.next()?;
        if t.tok != Tok::Punct('>') {
            let expected = if act_order { "`>`" } else { "`,` or `>`" };
            return Err(t.error(expected));
        }
        Ok(GptqLayout {
            group,
            scale,
            zero,
            act_order,
        })
    }

    /// `<group=G, scale=T>`.
    fn awq(&mut self) -> Result<AwqLayout> {
        self.expect_punct('<')?;
        self.expect_key("group")?;
        let group = self.group()?;
        self.expect_punct(',')?;
        self.expect_key("scale")?;
        let scale = self.expect_named(&SCALARS, Some("a scale type"))?;
        self.expect_punct('>')?;
        Ok(AwqLayout { group, scale })
    }

    /// A group size: rows, or `per_channel`.
    fn group(&mut self) -> Result<GroupSize> {
        if let Tok::Ident(_) = self.peek()?.tok {
            self.expect_word(&["per_channel"], Some("a group size or `per_channel`"))?;
            return Ok(GroupSize::PerChannel);
        }
        let rows = self.integer("a group size", MAX_DIM)?;
        Ok(GroupSize::Rows(u32::try_from(rows).unwrap_or(u32::MAX)))
    }

    /// `replicated`, `col_parallel(tp=N)`, `row_parallel(tp=N)`, `partial(tp=N)`.
    fn sharding(&mut self) -> Result<Sharding> {
        let words = ["replicated", "col_parallel", "row_parallel", "partial"];
        let i = self.expect_word(&words, Some("a sharding (`replicated`, `col_parallel(tp=…)`, `row_parallel(tp=…)` or `partial(tp=…)`)"))?;
        if i == 0 {
            return Ok(Sharding::Replicated);
        }
        self.expect_punct('(')?;
        self.expect_key("tp")?;
        let tp = self.tp()?;
        self.expect_punct(')')?;
        Ok(match i {
            1 => Sharding::ColumnParallel { tp },
            2 => Sharding::RowParallel { tp },
            _ => Sharding::Partial { tp },
        })
    }

    // --- ops --------------------------------------------------------------------------------

    /// `[vA, vB =] MNEMONIC operand, …, key=value, …`.
    fn op(&mut self, builder: &mut Builder) -> Result<()> {
        let results = self.results()?;
        let t = self.next()?;
        let sig = match t.tok {
            Tok::Ident(s) => SIGNATURES.iter().find(|sig| sig.mnemonic == s),
            _ => None,
        };
        let Some(sig) = sig else {
            let words: Vec<&str> = SIGNATURES.iter().map(|s| s.mnemonic).collect();
            return Err(suggest(t.error("an op"), &t, &words));
        };
        if results.len() != sig.results {
            return Err(wrong_results(&t, sig, results.len()));
        }
        let (operands, attrs) = self.op_args(sig)?;
        self.expect_end_of_line(Some(sig.usage))?;
        let Some(kind) = ops::build(sig.mnemonic, &operands, &attrs) else {
            return Err(t.error("an op"));
        };
        // The op was written at its mnemonic: errors about it (validation, lowering) point there.
        builder.located(self.file, t.line as u32, t.column as u32);
        let values = builder.op(kind);
        for (r, v) in results.iter().zip(values) {
            if let Tok::Ident(label) = r.tok {
                let def = Def {
                    entity: v,
                    line: r.line,
                    column: r.column,
                };
                self.values.insert(label, def);
            }
        }
        Ok(())
    }

    /// The defined values and the `=`, if the line starts with a value name.
    fn results(&mut self) -> Result<Vec<Token<'a>>> {
        let mut results: Vec<Token<'a>> = Vec::new();
        if !matches!(self.peek()?.tok, Tok::Ident(s) if is_entity(s, "v")) {
            return Ok(results);
        }
        loop {
            let t = self.next()?;
            let label = match t.tok {
                Tok::Ident(s) if is_entity(s, "v") => s,
                _ => return Err(t.error("a value name like `v0`")),
            };
            if let Some(first) = self.values.get(label) {
                return Err(already_defined(&t, "value", first.line, first.column));
            }
            if let Some(first) = results.iter().find(|r| r.tok == t.tok) {
                return Err(already_defined(&t, "value", first.line, first.column));
            }
            results.push(t);
            let t = self.next()?;
            match t.tok {
                Tok::Punct('=') => return Ok(results),
                // No op defines more values, and a bound keeps the duplicate check linear.
                Tok::Punct(',') if results.len() == MAX_RESULTS => {
                    let expected = format!("`=` (no op defines more than {MAX_RESULTS} values)");
                    return Err(t.error(expected));
                }
                Tok::Punct(',') => {}
                _ => return Err(t.error("`,` or `=`")),
            }
        }
    }

    /// The operands and attributes of `sig`, each after a `,` but the first.
    fn op_args(&mut self, sig: &Signature) -> Result<(Vec<Operand>, Vec<Attr>)> {
        let mut operands = Vec::with_capacity(sig.operands.len());
        for (i, &slot) in sig.operands.iter().enumerate() {
            if i > 0 {
                self.expect_comma(sig, slot_name(slot))?;
            }
            operands.push(self.operand(slot, sig)?);
        }
        let mut attrs = Vec::with_capacity(sig.attrs.len());
        for (i, &(key, kind)) in sig.attrs.iter().enumerate() {
            if i > 0 || !sig.operands.is_empty() {
                self.expect_comma(sig, &format!("`{key}=`"))?;
            }
            self.expect_key(key)
                .map_err(|e| e.note(format!("usage: `{}`", sig.usage)))?;
            attrs.push(match kind {
                AttrKind::Size => Attr::Int(self.integer(&format!("`{key}`"), MAX_DIM)?),
                AttrKind::Tp => Attr::Int(self.integer("a TP group size", MAX_TP)?),
                AttrKind::Float => Attr::Float(self.float()?),
            });
        }
        Ok((operands, attrs))
    }

    /// The `,` before the next operand or attribute; an op line that ends early has the wrong
    /// number of operands.
    fn expect_comma(&mut self, sig: &Signature, next: &str) -> Result<()> {
        let t = self.next()?;
        if t.tok == Tok::Punct(',') {
            return Ok(());
        }
        let err = t.error(format!("`,` and {next}"));
        Err(err.note(format!("usage: `{}`", sig.usage)))
    }

    /// A reference to a defined value or buffer.
    fn operand(&mut self, slot: Slot, sig: &Signature) -> Result<Operand> {
        let t = self.next()?;
        let (prefix, kind) = match slot {
            Slot::Value => ("v", "value"),
            Slot::Buffer => ("buf", "buffer"),
        };
        let label = match t.tok {
            Tok::Ident(s) if is_entity(s, prefix) => s,
            _ => {
                let err = t.error(slot_name(slot));
                return Err(err.note(format!("usage: `{}`", sig.usage)));
            }
        };
        let found = match slot {
            Slot::Value => self.values.get(label).map(|d| Operand::Value(d.entity)),
            Slot::Buffer => self.buffers.get(label).map(|d| Operand::Buffer(d.entity)),
        };
        found.ok_or_else(|| {
            t.error(format!("a defined {kind}"))
                .note(format!("no earlier line defines `{label}`"))
        })
    }
}

/// Whether `s` is `prefix` followed by decimal digits (`v12`, `buf0`).
fn is_entity(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn slot_name(slot: Slot) -> &'static str {
    match slot {
        Slot::Value => "a value like `v0`",
        Slot::Buffer => "a buffer like `buf0`",
    }
}

fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "nothing".into(),
    }
}

fn already_defined(t: &Token<'_>, kind: &str, line: usize, column: usize) -> ParseError {
    let name = match t.found() {
        Found::Token(s) => s,
        _ => String::new(),
    };
    t.error(format!("a new {kind} name"))
        .note(format!("`{name}` is already defined at {line}:{column}"))
}

fn wrong_results(t: &Token<'_>, sig: &Signature, found: usize) -> ParseError {
    let count = |n: usize| match n {
        0 => "no value".to_owned(),
        1 => "1 value".to_owned(),
        n => format!("{n} values"),
    };
    let expected = format!("an op that defines {}", count(found));
    t.error(expected).note(format!(
        "`{}` defines {}; usage: `{}`",
        sig.mnemonic,
        count(sig.results),
        sig.usage
    ))
}

/// Add "did you mean" to an error at an unknown word, if a candidate is close.
fn suggest(err: ParseError, t: &Token<'_>, candidates: &[&str]) -> ParseError {
    let Tok::Ident(word) = t.tok else {
        return err;
    };
    if word.len() > 64 {
        return err;
    }
    let best = candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .min_by_key(|&(d, _)| d);
    match best {
        Some((d, c)) if d > 0 && d <= 2 && d < c.len() => err.note(format!("did you mean `{c}`?")),
        _ => err,
    }
}

/// Edit distance with adjacent transpositions (optimal string alignment) over bytes: names are
/// ASCII, and `rwo` is one edit from `row`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let width = b.len() + 1;
    // Three rows: i - 2, i - 1, i.
    let mut rows = vec![0usize; 3 * width];
    for (j, d) in rows[..width].iter_mut().enumerate() {
        *d = j;
    }
    for i in 1..=a.len() {
        let (cur, prev, prev2) = (
            (i % 3) * width,
            ((i - 1) % 3) * width,
            ((i + 1) % 3) * width,
        );
        rows[cur] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[prev + j - 1] + cost)
                .min(rows[prev + j] + 1)
                .min(rows[cur + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[prev2 + j - 2] + 1);
            }
            rows[cur + j] = d;
        }
    }
    rows[(a.len() % 3) * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("rwo", "row"), 1);
        assert_eq!(edit_distance("rwo", "rep"), 2);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("load", "load"), 0);
    }
}
