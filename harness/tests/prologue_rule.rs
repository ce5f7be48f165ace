//! The default's cost rule for a GEMV prologue (`lower::defaults::prologue_by_cost`) against the H200
//! measurements it was fitted on (`bench/results/2026-12-02-h200-prologue-batch`, CUDA graphs,
//! TP 1): at each measured point the rule picks the faster of recomputing and materialising.
//! The kernels are the run's own files; the expected choice is the measured winner.

use std::path::Path;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::parse;
use wavefuse_codegen::lower::Schedule;
use wavefuse_codegen::lower::defaults::prologue_by_cost;

fn kernel(name: &str) -> wavefuse_codegen::ir::Kernel {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/results/2026-12-02-h200-prologue-batch")
        .join(format!("{name}.wfir"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_prologue_rule_picks_the_measured_winner() {
    // (kernel, measured recompute µs, measured materialise µs): the best of two rounds each.
    let measured = [
        ("norm_gate_up_b1", 36.70, 43.39),
        ("norm_gate_up_b2", 47.21, 58.81),
        ("norm_gate_up_b4", 56.53, 62.40),
        ("norm_gate_up_b8", 82.11, 70.23),
        ("silu_down_b1", 23.44, 21.94),
        ("silu_down_b2", 27.61, 21.18),
        ("silu_down_b4", 33.46, 23.76),
    ];
    for (name, recompute_us, materialise_us) in measured {
        let ir = kernel(name);
        let s = Schedule::default_for(Arch::Sm90, &ir);
        let chosen = prologue_by_cost(&ir, Arch::Sm90, s, 1);
        assert_eq!(
            chosen.materialise_prologue,
            materialise_us < recompute_us,
            "{name}: measured recompute {recompute_us} µs, materialise {materialise_us} µs"
        );
    }
}

#[test]
fn gfx906_and_an_explicit_choice_are_left_alone() {
    let ir = kernel("silu_down_b4");
    let s = Schedule::default_for(Arch::Gfx906, &ir);
    assert!(!prologue_by_cost(&ir, Arch::Gfx906, s, 1).materialise_prologue);
    let asked = Schedule {
        materialise_prologue: true,
        ..Schedule::default_for(Arch::Sm90, &ir)
    };
    assert!(prologue_by_cost(&ir, Arch::Sm90, asked, 1).materialise_prologue);
}
