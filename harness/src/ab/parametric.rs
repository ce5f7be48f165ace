//! Parametric ABI descriptions of hand-written kernels: one file per kernel and target whose
//! shape-dependent values are expressions over the generated kernel's shapes, instantiated for
//! the shape a run needs (instead of one hand-kept file per shape).
//!
//! # The format
//! A hand-written ABI description (see [`super::handwritten`]) with `parametric = true` at the
//! top. Then:
//! - a string value that starts with `=` is an integer expression, replaced by its value (`grid =
//!   "= w.n / 32"`), or, for `= range(e)`, by the array `[0, 1, …, e − 1]`;
//! - in any other string, `{e}` is replaced by the value of `e` (`"WF_N={w.n}"`);
//! - a table in an array of tables (`[[wait_sites]]`) with `repeat = "= e"` stands for `e`
//!   copies of itself, the copy's index bound to `i` (0, 1, …); an array left empty is absent;
//! - a `[[params]]` entry with a `len` and no `bytes` gets `bytes = len × size of ty`.
//!
//! Expressions: integers, `+ - * /` (a division must be exact: a shape that does not divide is
//! an error, not a truncated launch), parentheses, `min(a, b)`, `max(a, b)`, and the variables of
//! [`Bindings::of`]: `tp`, `batch`, `eps` (text: the first RMSNorm's epsilon as the IR prints it),
//! and per op-level buffer `NAME`: `NAME.k`, `NAME.n`, `NAME.group` (a weight, as one rank holds
//! it), `NAME.rows`, `NAME.cols` (a tensor, as one rank holds it; a vector has one row).
//!
//! The evaluator is a few dozen lines written here: the language is four operators over
//! integers with exact division, which no general expression crate offers as such.

use std::collections::BTreeMap;

use wavefuse::ir::{BufferType, Kernel, OpKind, WeightFormat};
use wavefuse_codegen::abi::AbiTy;

/// A variable's value.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Int(i64),
    Text(String),
}

/// The variables a parametric description is instantiated with.
#[derive(Clone, Debug, Default)]
pub struct Bindings(BTreeMap<String, Val>);

impl Bindings {
    /// The integer variable `name` (`batch`, `tp`, `w.k`, …), if bound.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.0.get(name) {
            Some(Val::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// The shapes of `ir` as one rank sees them (see the module docs for the names).
    pub fn of(ir: &Kernel) -> Bindings {
        let mut b = BTreeMap::new();
        let int = |v: usize| Val::Int(v as i64);
        b.insert("tp".into(), int(ir.tp() as usize));
        let mut batch = None;
        for (_, d) in ir.buffers() {
            let name = &d.name;
            match d.local_type() {
                BufferType::Weight(w) => {
                    b.insert(format!("{name}.k"), int(w.k));
                    b.insert(format!("{name}.n"), int(w.n));
                    let group = match w.format {
                        WeightFormat::Gptq(l) => Some(l.group.rows(w.k)),
                        WeightFormat::Awq(l) => Some(l.group.rows(w.k)),
                        WeightFormat::F16 => None,
                    };
                    if let Some(g) = group {
                        b.insert(format!("{name}.group"), int(g));
                    }
                }
                BufferType::Tensor(t) => {
                    let cols = t.shape.last().copied().unwrap_or(1);
                    let rows = if t.shape.len() >= 2 { t.shape[0] } else { 1 };
                    if t.shape.len() >= 2 {
                        batch.get_or_insert(rows);
                    }
                    b.insert(format!("{name}.rows"), int(rows));
                    b.insert(format!("{name}.cols"), int(cols));
                }
            }
        }
        b.insert("batch".into(), int(batch.unwrap_or(1)));
        if let Some(eps) = ir.ops().find_map(|(_, o)| match &o.kind {
            OpKind::RmsNorm(r) => Some(r.eps),
            _ => None,
        }) {
            // As the IR prints it (`eps=1e-6`).
            b.insert("eps".into(), Val::Text(format!("{eps:e}")));
        }
        Bindings(b)
    }

    /// [`Bindings::of`] plus the op-level shape's plain names, for the `value`, `grid` and
    /// `workgroup_size` expressions of a hand-written description
    /// ([`super::handwritten`]): with exactly one weight `W`, `k`, `n` and `group_size` are
    /// `W.k`, `W.n`, `W.group`.
    pub fn shape_of(ir: &Kernel) -> Bindings {
        let mut b = Bindings::of(ir);
        let weights: Vec<String> =
            b.0.keys()
                .filter_map(|k| k.strip_suffix(".k").map(str::to_owned))
                .collect();
        if let [w] = weights.as_slice() {
            for (plain, full) in [("k", "k"), ("n", "n"), ("group_size", "group")] {
                if let Some(v) = b.0.get(&format!("{w}.{full}")).cloned() {
                    b.0.insert(plain.into(), v);
                }
            }
        }
        b
    }

    fn with(&self, name: &str, v: i64) -> Bindings {
        let mut b = self.clone();
        b.0.insert(name.into(), Val::Int(v));
        b
    }
}

/// Whether `text` (a TOML description) is parametric.
pub fn is_parametric(text: &str) -> bool {
    text.parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("parametric").and_then(|v| v.as_bool()))
        .unwrap_or(false)
}

