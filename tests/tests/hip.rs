//! The HIP back end on the kernel set (gfx906): snapshots `{kernel}@gfx906_tp{N}` of the generated
//! source (and `…_tp4.abi` of the ABI description), real hipcc compiles checked against the
//! committed budget (kernels-gen/budgets.toml), and llvm-objdump checks of the synchronisation
//! and the dequantisation.
//! Without hipcc: "skipped: hipcc not found", except under CI (`CI` set), where it fails.

use std::collections::BTreeSet;

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::{Abi, AbiPurpose};
use wavefuse_codegen::cpp::toolchain::{self, Tool};
use wavefuse_codegen::lowered::{AtomicOp, Invariant, Stmt};
use wavefuse_harness::generate::{self, CheckRow, Generated, Outcome, generate};
use wavefuse_kernels::KernelId;
use wavefuse_kernels::shapes::TP_SIZES;

const ARCH: Arch = Arch::Gfx906;

/// Kernels the lowering reports Unsupported for on gfx906 (at every TP). Asserted exactly, so a
/// kernel that starts (or stops) lowering is a visible change here.
const NOT_LOWERED: &[&str] = &[];

fn tool(t: Tool) -> bool {
    match toolchain::find(t) {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) => {
            panic!("CI must have {}: {e}", t.name())
        }
        Err(_) => {
            eprintln!("skipped: {} not found", t.name());
            false
        }
    }
}

