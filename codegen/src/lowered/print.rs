//! Textual form of the lowered level, for debugging and review.

use std::fmt::{self, Write as _};

use wavefuse_ir::{Ordering, Scope};

use super::{Base, BinOp, Expr, LoweredKernel, MemRef, ParamKind, Special, Stmt, UnOp};

pub(crate) fn ordering(o: Ordering) -> &'static str {
    match o {
        Ordering::Relaxed => "relaxed",
        Ordering::Acquire => "acquire",
        Ordering::Release => "release",
        Ordering::AcqRel => "acq_rel",
        Ordering::SeqCst => "seq_cst",
    }
}

pub(crate) fn scope(s: Scope) -> &'static str {
    match s {
        Scope::Wave => "wave",
        Scope::Workgroup => "workgroup",
        Scope::Agent => "agent",
        Scope::System => "system",
    }
}

fn bin(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Min => "min",
        BinOp::Max => "max",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Ge => ">=",
        BinOp::Gt => ">",
    }
}

/// Render an expression.
pub fn expr(e: &Expr) -> String {
    match e {
        Expr::Int(v, ty) => format!("{v}{}", ty.name()),
        Expr::Float(v, ty) => format!("{v:?}{}", ty.name()),
        Expr::Reg(r) => r.to_string(),
        Expr::Param(p) => p.to_string(),
        Expr::Special(s) => match s {
            Special::LocalId => "local_id",
            Special::WorkgroupId => "wg_id",
            Special::NumWorkgroups => "num_wgs",
            Special::LaneId => "lane_id",
            Special::WaveId => "wave_id",
        }
        .to_owned(),
        Expr::Bin(op @ (BinOp::Min | BinOp::Max), a, b) => {
            format!("{}({}, {})", bin(*op), expr(a), expr(b))
        }
        Expr::Bin(op, a, b) => format!("({} {} {})", expr(a), bin(*op), expr(b)),
        Expr::Un(op, a) => {
            let name = match op {
                UnOp::Neg => "neg",
                UnOp::Not => "not",
                UnOp::Abs => "abs",
                UnOp::Exp => "exp",
                UnOp::Rsqrt => "rsqrt",
            };
            format!("{name}({})", expr(a))
        }
        Expr::Cast(ty, a) => format!("{}({})", ty.name(), expr(a)),
        Expr::Bitcast(ty, a) => format!("bitcast<{}>({})", ty.name(), expr(a)),
        Expr::PackHalf2(a, b) => format!("pack_half2({}, {})", expr(a), expr(b)),
        Expr::SubHalf2(a, b) => format!("sub_half2({}, {})", expr(a), expr(b)),
        Expr::FmaHalf2(a, b, c) => format!("fma_half2({}, {}, {})", expr(a), expr(b), expr(c)),
        Expr::Dot2F16(a, b, c) => format!("dot2_f16({}, {}, {})", expr(a), expr(b), expr(c)),
        Expr::Dot4I8(a, b, c) => format!("dot4_i8({}, {}, {})", expr(a), expr(b), expr(c)),
        Expr::Select(c, a, b) => format!("({} ? {} : {})", expr(c), expr(a), expr(b)),
        Expr::Bfe {
            value,
            offset,
            width,
        } => format!("bfe({}, {}, {width})", expr(value), expr(offset)),
        Expr::Fma(a, b, c) => format!("fma({}, {}, {})", expr(a), expr(b), expr(c)),
    }
}

