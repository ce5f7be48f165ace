//! The serial cross-slice reduction ([`Reduction::Serial`](super::super::Reduction::Serial)):
//! the K slices of a workgroup add their sums into one `[B][C]` f32 array per GEMV, one slice
//! after the other, instead of each storing into a `[slices][B][C]` array of its own.
//!
//! Slice 0 stores `0 + p0`; after a workgroup barrier slice 1 loads that, adds `p1` and stores
//! it back; after another barrier slice 2, and so on; after the last slice's barrier every point
//! reads its one value (`Lowering::slice_sum`). That is the sum `((0 + p0) + p1) + …` in slice
//! order, the float operations of [`Reduction::Slices`](super::super::Reduction::Slices), whose
//! readers add the slices' values in the same order from 0: the results are bit-identical. The
//! LDS is `slices` times smaller (at batch 32 on gfx906 it is what lets the GEMV's staged
//! activations fit beside it); the cost is `slices − 1` more workgroup barriers, once per
//! kernel, with one slice's lanes active between two of them.
//!
//! Each barrier upholds §5.2 (LDS is the workgroup's: slice t reads what slice t − 1's lanes
//! stored, which only a workgroup barrier makes visible to it, and slice t + 1 must not read
//! before slice t stored) and §5.8 (uniform control flow: the step loop's bounds are the
//! workgroup's; the slice test is inside, closed before each barrier).

use crate::lowered::{Expr, Reg, Stmt, Ty};

use super::{Lowering, add, comment, eq, f, for_loop, load, mul, r, store, u, when};

/// One lane's sums for the cross-slice reduction: `values` (adjacent columns) of GEMV `gemv` at
/// batch row `row`, tile column `col`, stored where `guard` holds (`None`: always).
pub(in crate::lower) struct SliceSums {
    pub gemv: usize,
    pub row: Expr,
    pub col: Expr,
    pub values: Vec<Expr>,
    pub guard: Option<Expr>,
}

impl Lowering<'_> {
    /// The serial reduction of `sums` (this lane's, of K slice `slice` of `self.t_red`), ending
    /// with the workgroup barrier after which every point reads its value.
    pub(in crate::lower) fn serial_slice_sums(
        &mut self,
        slice: Expr,
        sums: &[SliceSums],
        out: &mut Vec<Stmt>,
    ) {
        out.push(comment(format!(
            "cross-slice reduction, serial (reduction = serial): one [B][C] array per GEMV; slice 0 stores 0 + its sums, \
             then slices 1 to {} in turn add theirs, so the sum is ((0 + p0) + p1) + ... in slice order",
            self.t_red.saturating_sub(1)
        )));
        let mut first = Vec::new();
        for s in sums {
            let values = s.values.iter().map(|v| Expr::add(f(0.0), v.clone()));
            let st = store(self.red_at(s), values.collect());
            Self::guarded(s, vec![st], &mut first);
        }
        when(eq(slice.clone(), u(0)), first, out);
        Self::step_barrier(out);
        if self.t_red < 2 {
            return;
        }
        let step = self.k.reg(Ty::U32, "slice_step");
        let mut adds = Vec::new();
        for s in sums {
            let prev: Vec<Reg> = s
                .values
                .iter()
                .map(|_| self.k.reg(Ty::F32, "red"))
                .collect();
            let values = s.values.iter().zip(&prev);
            let sum = values.map(|(v, &p)| Expr::add(r(p), v.clone())).collect();
            let stmts = vec![load(prev, self.red_at(s)), store(self.red_at(s), sum)];
            Self::guarded(s, stmts, &mut adds);
        }
        let mut body = Vec::new();
        when(eq(slice, r(step)), adds, &mut body);
        Self::step_barrier(&mut body);
        out.push(for_loop(step, u(1), u(self.t_red), u(1), body));
    }

    /// `red[gemv]` at the point of `s` (its first column).
    fn red_at(&self, s: &SliceSums) -> crate::lowered::MemRef {
        let idx = add(mul(s.row.clone(), u(self.cols)), s.col.clone());
        self.lds_at(self.red[s.gemv], idx)
    }

    fn guarded(s: &SliceSums, stmts: Vec<Stmt>, out: &mut Vec<Stmt>) {
        match &s.guard {
            Some(g) => when(g.clone(), stmts, out),
            None => out.extend(stmts),
        }
    }

    fn step_barrier(out: &mut Vec<Stmt>) {
        out.push(comment(
            "this slice's sums are in LDS before the next slice adds to them or a point reads them (§5.2); the barrier is outside the slice test (§5.8)",
        ));
        out.push(Stmt::WorkgroupBarrier);
    }
}
