//! The parameter list of an `extern "C" __global__` kernel in CUDA or HIP source, read well enough
//! to check a declared ABI against it before anything is launched: how many parameters, their
//! names, and for each whether it is a value, a pointer or a table of pointers, and of which
//! element type.
//!
//! Not a C++ parser: comments and preprocessor lines are dropped, the rest is split into tokens,
//! the kernel is found by its symbol after `__global__`, and types are read from the tokens of
//! each parameter, with `typedef` and `using` aliases of the file resolved. A type it cannot
//! classify is reported as such (a mismatch), never guessed.

use std::collections::HashMap;

/// The element (or value) type of a parameter, as far as the ABI cares: its class and size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CType {
    /// An IEEE half, or its 16 bits (`__half`, `_Float16`, `unsigned short`, `uint16_t`).
    Half,
    /// `float`.
    F32,
    /// A 32-bit integer, either signedness.
    Int32,
    /// An 8-bit integer or `char`.
    Int8,
    /// `bool`.
    Bool,
    /// Anything else, by its spelling.
    Other,
}

/// One parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CParam {
    /// Its name.
    pub name: String,
    /// The type as written (qualifiers dropped), for messages.
    pub spelled: String,
    /// Its class.
    pub ty: CType,
    /// 0: a value; 1: a pointer; 2: a pointer to pointers (a peer table).
    pub pointers: u32,
}

/// Tokens of a C++ source: identifiers and numbers, string literals, punctuation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Punct(char),
}

/// Source without comments and preprocessor lines (newlines kept).
fn strip(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let b: Vec<char> = source.chars().collect();
    let (mut i, mut line_start) = (0, true);
    while i < b.len() {
        let c = b[i];
        if line_start && c == '#' {
            // A preprocessor line, with its continuations.
            while i < b.len() && !(b[i] == '\n' && b[i.saturating_sub(1)] != '\\') {
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
            out.push(' ');
            continue;
        }
        if c == '"' {
            out.push(c);
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(b[i]);
                    i += 1;
                }
                if let Some(&ch) = b.get(i) {
                    out.push(ch);
                }
                i += 1;
            }
            out.push('"');
            i += 1;
            continue;
        }
        if c == '\n' {
            line_start = true;
        } else if !c.is_whitespace() {
            line_start = false;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn tokens(source: &str) -> Vec<Tok> {
    let s: Vec<char> = strip(source).chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Word(s[start..i].iter().collect()));
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Str(s[start..i.min(s.len())].iter().collect()));
            i += 1;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// Qualifiers and attributes that do not change what a parameter is.
const QUALIFIERS: [&str; 7] = [
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "struct",
    "__grid_constant__",
];

/// Attributes written like calls between `__global__` and the kernel's name.
const ATTRIBUTES: [&str; 7] = [
    "__launch_bounds__",
    "__attribute__",
    "__cluster_dims__",
    "__maxnreg__",
    "__declspec",
    "__align__",
    "alignas",
];

/// Every `__global__` function name in `source`.
pub fn kernels(source: &str) -> Vec<String> {
    let t = tokens(source);
    (0..t.len())
        .filter_map(|i| match (&t[i], t.get(i + 1)) {
            (Tok::Word(w), Some(Tok::Punct('(')))
                if !ATTRIBUTES.contains(&w.as_str()) && is_global(&t, i) =>
            {
                Some(w.clone())
            }
            _ => None,
        })
        .collect()
}

/// Whether the identifier at `i` is declared by a declaration that says `__global__` (looking back
/// to the previous `;`, `{` or `}`, skipping balanced attribute parentheses).
fn is_global(t: &[Tok], i: usize) -> bool {
    let mut depth = 0i32;
    for tok in t[..i].iter().rev() {
        match tok {
            Tok::Punct(')') => depth += 1,
            Tok::Punct('(') => depth -= 1,
            Tok::Punct(';' | '{' | '}') if depth == 0 => return false,
            Tok::Word(w) if depth == 0 && w == "__global__" => return true,
            _ => {}
        }
    }
    false
}

/// Why a signature could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No kernel of that name.
    #[error("no `__global__` function `{symbol}` in the source (kernels there: {found})")]
    NotFound {
        /// The symbol looked for.
        symbol: String,
        /// The kernels found, comma-separated.
        found: String,
    },
    /// The parameter list does not end.
    #[error("the parameter list of `{0}` is not closed")]
    Unclosed(String),
    /// A parameter without a name.
    #[error("parameter {index} of `{symbol}` has no name")]
    Unnamed {
        /// The kernel.
        symbol: String,
        /// Position.
        index: usize,
    },
}

/// The parameters of kernel `symbol` in `source`.
pub fn parse(source: &str, symbol: &str) -> Result<Vec<CParam>, SignatureError> {
    let t = tokens(source);
    let aliases = aliases(&t);
    let start = (0..t.len())
        .find(|&i| {
            t[i] == Tok::Word(symbol.to_owned())
                && t.get(i + 1) == Some(&Tok::Punct('('))
                && is_global(&t, i)
        })
        .ok_or_else(|| SignatureError::NotFound {
            symbol: symbol.to_owned(),
            found: kernels(source).join(", "),
        })?;
    let mut params: Vec<Vec<Tok>> = vec![Vec::new()];
    let mut depth = 0i32;
    let mut closed = false;
    for tok in &t[start + 2..] {
        match tok {
            Tok::Punct('(' | '<' | '[') => depth += 1,
            Tok::Punct(')') if depth == 0 => {
                closed = true;
                break;
            }
            Tok::Punct(')' | '>' | ']') => depth -= 1,
            Tok::Punct(',') if depth == 0 => {
                params.push(Vec::new());
                continue;
            }
            _ => {}
        }
        params.last_mut().expect("one list").push(tok.clone());
    }
    if !closed {
        return Err(SignatureError::Unclosed(symbol.to_owned()));
    }
    if params.len() == 1 && (params[0].is_empty() || params[0] == [Tok::Word("void".into())]) {
        return Ok(Vec::new());
    }
    params
        .iter()
        .enumerate()
        .map(|(index, p)| {
            param(p, &aliases).ok_or(SignatureError::Unnamed {
                symbol: symbol.to_owned(),
                index,
            })
        })
        .collect()
}