/// `text` instantiated with `b` (unchanged when it is not parametric), as TOML text.
pub fn instantiate(text: &str, b: &Bindings) -> Result<String, ParametricError> {
    let mut table: toml::Table = text
        .parse()
        .map_err(|e| ParametricError::Toml(format!("{e}")))?;
    if table.remove("parametric").and_then(|v| v.as_bool()) != Some(true) {
        return Ok(text.to_owned());
    }
    let mut out = toml::Table::new();
    for (k, v) in table {
        let repeated = matches!(&v, toml::Value::Array(a) if !a.is_empty());
        let v = value(v, b).map_err(|e| e.at(&k))?;
        // An array of tables all repeated zero times is absent at this shape (no wait sites).
        if repeated && v.as_array().is_some_and(|a| a.is_empty()) {
            continue;
        }
        out.insert(k.clone(), v);
    }
    if let Some(toml::Value::Array(params)) = out.get_mut("params") {
        for p in params.iter_mut().filter_map(|p| p.as_table_mut()) {
            fill_bytes(p)?;
        }
    }
    toml::to_string(&out).map_err(|e| ParametricError::Toml(e.to_string()))
}

/// Why a parametric description does not instantiate.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParametricError {
    /// The description is not TOML, or its instantiation could not be written as TOML.
    #[error("{0}")]
    Toml(String),
    /// In the value of the key `key`.
    #[error("`{key}`: {source}")]
    At {
        /// The key.
        key: String,
        /// What went wrong in its value.
        source: Box<ParametricError>,
    },
    /// A parameter's `ty` is not an ABI type.
    #[error("parameter type: {0}")]
    ParamType(String),
    /// `repeat` is neither `= expr` nor an integer.
    #[error("`repeat` must be `= expr`, not {0}")]
    Repeat(String),
    /// A text value with `{` and no `}`.
    #[error("`{0}`: an unclosed `{{`")]
    Unclosed(String),
    /// An expression that does not evaluate.
    #[error("`{expr}`: {problem}")]
    Expr {
        /// The expression.
        expr: String,
        /// What is wrong with it.
        problem: ExprProblem,
    },
}

impl ParametricError {
    /// This error, in the value of the key `key`.
    fn at(self, key: &str) -> ParametricError {
        ParametricError::At {
            key: key.to_owned(),
            source: Box::new(self),
        }
    }
}

/// What is wrong with an expression.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExprProblem {
    /// A character outside the language.
    #[error("unexpected character `{0}`")]
    Character(char),
    /// A token after a complete expression.
    #[error("unexpected `{0}`")]
    Trailing(String),
    /// No expression at all.
    #[error("empty")]
    Empty,
    /// An operand or argument that is not there.
    #[error("{0}")]
    Missing(&'static str),
    /// A division with a remainder (or by zero).
    #[error("{0} / {1} is not exact")]
    Inexact(i64, i64),
    /// `cdiv` by zero or a negative number.
    #[error("cdiv({0}, {1}): the divisor must be positive")]
    NonPositiveDivisor(i64, i64),
    /// A variable whose value is text.
    #[error("`{0}` is text, not a number")]
    Text(String),
    /// A variable the kernel does not have.
    #[error("unknown variable `{name}` (this kernel has: {known})")]
    Unknown {
        /// The variable.
        name: String,
        /// The kernel's variables, comma-separated.
        known: String,
    },
    /// A token that is not the one the grammar needs.
    #[error("expected `{0}`")]
    Expected(String),
}

/// `bytes = len × size of ty` where a parameter gives `len` only.
fn fill_bytes(p: &mut toml::Table) -> Result<(), ParametricError> {
    if p.contains_key("bytes") {
        return Ok(());
    }
    let (Some(len), Some(ty)) = (p.get("len").and_then(|v| v.as_integer()), p.get("ty")) else {
        return Ok(());
    };
    let ty: AbiTy = ty
        .clone()
        .try_into()
        .map_err(|e| ParametricError::ParamType(e.to_string()))?;
    p.insert(
        "bytes".into(),
        toml::Value::Integer(len * ty.bytes() as i64),
    );
    Ok(())
}

