// The typed host API: a column-parallel shard bound where the kernel declares a row-parallel
// weight is a Rust type error (DESIGN.md §5.6).
use wavefuse::host::{ColParallel, Gptq, Input, Output, Peers, Replicated, f16};
use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};

wavefuse::kernel! {
    pub fn down(tp: u32, batch: usize, k: usize, layout: GptqLayout) across tp {
        in w_down: gptq(layout)[k, 5120] row_parallel;
        in x: f16[batch, k] col_parallel;
        out y: f16[batch, 5120];

        y = round_f16(allreduce(gemv.row(w_down, x)));
    }
}

fn main() {
    let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
    let (qweight, scales, qzeros) = (vec![0i32; 0], vec![f16::ZERO; 0], vec![0i32; 0]);
    let w: Gptq<ColParallel> = Gptq::new(layout, &qweight, &scales[..], &qzeros, None);
    let x = vec![f16::ZERO; 4352];
    let mut y = vec![f16::ZERO; 5120];
    let _args = DownArgs {
        w_down: w,
        x: Input::new(&x),
        y: Output::<f16, Replicated>::new(&mut y),
        peers: Peers::new(0, &[0, 0, 0, 0]).unwrap(),
    };
}
