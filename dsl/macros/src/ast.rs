//! The spanned AST of a `kernel!` invocation, exactly as written: keywords (dtypes, shardings,
//! formats, op names) are kept as identifiers and resolved by `valid`, so that a misspelt keyword
//! is reported with a "did you mean" on the user's token rather than as a parse error.

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Ident, LitInt, PatType, Visibility};

/// One kernel: a Rust function header, an optional TP group, and the unparsed body.
pub struct KernelDef {
    /// Attributes, doc comments included; they go on the generated function.
    pub attrs: Vec<Attribute>,
    /// Visibility of the generated function and argument struct.
    pub vis: Visibility,
    /// The kernel's name: the generated function's and the IR kernel's.
    pub name: Ident,
    /// Compile-time parameters: ordinary Rust parameters of the generated function.
    pub params: Vec<PatType>,
    /// `across EXPR`: the TP group size (a `u32` expression); absent means a single rank.
    pub across: Option<Across>,
    /// The body's tokens, parsed separately so that a mistake in the body still yields a
    /// fallback function with the header's signature.
    pub body: TokenStream,
}

/// `across EXPR`.
pub struct Across {
    /// The group size.
    pub tp: syn::Expr,
}

/// A parsed body: parameter declarations and statements, in source order.
pub struct Body {
    /// Buffer parameters.
    pub decls: Vec<Decl>,
    /// Statements.
    pub stmts: Vec<Stmt>,
    /// Errors the parse stepped over (a Rust expression that is no op expression, `==` for `=`);
    /// the body is still checked so that every mistake is reported at once.
    pub errors: Vec<syn::Error>,
}

/// `in` or `out`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Role {
    /// Read-only.
    In,
    /// Written exactly once.
    Out,
}

/// `in NAME: TYPE [SHARDING] [@SPACE] [index = local|global];`
pub struct Decl {
    /// Input or output.
    pub role: Role,
    /// The `in` / `out` token's span.
    pub role_span: Span,
    /// Parameter name.
    pub name: Ident,
    /// Its type.
    pub ty: TypeSpec,
    /// Sharding keyword, if any (replicated by default).
    pub sharding: Option<Ident>,
    /// `@space`, if any (global by default).
    pub space: Option<Ident>,
    /// `index = …`, if any (local by default).
    pub index: Option<Ident>,
    /// Whether a statement came before this declaration.
    pub after_stmt: bool,
}

/// `KEYWORD [<key = value, …> | (EXPR)] [DIM, …]`: a tensor (`f16[batch, k]`) or a weight
/// (`gptq<group = 128, zero = v1>[k, n]`, `gptq(layout)[k, n]`, `f16_nk[k, n]`).
pub struct TypeSpec {
    /// The dtype or weight-format keyword.
    pub keyword: Ident,
    /// `<key = value, …>`, for literal quantisation layouts.
    pub generics: Option<Generics>,
    /// `(EXPR)`, for a layout given as a Rust value.
    pub arg: Option<syn::Expr>,
    /// The dimensions, as Rust `usize` expressions.
    pub dims: Vec<syn::Expr>,
    /// The brackets around the dimensions.
    pub dims_span: Span,
}

/// `<key = value, …>`.
pub struct Generics {
    /// The entries, in order.
    pub entries: Vec<GenericEntry>,
}

/// `key = value`, or a bare flag `key`.
pub struct GenericEntry {
    /// The key.
    pub key: Ident,
    /// The value, if any.
    pub value: Option<GenericValue>,
}

/// The value of a generic entry.
pub enum GenericValue {
    /// An integer (a group size).
    Int(LitInt),
    /// A keyword (`v1`, `per_channel`, `f16`).
    Ident(Ident),
}

/// One statement.
pub enum Stmt {
    /// `let NAME = EXPR;` or `let (A, B) = EXPR;`.
    Let {
        /// The bound names.
        names: LetNames,
        /// The value.
        expr: Expr,
    },
    /// `OUTPUT = EXPR;`.
    Assign {
        /// The output written.
        target: Ident,
        /// The value.
        expr: Expr,
    },
}

/// The left-hand side of a `let`.
pub enum LetNames {
    /// `let a = …`.
    One(Ident),
    /// `let (a, b) = …`, for ops with several results.
    Tuple(Vec<Ident>, TokenStream),
}

/// An op-level expression.
pub enum Expr {
    /// A value or parameter name.
    Name(Ident),
    /// `op(args…, attr = EXPR, …)` or `family.variant(args…)`.
    Call(Call),
    /// `a + b` or `a * b`.
    Binary {
        /// `+` or `*`.
        op: BinOp,
        /// The operator token's span.
        op_span: Span,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
        /// The whole expression, for spans.
        tokens: TokenStream,
    },
    /// An expression that could not be converted (the error is in `Body::errors`).
    Invalid(TokenStream),
}

/// `+` or `*`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum BinOp {
    /// `+`: the `add` op.
    Add,
    /// `*`: the `mul` op.
    Mul,
}

/// An op call.
pub struct Call {
    /// The op name as written (`rmsnorm`, `gemv.row`).
    pub name: String,
    /// The name's tokens (for spans).
    pub name_tokens: TokenStream,
    /// The last segment of the name (`row` in `gemv.row`), where a wrong variant is reported.
    pub variant: Option<Ident>,
    /// Value operands, in order.
    pub args: Vec<Expr>,
    /// Named attributes (`eps = 1e-6`), in order.
    pub attrs: Vec<NamedArg>,
    /// The whole call, for spans.
    pub tokens: TokenStream,
}

/// `key = EXPR` inside a call: a compile-time attribute, evaluated as Rust.
pub struct NamedArg {
    /// The attribute's name.
    pub key: Ident,
    /// Its value.
    pub value: syn::Expr,
}

impl Expr {
    /// The tokens of the whole expression, for error spans.
    pub fn tokens(&self) -> TokenStream {
        match self {
            Expr::Name(ident) => quote::quote!(#ident),
            Expr::Call(call) => call.tokens.clone(),
            Expr::Binary { tokens, .. } | Expr::Invalid(tokens) => tokens.clone(),
        }
    }
}
