//! Token-level checks: everything about a kernel that its tokens decide. Names (unknown, used
//! before definition, declared twice, never used), roles (writing an input, reading an output
//! before it is written, an output written twice or never), op names and arities, attributes,
//! keywords, and the IR's typing rules wherever the operands' types are known from the tokens.
//!
//! Every error is a `syn::Error` on the offending token; they are combined so that the user sees
//! them all at once. A mistake poisons only what depends on it (an unknown value has no type, so
//! ops that read it are not checked again), so one mistake gives one message.

mod dims;
mod keywords;
mod typing;

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::{Error, Ident};

use crate::ast::{Body, Call, Decl, Expr, KernelDef, LetNames, Role, Stmt};
use crate::model::{BufType, Buffer, Kernel, Sharding, Step};
use crate::ops::Op;
use crate::suggest::{closest, did_you_mean};

use typing::{Operand, Site, Ty, Weight};

/// A kernel that failed its checks.
pub struct Failure<'a> {
    /// Every error, combined.
    pub error: Error,
    /// The resolved parameters, when every declaration was correct (for the argument struct).
    pub buffers: Option<Vec<Buffer<'a>>>,
    /// Whether an op communicates over the TP group.
    pub collective: bool,
}

/// Check a kernel; on success, the resolved kernel for `expand`.
pub fn check<'a>(def: &'a KernelDef, body: &'a Body) -> Result<Kernel<'a>, Failure<'a>> {
    let mut c = Checker::new(def);
    c.errors.extend(body.errors.iter().cloned());
    let before = c.errors.len();
    if let Some(across) = &def.across {
        if dims::eval_int(&across.tp) == Some(0) {
            c.errors.push(Error::new_spanned(
                &across.tp,
                "a TP group has at least one rank",
            ));
        }
    }
    for decl in &body.decls {
        c.declare(decl);
    }
    c.decls_ok = c.errors.len() == before;
    c.later = body
        .stmts
        .iter()
        .flat_map(bound_names)
        .fold(HashMap::new(), |mut m, n| {
            *m.entry(n).or_insert(0) += 1;
            m
        });
    for stmt in &body.stmts {
        c.statement(stmt);
        for name in bound_names(stmt) {
            if let Some(n) = c.later.get_mut(&name) {
                *n -= 1;
            }
        }
    }
    c.finish()
}

fn bound_names(stmt: &Stmt) -> Vec<String> {
    match stmt {
        Stmt::Let {
            names: LetNames::One(i),
            ..
        } => vec![i.to_string()],
        Stmt::Let {
            names: LetNames::Tuple(is, _),
            ..
        } => is.iter().map(Ident::to_string).collect(),
        Stmt::Assign { .. } => Vec::new(),
    }
}

/// Whether the kernel has a TP group; reports the first thing that needs one when it has not,
/// and only that (the fix, `across tp`, is the same for all of them).
pub struct TpGroup {
    present: bool,
    reported: bool,
}

impl TpGroup {
    /// Require a TP group for `what`, written at `tokens`.
    pub fn require(&mut self, tokens: &TokenStream, what: &str, errors: &mut Vec<Error>) {
        if self.present || self.reported {
            return;
        }
        self.reported = true;
        let msg = format!(
            "{what} outside a TP group: this kernel runs on one rank; declare its group with \
             `across tp` after the parameter list"
        );
        errors.push(Error::new_spanned(tokens, msg));
    }
}

enum Binding {
    Buffer(usize),
    Let(usize),
}

struct Let<'a> {
    ident: &'a Ident,
    value: Option<usize>,
    used: bool,
}

struct Checker<'a> {
    def: &'a KernelDef,
    errors: Vec<Error>,
    group: TpGroup,
    decls: Vec<&'a Decl>,
    buffers: Vec<Option<Buffer<'a>>>,
    scope: HashMap<String, Binding>,
    later: HashMap<String, usize>,
    lets: Vec<Let<'a>>,
    types: Vec<Option<Ty>>,
    loaded: Vec<Option<usize>>,
    used: Vec<bool>,
    written: Vec<Option<Option<usize>>>,
    steps: Vec<Step<'a>>,
    collective: bool,
    decls_ok: bool,
    /// Names used before their `let` (already reported; their `let` counts as used).
    early: Vec<String>,
}