fn value(v: toml::Value, b: &Bindings) -> Result<toml::Value, ParametricError> {
    Ok(match v {
        toml::Value::String(s) => match s.strip_prefix('=') {
            Some(e) => match e
                .trim()
                .strip_prefix("range(")
                .and_then(|r| r.strip_suffix(')'))
            {
                Some(n) => {
                    let n = eval(n, b)?;
                    toml::Value::Array((0..n).map(toml::Value::Integer).collect())
                }
                None => toml::Value::Integer(eval(e, b)?),
            },
            None => toml::Value::String(substitute(&s, b)?),
        },
        toml::Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    toml::Value::Table(mut t) if t.contains_key("repeat") => {
                        let n = match t.remove("repeat") {
                            Some(toml::Value::String(s)) if s.starts_with('=') => eval(&s[1..], b)?,
                            Some(toml::Value::Integer(n)) => n,
                            other => {
                                return Err(ParametricError::Repeat(format!("{other:?}")));
                            }
                        };
                        for i in 0..n.max(0) {
                            out.push(value(toml::Value::Table(t.clone()), &b.with("i", i))?);
                        }
                    }
                    other => out.push(value(other, b)?),
                }
            }
            toml::Value::Array(out)
        }
        toml::Value::Table(t) => {
            let mut out = toml::Table::new();
            for (k, v) in t {
                out.insert(k.clone(), value(v, b).map_err(|e| e.at(&k))?);
            }
            toml::Value::Table(out)
        }
        other => other,
    })
}

