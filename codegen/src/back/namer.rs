//! The one namer of the back ends: every identifier of the generated code (the C++ writer's, and
//! the LLVM back end's kernel and parameter names) comes from an entity's index (and, for
//! parameters, its ABI name), never from a global counter, so output is deterministic and stable
//! under unrelated changes.

use std::collections::HashSet;

use cranelift_entity::{EntityRef, SecondaryMap};

use crate::lowered::{Lds, LoweredKernel, Param, Reg};

/// C++ keywords and alternative tokens, plus the identifiers of HIP and CUDA that generated names
/// must not shadow (builtin variables, math functions the writer calls).
const RESERVED: &[&str] = &[
    // C++20 keywords.
    "alignas",
    "alignof",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "nullptr",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    // Alternative tokens.
    "and",
    "and_eq",
    "bitand",
    "bitor",
    "compl",
    "not",
    "not_eq",
    "or",
    "or_eq",
    "xor",
    "xor_eq",
    // Identifiers with special meaning, and common macros.
    "final",
    "override",
    "import",
    "module",
    "main",
    "assert",
    "NULL",
    "restrict",
    // HIP / CUDA builtin variables and functions the generated code uses.
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "min",
    "max",
    "fminf",
    "fmaxf",
    "fmaf",
    "expf",
    "rsqrtf",
    "fabsf",
    "abs",
    "make_uint2",
    "make_uint4",
    "uint2",
    "uint4",
];

fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name) || has_reserved_prefix(name)
}

/// A prefix that C++ (`__`, `_` + an uppercase letter) or the writer (`wf_`) reserves. Appending
/// to such a name never frees it, so [`unprefixed`] cures it first.
fn has_reserved_prefix(name: &str) -> bool {
    let b = name.as_bytes();
    name.starts_with("wf_") // the writer's own helpers and temporaries
        || name.starts_with("__")
        || (b.first() == Some(&b'_') && b.get(1).is_some_and(u8::is_ascii_uppercase))
}

/// `name` with a `v` in front when it starts with a reserved prefix: what is left to clash is a
/// keyword or an earlier name, which appending `_` cures (a fuzzed parameter named `__x` made
/// [`Names::new`] append forever).
fn unprefixed(name: String) -> String {
    if has_reserved_prefix(&name) {
        format!("v{name}")
    } else {
        name
    }
}

/// `stem` turned into a C++ identifier: other characters become `_`, a leading digit gets an `n`
/// prefix, and an empty stem becomes `v`.
fn sanitize(stem: &str) -> String {
    let mut s: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('v');
    }
    if s.as_bytes()[0].is_ascii_digit() {
        s.insert(0, 'n');
    }
    s
}

/// The exported symbol of a kernel: its name as a C identifier (`extern "C"`, so unmangled). The
/// ABI description records the same string.
pub fn symbol(kernel_name: &str) -> String {
    let s = unprefixed(sanitize(kernel_name));
    if is_reserved(&s) {
        format!("{s}_kernel")
    } else {
        s
    }
}

/// `name` as a C/C++ identifier that no keyword, builtin or writer helper takes (the fields of the
/// C library's argument struct, `crate::clib`): sanitised, then `_` appended while reserved.
pub fn identifier(name: &str) -> String {
    let mut s = unprefixed(sanitize(name));
    while is_reserved(&s) {
        s.push('_');
    }
    s
}

/// `stem`, cured of a reserved prefix, with `_` appended until it is no keyword and not in
/// `used`. `_` + `_` is `__`, a reserved prefix no appending frees (a fuzzed kernel `_` with an
/// output `_` never left the loop), so the cure is applied again after each `_`.
fn free_name(stem: String, used: &HashSet<String>) -> String {
    let mut name = unprefixed(stem);
    while is_reserved(&name) || used.contains(&name) {
        name = unprefixed(name + "_");
    }
    name
}

/// The names of one kernel's entities.
#[derive(Clone, Debug)]
pub struct Names {
    /// The kernel symbol.
    pub symbol: String,
    params: SecondaryMap<Param, String>,
    regs: SecondaryMap<Reg, String>,
    lds: SecondaryMap<Lds, String>,
}

impl Names {
    /// Name every entity of `k`: the symbol, then parameters, LDS arrays and registers in index
    /// order. A clash (with a keyword or an earlier name) appends `_` until the name is free.
    pub fn new(k: &LoweredKernel) -> Names {
        let mut used = HashSet::new();
        let mut claim = |stem: String| {
            let name = free_name(stem, &used);
            used.insert(name.clone());
            name
        };
        let symbol = claim(symbol(&k.name));
        let mut names = Names {
            symbol,
            params: SecondaryMap::new(),
            regs: SecondaryMap::new(),
            lds: SecondaryMap::new(),
        };
        for (p, d) in k.params.iter() {
            names.params[p] = claim(sanitize(&d.name));
        }
        for l in k.lds.keys() {
            names.lds[l] = claim(format!("lds_{}", l.index()));
        }
        for (r, d) in k.regs.iter() {
            names.regs[r] = claim(format!("{}_{}", sanitize(d.hint), r.index()));
        }
        names
    }

    /// A parameter's identifier.
    pub fn param(&self, p: Param) -> &str {
        &self.params[p]
    }

    /// A register's identifier.
    pub fn reg(&self, r: Reg) -> &str {
        &self.regs[r]
    }

    /// An LDS array's identifier.
    pub fn lds(&self, l: Lds) -> &str {
        &self.lds[l]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_and_reserve() {
        assert_eq!(sanitize("w.qweight"), "w_qweight");
        assert_eq!(sanitize("3x"), "n3x");
        assert!(
            is_reserved("int") && is_reserved("wf_tmp") && is_reserved("__x") && is_reserved("_X")
        );
        assert!(!is_reserved("x") && !is_reserved("_x"));
        assert_eq!(symbol("delete"), "delete_kernel");
    }

    /// Names with a reserved prefix get a `v` in front instead of `_`s appended forever (found
    /// by `wavefuse fuzz`: a parameter `__x` never left the loop of `Names::new`).
    #[test]
    fn reserved_prefixes_are_cured_not_appended_to() {
        for (stem, want) in [
            ("__x", "v__x"),
            ("wf_x", "vwf_x"),
            ("_X", "v_X"),
            ("x", "x"),
        ] {
            assert_eq!(unprefixed(stem.to_owned()), want);
            assert!(!is_reserved(&symbol(stem)), "{stem}");
        }
        assert_eq!(symbol("__global__"), "v__global__");
    }

    /// Two entities named `_` (found by `wavefuse fuzz`: a kernel `_` with an output `_`): the
    /// second becomes `__` once an `_` is appended, a reserved prefix, which is cured too.
    #[test]
    fn a_clash_that_appends_into_a_reserved_prefix_ends() {
        let mut used = HashSet::new();
        for want in ["_", "v__", "v___"] {
            let name = free_name("_".to_owned(), &used);
            assert_eq!(name, want);
            used.insert(name);
        }
    }
}
