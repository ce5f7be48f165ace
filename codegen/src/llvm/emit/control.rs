//! Control flow: counted loops and if/else.

use super::*;

impl<'c> Emitter<'c, '_> {
    pub(super) fn for_loop(
        &mut self,
        var: Reg,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &Block,
    ) -> Result<(), Error> {
        let s = self.expr(start)?;
        self.set(var, s)?;
        let head = self.block_named("for.head");
        let inner = self.block_named("for.body");
        let exit = self.block_named("for.exit");
        self.b.build_unconditional_branch(head).map_err(be)?;
        self.b.position_at_end(head);
        let cur = self.get(var)?;
        let e = self.expr(end)?;
        let c = self.binary_values(BinOp::Lt, cur, e)?;
        self.b
            .build_conditional_branch(c.v.into_int_value(), inner, exit)
            .map_err(be)?;
        self.b.position_at_end(inner);
        self.block(body)?;
        let cur = self.get(var)?;
        let st = self.expr(step)?;
        let n = self.binary_values(BinOp::Add, cur, st)?;
        self.set(var, n)?;
        self.b.build_unconditional_branch(head).map_err(be)?;
        self.b.position_at_end(exit);
        Ok(())
    }

    pub(super) fn if_else(
        &mut self,
        cond: &Expr,
        then_body: &Block,
        else_body: &Block,
    ) -> Result<(), Error> {
        let c = self.int(cond, Ty::Bool)?;
        let then_b = self.block_named("if.then");
        let else_b = if else_body.is_empty() {
            None
        } else {
            Some(self.block_named("if.else"))
        };
        let join = self.block_named("if.end");
        self.b
            .build_conditional_branch(c, then_b, else_b.unwrap_or(join))
            .map_err(be)?;
        self.b.position_at_end(then_b);
        self.block(then_body)?;
        self.b.build_unconditional_branch(join).map_err(be)?;
        if let Some(eb) = else_b {
            self.b.position_at_end(eb);
            self.block(else_body)?;
            self.b.build_unconditional_branch(join).map_err(be)?;
        }
        self.b.position_at_end(join);
        Ok(())
    }
}