/// `{e}` in `s` replaced by the value of `e`.
fn substitute(s: &str, b: &Bindings) -> Result<String, ParametricError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or_else(|| ParametricError::Unclosed(s.to_owned()))?;
        let e = rest[open + 1..close].trim();
        match b.0.get(e) {
            Some(Val::Text(t)) => out.push_str(t),
            _ => out.push_str(&eval(e, b)?.to_string()),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of the integer expression `e` (the language of the module docs, without the `=`).
pub fn eval_expr(e: &str, b: &Bindings) -> Result<i64, ParametricError> {
    eval(e, b)
}

/// The value of the integer expression `e`.
fn eval(e: &str, b: &Bindings) -> Result<i64, ParametricError> {
    let problem = |problem| ParametricError::Expr {
        expr: e.to_owned(),
        problem,
    };
    let tokens = lex(e).map_err(problem)?;
    let mut p = Parser {
        t: &tokens,
        at: 0,
        b,
    };
    let v = p.sum().map_err(problem)?;
    if p.at != tokens.len() {
        return Err(problem(ExprProblem::Trailing(tokens[p.at].clone())));
    }
    v.ok_or_else(|| problem(ExprProblem::Empty))
}

fn lex(e: &str) -> Result<Vec<String>, ExprProblem> {
    let mut out = Vec::new();
    let mut chars = e.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    w.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(w);
        } else if "+-*/(),".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else {
            return Err(ExprProblem::Character(c));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    t: &'a [String],
    at: usize,
    b: &'a Bindings,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.t.get(self.at).map(String::as_str)
    }

    fn sum(&mut self) -> Result<Option<i64>, ExprProblem> {
        let Some(mut v) = self.product()? else {
            return Ok(None);
        };
        while let Some(op @ ("+" | "-")) = self.peek() {
            let plus = op == "+";
            self.at += 1;
            let r = self
                .product()?
                .ok_or(ExprProblem::Missing("a term after `+`/`-`"))?;
            v = if plus { v + r } else { v - r };
        }
        Ok(Some(v))
    }

    fn product(&mut self) -> Result<Option<i64>, ExprProblem> {
        let Some(mut v) = self.atom()? else {
            return Ok(None);
        };
        while let Some(op @ ("*" | "/")) = self.peek() {
            let times = op == "*";
            self.at += 1;
            let r = self
                .atom()?
                .ok_or(ExprProblem::Missing("a factor after `*`/`/`"))?;
            v = if times {
                v * r
            } else if r == 0 || v % r != 0 {
                return Err(ExprProblem::Inexact(v, r));
            } else {
                v / r
            };
        }
        Ok(Some(v))
    }

    fn atom(&mut self) -> Result<Option<i64>, ExprProblem> {
        let Some(tok) = self.peek().map(str::to_owned) else {
            return Ok(None);
        };
        self.at += 1;
        if tok == "(" {
            let v = self
                .sum()?
                .ok_or(ExprProblem::Missing("an expression in `( )`"))?;
            self.expect(")")?;
            return Ok(Some(v));
        }
        if tok == "-" {
            return Ok(Some(
                -self
                    .atom()?
                    .ok_or(ExprProblem::Missing("a factor after `-`"))?,
            ));
        }
        if let Ok(n) = tok.parse::<i64>() {
            return Ok(Some(n));
        }
        if tok == "min" || tok == "max" || tok == "cdiv" {
            self.expect("(")?;
            let a = self
                .sum()?
                .ok_or(ExprProblem::Missing("min/max/cdiv takes two arguments"))?;
            self.expect(",")?;
            let c = self
                .sum()?
                .ok_or(ExprProblem::Missing("min/max/cdiv takes two arguments"))?;
            self.expect(")")?;
            return Ok(Some(match tok.as_str() {
                "min" => a.min(c),
                "max" => a.max(c),
                // The one rounded division: how many tiles of `c` cover `a`.
                _ if c > 0 => (a + c - 1).div_euclid(c),
                _ => return Err(ExprProblem::NonPositiveDivisor(a, c)),
            }));
        }
        match self.b.0.get(&tok) {
            Some(Val::Int(v)) => Ok(Some(*v)),
            Some(Val::Text(_)) => Err(ExprProblem::Text(tok)),
            None => Err(ExprProblem::Unknown {
                name: tok,
                known: self.b.0.keys().cloned().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), ExprProblem> {
        if self.peek() == Some(tok) {
            self.at += 1;
            Ok(())
        } else {
            Err(ExprProblem::Expected(tok.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bindings() -> Bindings {
        let mut b = Bindings::default();
        for (k, v) in [("tp", 4), ("batch", 1), ("w.n", 4352), ("w.k", 5120)] {
            b.0.insert(k.into(), Val::Int(v));
        }
        b.0.insert("eps".into(), Val::Text("1e-6".into()));
        b
    }

    #[test]
    fn expressions_evaluate_with_exact_division() {
        let b = bindings();
        assert_eq!(eval("w.n / 32", &b), Ok(136));
        assert_eq!(eval("2 * (w.k + 1) - 2", &b), Ok(10240));
        assert_eq!(eval("tp * min(tp - 1, 1)", &b), Ok(4));
        assert_eq!(eval("max(tp, 8)", &b), Ok(8));
        assert_eq!(eval("cdiv(w.n, 1000)", &b), Ok(5));
        assert_eq!(eval("cdiv(tp, 4)", &b), Ok(1));
        assert!(
            eval("cdiv(tp, 0)", &b)
                .unwrap_err()
                .to_string()
                .contains("positive")
        );
        assert!(
            eval("w.n / 3", &b)
                .unwrap_err()
                .to_string()
                .contains("not exact")
        );
        assert!(
            eval("w.m", &b)
                .unwrap_err()
                .to_string()
                .contains("unknown variable `w.m`")
        );
        assert!(
            eval("eps + 1", &b)
                .unwrap_err()
                .to_string()
                .contains("text")
        );
        assert!(eval("1 +", &b).is_err());
        assert!(eval("(1", &b).is_err());
    }

    #[test]
    fn a_description_is_instantiated() {
        let text = r#"
parametric = true
grid = "= w.n / 32"
[build]
defines = ["WF_N={w.n}", "WF_EPS={eps}"]
[peer_table]
slots = "= range(tp)"
[[params]]
name = "y"
ty = "f16"
len = "= batch * w.n"
[[wait_sites]]
repeat = "= tp * min(tp - 1, 1)"
code = "= 1 + i"
[[wait_sites]]
code = "= tp * min(tp - 1, 1) + 1"
"#;
        let t: toml::Table = instantiate(text, &bindings()).unwrap().parse().unwrap();
        assert!(!t.contains_key("parametric"));
        assert_eq!(t["grid"].as_integer(), Some(136));
        assert_eq!(t["build"]["defines"][0].as_str(), Some("WF_N=4352"));
        assert_eq!(t["build"]["defines"][1].as_str(), Some("WF_EPS=1e-6"));
        assert_eq!(t["peer_table"]["slots"].as_array().unwrap().len(), 4);
        assert_eq!(t["params"][0]["bytes"].as_integer(), Some(8704));
        let codes: Vec<i64> = t["wait_sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["code"].as_integer().unwrap())
            .collect();
        assert_eq!(codes, [1, 2, 3, 4, 5]);
        // Not parametric: unchanged.
        assert_eq!(
            instantiate("grid = 5\n", &bindings()).unwrap(),
            "grid = 5\n"
        );
    }
}