impl<'a> Checker<'a> {
    fn new(def: &'a KernelDef) -> Self {
        Checker {
            def,
            errors: Vec::new(),
            group: TpGroup {
                present: def.across.is_some(),
                reported: false,
            },
            decls: Vec::new(),
            buffers: Vec::new(),
            scope: HashMap::new(),
            later: HashMap::new(),
            lets: Vec::new(),
            types: Vec::new(),
            loaded: Vec::new(),
            used: Vec::new(),
            written: Vec::new(),
            steps: Vec::new(),
            collective: false,
            decls_ok: false,
            early: Vec::new(),
        }
    }

    fn err(&mut self, tokens: impl ToTokens, msg: impl std::fmt::Display) {
        self.errors.push(Error::new_spanned(tokens, msg));
    }

    fn declare(&mut self, decl: &'a Decl) {
        if decl.after_stmt {
            let msg = "declare parameters before the first statement";
            self.errors.push(Error::new(decl.role_span, msg));
        }
        let buffer = keywords::resolve(decl, &mut self.group, &mut self.errors);
        let index = self.buffers.len();
        self.decls.push(decl);
        self.buffers.push(buffer);
        self.loaded.push(None);
        self.used.push(false);
        self.written.push(None);
        let name = decl.name.to_string();
        match self.scope.entry(name) {
            Entry::Vacant(slot) => {
                slot.insert(Binding::Buffer(index));
            }
            Entry::Occupied(slot) => {
                let msg = format!("parameter `{}` is declared twice", slot.key());
                self.err(&decl.name, msg);
                self.used[index] = true;
                self.written[index] = Some(None);
            }
        }
    }

    fn new_value(&mut self, ty: Option<Ty>) -> usize {
        self.types.push(ty);
        self.types.len() - 1
    }

