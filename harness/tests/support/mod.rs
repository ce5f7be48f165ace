//! Helpers shared by the simulator mutation tests.

use wavefuse_codegen::lowered::{Block, Stmt};

/// Apply `f` to every statement, depth first; `f` returns the statements that replace it.
pub fn rewrite(block: Block, f: &mut dyn FnMut(Stmt) -> Vec<Stmt>) -> Block {
    let mut out = Vec::new();
    for s in block {
        let s = match s {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => Stmt::If {
                cond,
                then_body: rewrite(then_body, f),
                else_body: rewrite(else_body, f),
            },
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => Stmt::For {
                var,
                start,
                end,
                step,
                body: rewrite(body, f),
            },
            s => s,
        };
        out.extend(f(s));
    }
    out
}