/// Every kernel of the set at every TP size, or the names the lowering does not support.
fn generate_set() -> (Vec<Generated>, BTreeSet<&'static str>) {
    let (mut ok, mut unsupported) = (Vec::new(), BTreeSet::new());
    for id in KernelId::ALL {
        for tp in TP_SIZES {
            match generate(id, ARCH, tp, 1) {
                Ok(g) => ok.push(g),
                Err(e) if e.is_unsupported() => {
                    unsupported.insert(id.name());
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    for name in &unsupported {
        assert!(
            !ok.iter().any(|g| g.id.name() == *name),
            "{name} lowers at some TP sizes only"
        );
    }
    (ok, unsupported)
}

#[test]
fn hip_snapshots_of_the_kernel_set_gfx906() {
    let (set, unsupported) = generate_set();
    assert_eq!(
        unsupported,
        NOT_LOWERED.iter().copied().collect(),
        "the kernels the lowering does not support changed: update NOT_LOWERED"
    );
    for g in &set {
        insta::assert_snapshot!(format!("{}@gfx906_tp{}", g.id.name(), g.tp), g.source.text);
        if g.tp == 4 {
            let abi = g.abi.to_toml().expect("ABI serialises");
            insta::assert_snapshot!(format!("{}@gfx906_tp4.abi", g.id.name()), abi);
        }
    }
}

#[test]
fn synchronisation_carries_invariant_comments_gfx906() {
    let (set, _) = generate_set();
    for g in &set {
        let lines: Vec<&str> = g.source.text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            let sync = l.starts_with("__syncthreads()")
                || (l.starts_with("__hip_atomic") && !l.contains("timed out"))
                || l.contains("= __hip_atomic")
                || l.starts_with("__builtin_amdgcn_fence")
                || l.starts_with("{ // wait site");
            if sync {
                assert!(
                    lines[i - 1].starts_with("// §5."),
                    "{}@tp{}: `{l}` without an invariant comment",
                    g.id.name(),
                    g.tp
                );
            }
        }
    }
}

/// `wavefuse emit --out` writes the source and the ABI description; the description reads back,
/// names the symbol the source exports, lists the parameters in the order the signature declares
/// them, and records co-residency exactly for the kernels with a grid barrier.
#[test]
fn abi_matches_the_source_gfx906() {
    let (set, _) = generate_set();
    let scratch = toolchain::scratch_dir("hip-abi").expect("temp dir");
    let dir = scratch.path();
    for g in set.iter().filter(|g| g.tp == 4) {
        let name = g.id.name();
        let paths = generate::write_outputs(g, &dir).unwrap_or_else(|e| panic!("{e}"));
        let src = std::fs::read_to_string(&paths[0]).expect("source written");
        let abi = Abi::from_toml(&std::fs::read_to_string(&paths[1]).expect("ABI written"))
            .expect("ABI parses");
        assert_eq!(abi, g.abi);
        assert_eq!(
            paths[0].file_name().unwrap().to_str(),
            Some(abi.source.as_str())
        );
        let sig = &src[1 + src
            .find(&format!("\n{}(", abi.symbol))
            .unwrap_or_else(|| panic!("{name}: no symbol"))..];
        let sig = &sig[..sig.find("\n{").expect("body")];
        let declared: Vec<&str> = sig
            .lines()
            .skip(1)
            .map(|l| {
                l.split("//")
                    .next()
                    .unwrap()
                    .trim()
                    .trim_end_matches([',', ')'])
            })
            .map(|decl| decl.rsplit(' ').next().unwrap())
            .collect();
        let described: Vec<&str> = abi.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(declared, described, "{name}: signature and ABI disagree");
        let grid_barrier = abi.params.iter().any(|p| p.purpose == AbiPurpose::Counter);
        assert_eq!(
            abi.coresidency.is_some(),
            grid_barrier,
            "{name}: co-residency"
        );
        if let Some(c) = &abi.coresidency {
            assert_eq!(c.workgroups, abi.grid);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4)
}

/// Every kernel at every TP compiles with hipcc within its budget; then, at TP = 4, the machine
/// code has what the source asks for: one `global_atomic_add` per grid barrier (the elected
/// arrival) inside an exec-masked branch after a store wait, every acquire load (glc) followed
/// by an L1 invalidate (`buffer_wbinvl1_vol`), and the INT4 dequantisation on the instructions the
/// lowering chose (`v_bfe_u32`/`v_cvt_f32_ubyte0` for the nibbles, `v_fma_mix_f32` folding the FP16
/// activation conversion into the accumulation). One test, so the set is compiled once.
#[test]
fn hipcc_compiles_the_set_within_budget_gfx906() {
    if !tool(Tool::Hipcc) {
        return;
    }
    let budgets = generate::budgets().expect("kernels-gen/budgets.toml parses");
    let scratch = toolchain::scratch_dir("hip-check").expect("temp dir");
    let dir = scratch.path();
    let rows = generate::check_in(ARCH, &TP_SIZES, &budgets, jobs(), &dir).expect("hipcc runs");
    let table = generate::table(ARCH, &rows);
    println!("{table}");
    for r in &rows {
        match &r.outcome {
            Outcome::Compiled { verdict, .. } => {
                assert!(
                    verdict.ok(),
                    "{}@tp{}: {}\n{table}",
                    r.id.name(),
                    r.tp,
                    verdict.describe()
                );
                // The issue's explicit limits are in force for these two.
                let explicit = r.id == KernelId::GemvInt4
                    || (r.id == KernelId::GemvInt4AllreduceRmsnorm && r.tp == 4);
                assert!(
                    !explicit || verdict.entries >= 3,
                    "{}@tp{}: its own budget entries did not apply",
                    r.id.name(),
                    r.tp
                );
            }
            Outcome::Unsupported(_) => assert!(NOT_LOWERED.contains(&r.id.name()), "{table}"),
            Outcome::Failed(why) => panic!("{}@tp{}: {why}", r.id.name(), r.tp),
        }
    }
    if tool(Tool::LlvmObjdump) {
        let checked = rows
            .iter()
            .filter(|r| r.tp == 4)
            .filter_map(machine_code)
            .count();
        assert_eq!(checked + NOT_LOWERED.len(), KernelId::ALL.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn machine_code(r: &CheckRow) -> Option<()> {
    let Outcome::Compiled {
        generated,
        compiled,
        ..
    } = &r.outcome
    else {
        return None;
    };
    let name = r.id.name();
    let text = toolchain::disassemble(&compiled.object, ARCH).unwrap_or_else(|e| panic!("{e}"));
    let ins = instructions(&text);
    let arrivals = count_arrivals(&generated.lowered.body);
    let adds: Vec<usize> = ins
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("global_atomic_add "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        adds.len(),
        arrivals,
        "{name}: {} global_atomic_add for {arrivals} grid-barrier arrivals",
        adds.len()
    );
    for &a in &adds {
        let mask = ins[..a]
            .iter()
            .rposition(|l| l.starts_with("s_and_saveexec_b64"))
            .unwrap_or_else(|| panic!("{name}: arrival not under an exec mask"));
        assert!(
            !ins[mask..a].iter().any(|l| l.starts_with("s_or_b64 exec")),
            "{name}: arrival outside its lane-0 branch"
        );
        assert!(
            ins[mask..a]
                .iter()
                .any(|l| l.starts_with("s_waitcnt vmcnt(0)")),
            "{name}: release without a store wait"
        );
    }
    let mut acquires = 0;
    for (i, l) in ins.iter().enumerate() {
        if l.starts_with("global_load_dword ") && l.contains(" glc") {
            acquires += 1;
            let next = &ins[i + 1..(i + 4).min(ins.len())];
            assert!(
                next.iter().any(|n| n.starts_with("buffer_wbinvl1_vol")),
                "{name}: acquire load without an L1 invalidate"
            );
        }
    }
    let waits = generated.abi.wait_sites.len();
    assert!(
        acquires >= waits,
        "{name}: {acquires} acquire loads for {waits} wait sites"
    );
    if name.starts_with("gemv_int4") {
        let count = |op: &str| ins.iter().filter(|l| l.starts_with(op)).count();
        let nibbles = count("v_bfe_u32") + count("v_cvt_f32_ubyte");
        assert!(
            nibbles >= 8,
            "{name}: {nibbles} nibble extractions (v_bfe_u32 / v_cvt_f32_ubyte*)"
        );
        assert!(
            count("v_fma_mix_f32") >= 8,
            "{name}: the FP16 activations are not folded into v_fma_mix_f32"
        );
    }
    Some(())
}

/// Elected grid-barrier arrivals in the lowered body.
fn count_arrivals(block: &[Stmt]) -> usize {
    block
        .iter()
        .map(|s| match s {
            Stmt::Atomic {
                op: AtomicOp::Add,
                why: Invariant::OneArrivalPerWorkgroup,
                ..
            } => 1,
            Stmt::For { body, .. } => count_arrivals(body),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => count_arrivals(then_body) + count_arrivals(else_body),
            _ => 0,
        })
        .sum()
}

fn instructions(disasm: &str) -> Vec<String> {
    disasm
        .lines()
        .filter(|l| l.starts_with('\t'))
        .map(|l| l.split("//").next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The hot loop of a disassembly (`llvm-objdump -d`): the longest range from a backward branch's
/// target to the branch. Returns its instruction mnemonics.
fn hot_loop(disasm: &str) -> Vec<String> {
    // Each instruction line ends with `// <address>: <encoding>`; branches add `<sym+0xOFF>`.
    let mut ins: Vec<(u64, String)> = Vec::new();
    let mut base = None;
    for l in disasm.lines() {
        if l.ends_with(">:") {
            base = u64::from_str_radix(l.split_whitespace().next().unwrap_or(""), 16).ok();
            continue;
        }
        let Some((code, comment)) = l.split_once("//") else {
            continue;
        };
        let Some(addr) = comment
            .trim()
            .split(':')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let target = comment
            .split('<')
            .nth(1)
            .and_then(|t| t.split("+0x").nth(1))
            .and_then(|o| u64::from_str_radix(o.trim_end_matches('>'), 16).ok())
            .zip(base)
            .map(|(off, b)| b + off);
        let m = code.split_whitespace().next().unwrap_or("").to_owned();
        ins.push((addr, m.clone()));
        if let Some(t) = target.filter(|&t| t <= addr && m.starts_with("s_cbranch")) {
            ins.last_mut().expect("pushed").1 = format!("{m}@{t}");
        }
    }
    let mut best: Vec<String> = Vec::new();
    for (i, (_, m)) in ins.iter().enumerate() {
        if let Some(t) = m.split_once('@').and_then(|(_, t)| t.parse::<u64>().ok()) {
            let start = ins.iter().position(|(a, _)| *a >= t).unwrap_or(i);
            if i + 1 - start > best.len() {
                best = ins[start..=i]
                    .iter()
                    .map(|(_, m)| m.split('@').next().unwrap_or("").to_owned())
                    .collect();
            }
        }
    }
    best
}

/// The INT4 dot2 path (`int4_dot = dot2`, `v_dot2_f32_f16`) compiles with hipcc for gfx906
/// without scratch, its hot loop has the dot2 instructions, and it issues far fewer VALU
/// instructions per weight than the default FMA path (the weights of one loop iteration are
/// counted in the ISA itself: one `v_fma_mix_f32` per weight on the FMA path, two weights per
/// `v_dot2_f32_f16`). Prints both, the numbers the README quotes.
#[test]
fn dot2_gemv_issues_fewer_valu_instructions_per_weight_gfx906() {
    use wavefuse_codegen::cpp;
    use wavefuse_codegen::lower::{Int4Dot, Schedule, lower};
    use wavefuse_kernels::Shapes;
    if !tool(Tool::Hipcc) || !tool(Tool::LlvmObjdump) {
        return;
    }
    let k = KernelId::GemvInt4.build(&Shapes::qwen27b(4));
    let d = Schedule::default_for(ARCH, &k);
    let dot2 = |v: u32, unit: u32| Schedule {
        int4_dot: Int4Dot::Dot2,
        words_per_iteration: v,
        columns_per_workgroup: d.columns_per_workgroup * v,
        k_unit_words: unit,
        ..d.clone()
    };
    let scratch = toolchain::scratch_dir("hip-dot2").expect("temp dir");
    let dir = scratch.path();
    let mut per_weight = Vec::new();
    for (what, s) in [
        ("default (fma)", d.clone()),
        ("dot2, 1 word/lane, unit 2", dot2(1, 2)),
        ("dot2, 2 words/lane, unit 2", dot2(2, 2)),
    ] {
        let lowered = lower(&k, ARCH, &s).unwrap_or_else(|e| panic!("{what}: {e}"));
        let src = cpp::emit(&lowered).expect("writes");
        let sub = dir.join(what.replace([' ', ',', '/', '(', ')'], "_"));
        let c = toolchain::compile(&src, lowered.workgroup_size, &sub).expect("hipcc");
        assert_eq!(c.resources.scratch_bytes, 0, "{what}: scratch");
        let text = toolchain::disassemble(&c.object, ARCH).expect("objdump");
        let lp = hot_loop(&text);
        let n = |op: &str| lp.iter().filter(|m| m.starts_with(op)).count();
        // (the dot2 path's per-unit scaling folds the FP16 scale into one v_fma_mix_f32 per
        // column word: not a weight)
        let weights = match n("v_dot2_f32_f16") {
            0 => n("v_fma_mix_f32"),
            d => 2 * d,
        };
        let valu = n("v_");
        assert!(weights > 0, "{what}: no dot products in the hot loop");
        let r = valu as f64 / weights as f64;
        println!(
            "{what}: hot loop {} instructions, {valu} VALU, {weights} weights per lane: {r:.2} VALU per weight; {} VGPRs, occupancy {}",
            lp.len(),
            c.resources.vgprs,
            c.resources.occupancy
        );
        per_weight.push(r);
    }
    assert!(
        per_weight[1] < 0.7 * per_weight[0] && per_weight[2] < 0.7 * per_weight[0],
        "dot2 does not cut the VALU instructions per weight: {per_weight:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