/// One parameter from its tokens: the name is the last word; `[]` after it is one more pointer.
fn param(toks: &[Tok], aliases: &HashMap<String, (Vec<String>, u32)>) -> Option<CParam> {
    let mut toks = toks.to_vec();
    let mut pointers = 0;
    if toks.last() == Some(&Tok::Punct(']')) {
        let open = toks.iter().rposition(|t| *t == Tok::Punct('['))?;
        toks.truncate(open);
        pointers += 1;
    }
    let Some(Tok::Word(name)) = toks.pop() else {
        return None;
    };
    let mut words = Vec::new();
    for t in &toks {
        match t {
            Tok::Punct('*') => pointers += 1,
            Tok::Word(w) if !QUALIFIERS.contains(&w.as_str()) => words.push(w.clone()),
            _ => {}
        }
    }
    if words.is_empty() {
        return None;
    }
    let (words, extra) = resolve(words, aliases);
    let spelled = words.join(" ");
    Some(CParam {
        name,
        ty: classify(&spelled),
        spelled,
        pointers: pointers + extra,
    })
}

/// `typedef T name;` and `using name = T;` at any depth, as (type words, pointer depth).
fn aliases(t: &[Tok]) -> HashMap<String, (Vec<String>, u32)> {
    let mut out = HashMap::new();
    let mut i = 0;
    while i < t.len() {
        let Tok::Word(w) = &t[i] else {
            i += 1;
            continue;
        };
        let end = t[i..]
            .iter()
            .position(|x| *x == Tok::Punct(';'))
            .map(|e| i + e);
        let Some(end) = end else { break };
        let body = &t[i + 1..end];
        if body
            .iter()
            .any(|x| matches!(x, Tok::Punct('{' | '(' | '}')))
        {
            i += 1;
            continue;
        }
        let split = |toks: &[Tok]| {
            let mut words = Vec::new();
            let mut ptr = 0;
            for x in toks {
                match x {
                    Tok::Punct('*') => ptr += 1,
                    Tok::Word(w) if !QUALIFIERS.contains(&w.as_str()) => words.push(w.clone()),
                    _ => {}
                }
            }
            (words, ptr)
        };
        if w == "typedef" {
            let (mut words, ptr) = split(body);
            if let Some(name) = words.pop() {
                out.insert(name, (words, ptr));
            }
            i = end;
        } else if w == "using" {
            if let (Some(Tok::Word(name)), Some(Tok::Punct('='))) = (body.first(), body.get(1)) {
                out.insert(name.clone(), split(&body[2..]));
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Follows aliases (at most 16 deep) of a one-word type.
fn resolve(
    mut words: Vec<String>,
    aliases: &HashMap<String, (Vec<String>, u32)>,
) -> (Vec<String>, u32) {
    let mut extra = 0;
    for _ in 0..16 {
        let [one] = words.as_slice() else { break };
        let Some((to, ptr)) = aliases.get(one) else {
            break;
        };
        if to.is_empty() {
            break;
        }
        extra += ptr;
        words = to.clone();
    }
    (words, extra)
}

/// The class of a (resolved) type spelling.
fn classify(spelled: &str) -> CType {
    match spelled {
        "__half" | "half" | "_Float16" | "__fp16" | "unsigned short" | "uint16_t"
        | "unsigned short int" | "ushort" => CType::Half,
        "float" => CType::F32,
        "unsigned" | "unsigned int" | "uint32_t" | "uint" | "int" | "signed" | "signed int"
        | "int32_t" => CType::Int32,
        "char" | "signed char" | "unsigned char" | "int8_t" | "uint8_t" => CType::Int8,
        "bool" => CType::Bool,
        _ => CType::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
#include <hip/hip_runtime.h>
#define WG 256
typedef unsigned short f16; // bits
using word = unsigned int;
static __device__ float helper(float a, float b) { return a + b; }
extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(256, 256)))
my_kernel(
    const word* __restrict__ q, // u32 [K/8, N]
    const f16* __restrict__ x,  /* f16, 16-byte aligned */
    f16* const* peers,
    const unsigned rank,
    float out[])
{
    __shared__ float red[8];
}
"#;

    #[test]
    fn reads_names_pointers_and_aliased_types() {
        let p = parse(SRC, "my_kernel").unwrap();
        let got: Vec<(&str, CType, u32)> = p
            .iter()
            .map(|p| (p.name.as_str(), p.ty, p.pointers))
            .collect();
        assert_eq!(
            got,
            [
                ("q", CType::Int32, 1),
                ("x", CType::Half, 1),
                ("peers", CType::Half, 2),
                ("rank", CType::Int32, 0),
                ("out", CType::F32, 1),
            ]
        );
        assert_eq!(
            kernels(SRC),
            ["my_kernel"],
            "a __device__ helper is not a kernel"
        );
    }

    #[test]
    fn a_missing_kernel_names_those_present() {
        let e = parse(SRC, "other").unwrap_err();
        assert!(e.to_string().contains("kernels there: my_kernel"), "{e}");
    }

    #[test]
    fn an_empty_list_has_no_parameters() {
        let src = "extern \"C\" __global__ void k(void) {}";
        assert_eq!(parse(src, "k").unwrap(), []);
    }
}