    fn statement(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Let {
                names: LetNames::One(ident),
                expr,
            } => {
                let v = self.eval(expr);
                self.bind(ident, v);
            }
            Stmt::Let {
                names: LetNames::Tuple(idents, tokens),
                expr,
            } => {
                let values = match expr {
                    Expr::Call(call) => self.call(call, idents.len()),
                    other => {
                        self.eval(other);
                        let msg = "only an op with several results (`quantize_int8`) is bound to \
                                   a tuple; bind one value with `let name = …`";
                        self.err(tokens, msg);
                        vec![None; idents.len()]
                    }
                };
                for (ident, v) in idents.iter().zip(values) {
                    self.bind(ident, v);
                }
            }
            Stmt::Assign { target, expr } => {
                let v = self.eval(expr);
                self.assign(target, expr, v);
            }
        }
    }

    fn bind(&mut self, ident: &'a Ident, value: Option<usize>) {
        let name = ident.to_string();
        match self.scope.get(&name) {
            Some(Binding::Buffer(_)) => self.err(
                ident,
                format!("`{name}` is already a parameter: give the value another name"),
            ),
            Some(Binding::Let(_)) => self.err(
                ident,
                format!("`{name}` is already defined: every value has one name (no shadowing)"),
            ),
            None => {
                let used = self.early.contains(&name);
                self.lets.push(Let { ident, value, used });
                self.scope.insert(name, Binding::Let(self.lets.len() - 1));
            }
        }
    }

    fn assign(&mut self, target: &Ident, expr: &Expr, value: Option<usize>) {
        let name = target.to_string();
        match self.scope.get(&name) {
            Some(Binding::Buffer(b)) if self.decls[*b].role == Role::Out => {
                let b = *b;
                if self.written[b].is_some() {
                    let msg = format!(
                        "output `{name}` is written twice: every output has exactly one producer"
                    );
                    return self.err(target, msg);
                }
                self.written[b] = Some(value);
                self.store(b, expr, value);
            }
            Some(Binding::Buffer(_)) => self.err(
                target,
                format!("`{name}` is an input: a kernel never writes its inputs"),
            ),
            Some(Binding::Let(_)) => self.err(
                target,
                format!(
                    "`{name}` is a value, not an output: values are bound once with `let`; \
                     outputs are declared with `out`"
                ),
            ),
            None => {
                let unwritten: Vec<String> = self.outputs(|w| w.is_none());
                let guess = closest(&name, unwritten.iter().map(String::as_str)).map(str::to_owned);
                let hint = guess
                    .as_ref()
                    .map_or(String::new(), |g| format!("; did you mean `{g}`?"));
                self.err(target, format!("no output named `{name}`{hint}"));
                if let Some(Binding::Buffer(b)) = guess.and_then(|g| self.scope.get(&g)) {
                    self.written[*b] = Some(None);
                }
            }
        }
    }

    fn outputs(&self, pick: impl Fn(&Option<Option<usize>>) -> bool) -> Vec<String> {
        (0..self.decls.len())
            .filter(|&b| self.decls[b].role == Role::Out && pick(&self.written[b]))
            .map(|b| self.decls[b].name.to_string())
            .collect()
    }

    fn store(&mut self, buf: usize, expr: &Expr, value: Option<usize>) {
        let (Some(v), Some(b)) = (value, &self.buffers[buf]) else {
            return;
        };
        if let Some(ty) = self.types[v].clone() {
            if let Err(e) = typing::check_store(
                b,
                &Operand {
                    ty,
                    tokens: expr.tokens(),
                },
            ) {
                self.errors.push(e);
            }
        }
        self.steps.push(Step::Store { value: v, buf });
    }

    fn eval(&mut self, expr: &'a Expr) -> Option<usize> {
        match expr {
            Expr::Name(ident) => self.value(ident),
            Expr::Call(call) => self.call(call, 1).pop().flatten(),
            Expr::Binary {
                op,
                op_span,
                lhs,
                rhs,
                tokens,
            } => {
                let op = if *op == crate::ast::BinOp::Add {
                    Op::Add
                } else {
                    Op::Mul
                };
                let sym = if op == Op::Add {
                    quote_spanned!(*op_span=> +)
                } else {
                    quote_spanned!(*op_span=> *)
                };
                let a = self.eval(lhs);
                let b = self.eval(rhs);
                let operands = [(a, lhs.tokens()), (b, rhs.tokens())];
                self.apply(op, &sym, None, None, &operands, Vec::new(), tokens)
                    .pop()
                    .flatten()
            }
            Expr::Invalid(tokens) => {
                self.touch_tokens(tokens.clone());
                None
            }
        }
    }

    /// Mark every parameter and value named in `tokens` as used, without checking anything: the
    /// expression around them is already reported, and "never used" would only repeat it.
    fn touch_tokens(&mut self, tokens: TokenStream) {
        for t in tokens {
            match t {
                proc_macro2::TokenTree::Ident(i) => self.touch_name(&i.to_string()),
                proc_macro2::TokenTree::Group(g) => self.touch_tokens(g.stream()),
                _ => {}
            }
        }
    }

    fn touch_name(&mut self, name: &str) {
        match self.scope.get(name) {
            Some(Binding::Let(i)) => self.lets[*i].used = true,
            Some(Binding::Buffer(b)) => self.used[*b] = true,
            None => {}
        }
    }

    /// The operands of a call that is already reported: names are only marked as used.
    fn touch(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(ident) if self.scope.contains_key(&ident.to_string()) => {
                self.touch_name(&ident.to_string())
            }
            other => {
                self.eval(other);
            }
        }
    }

    /// The value a name denotes in an operand position.
    fn value(&mut self, ident: &Ident) -> Option<usize> {
        let name = ident.to_string();
        match self.scope.get(&name) {
            Some(Binding::Let(i)) => {
                let i = *i;
                self.lets[i].used = true;
                self.lets[i].value
            }
            Some(Binding::Buffer(b)) => self.read_buffer(*b, ident),
            None => {
                self.unknown(ident, "value");
                None
            }
        }
    }

    fn read_buffer(&mut self, b: usize, ident: &Ident) -> Option<usize> {
        let name = ident.to_string();
        if self.decls[b].role == Role::Out {
            if let Some(written) = self.written[b] {
                return written;
            }
            let msg = format!(
                "output `{name}` is read before it is written: an output is never loaded (other \
                 workgroups or ranks may still be writing it); after `{name} = …;` the name \
                 denotes the value stored"
            );
            self.err(ident, msg);
            return None;
        }
        self.used[b] = true;
        let ty = match &self.buffers[b] {
            None => return None,
            Some(
                buffer @ Buffer {
                    ty: BufType::Tensor { .. },
                    ..
                },
            ) => typing::buffer_ty(buffer),
            Some(w) => {
                let mode = match w.sharding {
                    Sharding::Replicated | Sharding::Partial => "rep",
                    Sharding::Col => "col",
                    Sharding::Row => "row",
                };
                let msg = format!(
                    "`{name}` is a weight matrix: only a GEMV reads it, as its first operand \
                     (`gemv.{mode}({name}, x)`)"
                );
                self.err(ident, msg);
                return None;
            }
        };
        if let Some(v) = self.loaded[b] {
            return Some(v);
        }
        let v = self.new_value(ty);
        self.loaded[b] = Some(v);
        self.steps.push(Step::Load { buf: b, value: v });
        Some(v)
    }

    fn unknown(&mut self, ident: &Ident, what: &str) {
        let name = ident.to_string();
        if self.later.get(&name).is_some_and(|&n| n > 0) {
            let msg = format!("`{name}` is used before it is defined: its `let` comes later");
            self.early.push(name);
            return self.err(ident, msg);
        }
        let names: Vec<String> = self.scope.keys().cloned().collect();
        let guess = closest(&name, names.iter().map(String::as_str)).map(str::to_owned);
        let hint = guess
            .as_ref()
            .map_or(String::new(), |g| format!("; did you mean `{g}`?"));
        self.err(
            ident,
            format!("cannot find {what} `{name}` in this kernel{hint}"),
        );
        match guess.and_then(|g| self.scope.get(&g)) {
            Some(Binding::Let(i)) => self.lets[*i].used = true,
            Some(Binding::Buffer(b)) => self.used[*b] = true,
            None => {}
        }
    }

    /// The weight parameter named by a GEMV's first operand.
    fn weight(&mut self, expr: &'a Expr) -> Option<(usize, Weight<'a>)> {
        let Expr::Name(ident) = expr else {
            self.eval(expr);
            let msg = "the first operand of a GEMV is a weight parameter, by name";
            self.err(expr.tokens(), msg);
            return None;
        };
        let name = ident.to_string();
        let b = match self.scope.get(&name) {
            Some(Binding::Buffer(b)) => *b,
            Some(Binding::Let(i)) => {
                self.lets[*i].used = true;
                let msg = format!(
                    "`{name}` is a value: the first operand of a GEMV is a weight parameter"
                );
                self.err(ident, msg);
                return None;
            }
            None => {
                self.unknown(ident, "weight");
                return None;
            }
        };
        self.used[b] = true;
        let buffer = self.buffers[b].as_ref()?;
        match typing::weight_of(buffer, ident) {
            Some(w) => Some((b, w)),
            None => {
                let msg = format!(
                    "`{name}` is a tensor, not a weight matrix: declare a GEMV's weight with a \
                     weight format, e.g. `f16_nk[K, N]` or `gptq<group = 128, zero = v1>[K, N]`"
                );
                self.err(ident, msg);
                None
            }
        }
    }

    /// An op call that should define `want` values.
    fn call(&mut self, call: &'a Call, want: usize) -> Vec<Option<usize>> {
        let Some(op) = self.resolve_op(call) else {
            call.args.iter().for_each(|a| self.touch(a));
            return vec![None; want];
        };
        let expected = op.operands();
        if call.args.len() != expected.len() {
            self.arity(op, call);
            call.args.iter().for_each(|a| self.touch(a));
            return self.results(op, call, want, vec![None; op.results()]);
        }
        if op.has_weight() && self.swapped(&call.args) {
            let msg = format!(
                "the weight comes first: `{}({})`",
                op.name(),
                op.operands().join(", ")
            );
            self.err(&call.tokens, msg);
            call.args.iter().for_each(|a| self.touch(a));
            return self.results(op, call, want, vec![None; op.results()]);
        }
        let mut weight = None;
        let mut operands = Vec::new();
        for (i, arg) in call.args.iter().enumerate() {
            if i == 0 && op.has_weight() {
                weight = Some(self.weight(arg));
            } else {
                operands.push((self.eval(arg), arg.tokens()));
            }
        }
        let attrs = self.attrs(op, call);
        let values = self.apply(
            op,
            &call.name_tokens,
            call.variant.as_ref(),
            weight,
            &operands,
            attrs,
            &call.tokens,
        );
        self.results(op, call, want, values)
    }

    /// Whether a GEMV's operands are a value and then a weight parameter.
    fn swapped(&self, args: &[Expr]) -> bool {
        let is_weight = |e: &Expr| match e {
            Expr::Name(i) => match self.scope.get(&i.to_string()) {
                Some(Binding::Buffer(b)) => {
                    matches!(
                        &self.buffers[*b],
                        Some(Buffer {
                            ty: BufType::Weight { .. },
                            ..
                        })
                    )
                }
                _ => false,
            },
            _ => false,
        };
        !is_weight(&args[0]) && is_weight(&args[1])
    }

    fn results(
        &mut self,
        op: Op,
        call: &Call,
        want: usize,
        values: Vec<Option<usize>>,
    ) -> Vec<Option<usize>> {
        if want == values.len() {
            return values;
        }
        let msg = if op.results() > 1 {
            format!(
                "`{}` has {} results (codes, scales): bind them with `let (codes, scales) = …`",
                op.name(),
                op.results()
            )
        } else {
            format!(
                "`{}` has one result: bind it with `let name = …`",
                op.name()
            )
        };
        self.err(&call.tokens, msg);
        vec![None; want]
    }

    fn resolve_op(&mut self, call: &Call) -> Option<Op> {
        if let Some(op) = Op::from_name(&call.name) {
            if op.collective() {
                self.collective = true;
                self.group.require(
                    &call.name_tokens,
                    &format!("`{}`", op.name()),
                    &mut self.errors,
                );
            }
            return Some(op);
        }
        let names = crate::ops::ALL.map(Op::name);
        let msg = if let Some(hint) = Op::family_hint(&call.name) {
            hint.to_owned()
        } else if call.name == "load" || call.name == "store" {
            "there is no `load` or `store` op: an input is read where its name is first used, and \
             an output is written by `output = value;`"
                .to_owned()
        } else if let Some(guess) = closest(&call.name, names) {
            format!("unknown op `{}`; did you mean `{guess}`?", call.name)
        } else {
            format!(
                "unknown op `{}`; the ops are {}",
                call.name,
                names.join(", ")
            )
        };
        let at = match (&call.variant, call.name.split_once('.')) {
            (Some(v), Some((family, _)))
                if names.iter().any(|n| n.starts_with(&format!("{family}."))) =>
            {
                quote!(#v)
            }
            _ => call.name_tokens.clone(),
        };
        self.err(at, msg);
        None
    }

    fn arity(&mut self, op: Op, call: &Call) {
        let expected = op.operands();
        let msg = format!(
            "`{}` takes {} operand{} ({}), found {}",
            op.name(),
            expected.len(),
            if expected.len() == 1 { "" } else { "s" },
            expected.join(", "),
            call.args.len()
        );
        match call.args.get(expected.len()) {
            Some(extra) => self.err(extra.tokens(), msg),
            None => self.err(&call.tokens, msg),
        }
    }

    /// The attribute expressions in the op table's order, or empty if one is missing or wrong.
    fn attrs(&mut self, op: Op, call: &'a Call) -> Vec<&'a syn::Expr> {
        let spec = op.attrs();
        let mut found: Vec<Option<&'a syn::Expr>> = vec![None; spec.len()];
        let mut ok = true;
        for a in &call.attrs {
            let key = a.key.to_string();
            match spec.iter().position(|(n, _)| *n == key) {
                Some(i) if found[i].is_some() => {
                    self.err(&a.key, format!("`{key}` is given twice"));
                    ok = false;
                }
                Some(i) => found[i] = Some(&a.value),
                None if spec.is_empty() => {
                    self.err(&a.key, format!("`{}` takes no attributes", op.name()));
                    ok = false;
                }
                None => {
                    let hint = did_you_mean(&key, spec.iter().map(|(n, _)| *n));
                    self.err(
                        &a.key,
                        format!("`{}` has no attribute `{key}`{hint}", op.name()),
                    );
                    ok = false;
                }
            }
        }
        let missing: Vec<String> = spec
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|((n, _), _)| format!("`{n} = …`"))
            .collect();
        if !missing.is_empty() && ok {
            self.err(
                &call.tokens,
                format!("`{}` needs {}", op.name(), missing.join(" and ")),
            );
        }
        found
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .filter(|_| ok)
            .unwrap_or_default()
    }

    /// Type an op, define its results, and record the step.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        op: Op,
        name: &TokenStream,
        variant: Option<&Ident>,
        weight: Option<Option<(usize, Weight<'a>)>>,
        operands: &[(Option<usize>, TokenStream)],
        attrs: Vec<&'a syn::Expr>,
        tokens: &TokenStream,
    ) -> Vec<Option<usize>> {
        // Without a TP group a collective is already reported; typing it would only add noise.
        let complete = attrs.len() == op.attrs().len()
            && (self.group.present || !op.collective())
            && operands.iter().all(|(v, _)| v.is_some())
            && weight.as_ref().is_none_or(Option::is_some);
        let typed: Option<Vec<Operand>> = operands
            .iter()
            .map(|(v, t)| {
                Some(Operand {
                    ty: self.types[(*v)?].clone()?,
                    tokens: t.clone(),
                })
            })
            .collect();
        let mut tys: Vec<Option<Ty>> = vec![None; op.results()];
        if let (true, Some(typed)) = (complete, typed) {
            let site = Site {
                op,
                name,
                variant,
                attrs: &attrs,
            };
            let w = weight.as_ref().and_then(|w| w.as_ref().map(|(_, w)| w));
            match typing::infer(&site, w, &typed) {
                Ok(t) => tys = t.into_iter().map(Some).collect(),
                Err(e) => self.errors.push(e),
            }
        }
        let results: Vec<usize> = tys.into_iter().map(|t| self.new_value(t)).collect();
        if complete {
            self.steps.push(Step::Op {
                op,
                weight: weight.flatten().map(|(b, _)| b),
                args: operands.iter().filter_map(|(v, _)| *v).collect(),
                attrs,
                results: results.clone(),
                tokens: tokens.clone(),
            });
        }
        results.into_iter().map(Some).collect()
    }

    fn finish(mut self) -> Result<Kernel<'a>, Failure<'a>> {
        self.report_unused();
        let buffers: Option<Vec<Buffer>> = self.buffers.into_iter().collect();
        let buffers = buffers.filter(|_| self.decls_ok);
        let collective = self.collective;
        let mut errors = self.errors.into_iter();
        if let Some(mut error) = errors.next() {
            error.extend(errors);
            return Err(Failure {
                error,
                buffers,
                collective,
            });
        }
        match buffers {
            Some(buffers) => Ok(Kernel {
                def: self.def,
                buffers,
                steps: self.steps,
                collective,
            }),
            None => {
                let error = Error::new_spanned(&self.def.name, "a parameter did not resolve");
                Err(Failure {
                    error,
                    buffers: None,
                    collective,
                })
            }
        }
    }

    /// Outputs never written, inputs never read, values never used, and a parameter named like
    /// the argument struct's `peers` field.
    fn report_unused(&mut self) {
        for (b, decl) in self.decls.iter().enumerate() {
            let name = &decl.name;
            let msg = match decl.role {
                _ if self.collective && *name == "peers" => {
                    self.decls_ok = false;
                    "in a kernel with an allreduce, `peers` names the TP group's peers in the \
                     argument struct: rename this parameter"
                        .to_owned()
                }
                Role::Out if self.written[b].is_none() => format!(
                    "output `{name}` is never written: write it exactly once with `{name} = …;`"
                ),
                Role::In if !self.used[b] => format!("input `{name}` is never read"),
                _ => continue,
            };
            self.errors.push(Error::new_spanned(name, msg));
        }
        for l in self.lets.iter().filter(|l| !l.used) {
            let msg = format!(
                "value `{}` is never used: nothing it computes reaches an output",
                l.ident
            );
            self.errors.push(Error::new_spanned(l.ident, msg));
        }
    }
}