pub(crate) fn mem(m: &MemRef) -> String {
    match &m.base {
        Base::Param(p) => format!("{p}[{}]", expr(&m.index)),
        Base::Peer { param, rank } => format!("{param}@peer({})[{}]", expr(rank), expr(&m.index)),
        Base::Lds(l) => format!("{l}[{}]", expr(&m.index)),
    }
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn stmts(out: &mut String, block: &[Stmt], depth: usize) {
    let pad = "    ".repeat(depth);
    for s in block {
        let line = match s {
            Stmt::Assign { dst, value } => format!("{dst} = {}", expr(value)),
            Stmt::Load { dst, mem: m } => format!(
                "{} = load.x{} {}",
                list(dst, |r| r.to_string()),
                dst.len(),
                mem(m)
            ),
            Stmt::Store { mem: m, values } => {
                format!("store.x{} {}, {}", values.len(), mem(m), list(values, expr))
            }
            Stmt::PrefetchL2 { mem: m } => format!("prefetch.l2 {}", mem(m)),
            Stmt::AsyncCopy { dst, src, words } => {
                format!("async_copy.x{words} {}, {}", mem(dst), mem(src))
            }
            Stmt::AsyncCommit => "async_commit".to_owned(),
            Stmt::AsyncWait { pending } => format!("async_wait {pending}"),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let _ = writeln!(
                    out,
                    "{pad}for {var} in {}..{} step {} {{",
                    expr(start),
                    expr(end),
                    expr(step)
                );
                stmts(out, body, depth + 1);
                "}".to_owned()
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let _ = writeln!(out, "{pad}if {} {{", expr(cond));
                stmts(out, then_body, depth + 1);
                if !else_body.is_empty() {
                    let _ = writeln!(out, "{pad}}} else {{");
                    stmts(out, else_body, depth + 1);
                }
                "}".to_owned()
            }
            Stmt::WorkgroupBarrier => "workgroup_barrier".to_owned(),
            Stmt::Atomic {
                dst,
                op,
                mem: m,
                value,
                ordering: o,
                scope: sc,
                why,
            } => {
                let dst = dst.map(|d| format!("{d} = ")).unwrap_or_default();
                let value = value
                    .as_ref()
                    .map(|v| format!(", {}", expr(v)))
                    .unwrap_or_default();
                format!(
                    "{dst}atomic.{op:?} {}{value} {} {}    ; §5.{}",
                    mem(m),
                    ordering(*o),
                    scope(*sc),
                    why.number()
                )
                .to_lowercase()
            }
            Stmt::Fence {
                ordering: o,
                scope: sc,
                why,
            } => {
                format!(
                    "fence {} {}    ; §5.{}",
                    ordering(*o),
                    scope(*sc),
                    why.number()
                )
            }
            Stmt::WaitGe {
                mem: m,
                target,
                ordering: o,
                scope: sc,
                budget,
                error,
                code,
                why,
            } => format!(
                "wait_ge {}, {} {} {} budget={budget} on_timeout {} = {code}    ; §5.{}",
                mem(m),
                expr(target),
                ordering(*o),
                scope(*sc),
                self::mem(error),
                why.number()
            ),
            Stmt::WaveReduce { dst, op, value } => {
                format!("{dst} = wave_reduce.{op:?} {}", expr(value)).to_lowercase()
            }
            Stmt::MmaF16 { acc, a, b } => format!(
                "{{{}}} += mma.m16n8k16.f16.f32 {{{}}} x {{{}}}",
                list(acc, |r| r.to_string()),
                list(a, |r| r.to_string()),
                list(b, |r| r.to_string())
            ),
            Stmt::GridBarrier { counter, index } => {
                format!("grid_barrier #{index} {}", mem(counter))
            }
            Stmt::PublishFlag { flag, round } => format!("publish_flag #{round} {}", mem(flag)),
            Stmt::WaitFlag { flag, round } => format!("wait_flag #{round} {}", mem(flag)),
            Stmt::WaitFlagPerLane {
                flag,
                lanes,
                cond,
                round,
            } => format!(
                "wait_flag_per_lane #{round} lanes<{lanes} if {} {}",
                expr(cond),
                mem(flag)
            ),
            Stmt::Comment(c) => format!("// {c}"),
            Stmt::SchedBarrier => "sched_barrier".to_owned(),
            Stmt::StreamWait => "stream_wait".to_owned(),
        };
        let _ = writeln!(out, "{pad}{line}");
    }
}

impl fmt::Display for LoweredKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lowered {} @{} tp={} grid={} x {} lanes (wave {})",
            self.name,
            self.arch,
            self.tp,
            self.grid,
            self.workgroup_size,
            self.wave_size()
        )?;
        for (p, d) in self.params.iter() {
            let kind = match &d.kind {
                ParamKind::Array {
                    elem,
                    len,
                    space,
                    access,
                    purpose,
                } => {
                    format!(
                        "{}[{len}] @{} {access:?} {purpose:?}",
                        elem.name(),
                        space.name()
                    )
                }
                ParamKind::PeerArrays {
                    elem,
                    len,
                    access,
                    purpose,
                } => {
                    format!(
                        "peers x{} {}[{len}] {access:?} {purpose:?}",
                        self.tp,
                        elem.name()
                    )
                }
                ParamKind::Scalar { ty, purpose } => format!("{} {purpose:?}", ty.name()),
            };
            writeln!(f, "    {p} {}: {kind}", d.name)?;
        }
        for (l, d) in self.lds.iter() {
            writeln!(f, "    {l}: lds {}[{}]", d.elem.name(), d.len)?;
        }
        let mut body = String::new();
        stmts(&mut body, &self.body, 1);
        f.write_str(&body)
    }
}
