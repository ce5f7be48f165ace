use super::hot_loop::in_flight;
use super::*;

fn inputs(valu_per_weight: f64, weights: f64, bytes: f64) -> ModelInputs {
    ModelInputs {
        valu_per_weight,
        weights,
        valu_outside_per_wave: 0.0,
        valu_per_pass_per_wave: 0.0,
        weight_passes: 1.0,
        other_valu_lane_instructions: 0.0,
        bytes,
        bytes_in_flight_per_wave: 8192.0,
        occupancy: 4,
        lds_bytes_per_workgroup: 0,
        dot_floor_lane_instructions: 0.0,
        dot_share: 0.0,
        grid: 272,
        workgroup_size: 256,
        grid_barriers: 0,
        flag_round_trips: 0,
        counted: String::new(),
    }
}

/// Occupancy by hand on gfx906 (256 VGPRs per lane, granule 4, 10 waves per SIMD; 64 KB of
/// LDS per CU, granule 256 B, 4 SIMDs): the batch-8/16/32 kernels' figures.
#[test]
fn occupancy_from_vgprs_and_lds_by_hand() {
    // 256 / 84 = 3.05; 256 / 116 = 2.2; 256 / 214 = 1.2; 62 -> 64: 4; 24 -> 10.7: 10.
    for (vgprs, waves) in [
        (84, 3),
        (116, 2),
        (128, 2),
        (129, 1),
        (214, 1),
        (62, 4),
        (24, 10),
    ] {
        assert_eq!(mi50_waves_per_simd_by_vgprs(vgprs), waves, "{vgprs} VGPRs");
    }
    // 256 lanes (4 waves) with 24 KB: 2 workgroups = 8 waves = 2 per SIMD; 48 KB: 1
    // workgroup = 4 waves = 1 per SIMD; 16 KB: 4 = 16 waves = 4; 128 lanes (2 waves) with
    // 40960 B: 1 workgroup = 2 waves, under one per SIMD, still 1; no LDS: 10; 100 B ->
    // 256 B: 256 workgroups, capped at 10.
    for (lds, wg, waves) in [
        (24576, 256, 2),
        (49152, 256, 1),
        (16384, 256, 4),
        (40960, 128, 1),
        (0, 256, 10),
        (100, 64, 10),
    ] {
        assert_eq!(mi50_waves_per_simd_by_lds(lds, wg), waves, "{lds} B x {wg}");
    }
    // `gemv_int4` at batch 16 (116 VGPRs, 48 KB): hipcc says 2, the LDS allows 1.
    assert_eq!(mi50_occupancy(116, 49152, 256), 1);
    assert_eq!(mi50_occupancy(84, 16384, 256), 3);
}

/// The LDS caps hipcc's occupancy in the model: 8 KB loads in flight per wave at hipcc's 4
/// waves per SIMD are 128 KB per CU; at the 1 the LDS allows (48 KB per 256-lane workgroup)
/// 32 KB, and the line says why.
#[test]
fn the_lds_caps_the_occupancy_gfx906() {
    let mut i = inputs(2.0, 5120.0 * 17408.0, 46.3e6);
    let free = model(&i);
    assert_eq!(
        (free.occupancy, free.bytes_in_flight_per_cu),
        (4, 4.0 * 4.0 * 8192.0)
    );
    i.lds_bytes_per_workgroup = 49152;
    let capped = model(&i);
    assert_eq!(
        (capped.occupancy, capped.bytes_in_flight_per_cu),
        (1, 4.0 * 8192.0)
    );
    assert!(
        capped
            .to_string()
            .contains("occupancy 1 (hipcc 4; the LDS, 49152 B per workgroup, allows 1)"),
        "{capped}"
    );
}

/// The dot-issue floor by hand: `gemv_int4` 5120 → 17408 at batch 64 needs 5120 · 17408 · 64
/// products, 2 per `v_dot2_f32_f16`: 2.852 G lane-instructions at 60 · 64 · 1.725 G/s =
/// 430.6 µs. A kernel at 1.2 VALU per weight and row (76.8 per weight) with 42 % of it dot
/// products is compute-bound by the other VALU work, at 1.18 · 1032.9 + 10.6 = 1229.4 µs,
/// 2.86 times the floor; with 62.5 % (0.8 VALU per weight and row) by its dot issue.
#[test]
fn the_dot_issue_floor_and_the_compute_bound_by_hand() {
    let w = 5120.0 * 17408.0;
    let mut i = inputs(76.8, w, 8.0 * 46.3e6);
    i.dot_floor_lane_instructions = w * 64.0 / 2.0;
    i.dot_share = 0.42;
    let m = model(&i);
    assert!((m.dot_floor_us - 430.6).abs() < 0.1, "{}", m.dot_floor_us);
    assert_eq!(m.bound, Bound::Valu);
    assert_eq!(m.bound_name(), "compute (VALU)");
    assert!((m.us - (1.18 * 76.8 * w / 6.624e12 * 1e6 + 10.6)).abs() < 1e-6);
    assert!(
        (m.over_dot_floor().expect("a floor") - 2.855).abs() < 0.01,
        "{m}"
    );
    i.valu_per_weight = 51.2;
    i.dot_share = 0.625;
    let d = model(&i);
    assert_eq!(d.bound_name(), "compute (dot issue)");
    assert!(
        d.to_string().contains("(compute-bound (dot issue), "),
        "{d}"
    );
    assert!(d.to_string().contains("dot-issue floor 430.6 us"), "{d}");
    // A memory-bound kernel says so whatever its dot share.
    let mut mem = inputs(2.0, w, 46.3e6);
    mem.dot_share = 0.9;
    assert_eq!(model(&mem).bound_name(), "memory");
}

/// DESIGN.md §6's numbers: 8.0 VALU per weight at 5120 → 17408 is VALU-bound at ~138 µs;
/// 2.0 is memory-bound at the 46.3 MB floor.
#[test]
fn the_fit_reproduces_the_design_numbers() {
    let w = 5120.0 * 17408.0;
    let fma = model(&inputs(8.0, w, 46.3e6));
    assert_eq!(fma.bound, Bound::Valu);
    let expect = 1.18 * (8.0 * w / 6.624e12 * 1e6) + 10.6;
    assert!((fma.us - expect).abs() < 1e-9, "{fma}");
    assert!((fma.us - 137.7).abs() < 0.5, "{fma}");
    let floor = model(&inputs(2.0, w, 46.3e6));
    assert_eq!(floor.bound, Bound::Memory);
    assert!((floor.us - (46.3e6 / 0.85e12 * 1e6 + 5.0)).abs() < 1e-9);
    assert!(
        floor
            .to_string()
            .starts_with("modelled (MI50): 59.5 us (memory-bound")
    );
}

/// Two kernels in one code object (tile variants of one file): the hotter loop is in `big`,
/// but the model of `small` counts `small`'s loop only, and says which one it counted.
#[test]
fn the_hot_loop_of_a_symbol_is_searched_in_its_code_only() {
    let disasm = "\
0000000000001000 <small>:
\tv_add_u32_e32 v1, v2, v3 // 000000001000: 68020702
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001004: D3A30004
\ts_cbranch_scc1 65534 // 000000001008: BF85FFFE <small+0x4>
\ts_endpgm // 00000000100C: BF810000

0000000000002000 <big>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002000: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002004: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002008: D3A30004
\ts_cbranch_scc1 65532 // 00000000200C: BF85FFFC <big+0x0>
\ts_endpgm // 000000002010: BF810000
";
    let whole = HotLoop::from_disassembly(disasm).expect("a loop");
    assert_eq!((whole.dot2, whole.first, whole.last), (3, 0x2000, 0x200c));
    let small = HotLoop::from_disassembly_of(disasm, "small").expect("its loop");
    assert_eq!((small.dot2, small.valu), (1, 1));
    assert_eq!((small.first, small.last), (0x1004, 0x1008));
    assert_eq!(
        small.counted(),
        "loop 0x1004..0x1008 (2 instructions) of `small`: 1 VALU per trip, 2 weights per trip (the products'); \
         1 VALU outside the loop on every wave's path, counted once per wave"
    );
    assert!(HotLoop::from_disassembly_of(disasm, "absent").is_none());
    // `small`'s one VALU outside its loop runs once per wave.
    let big = HotLoop::from_disassembly_of(disasm, "big").expect("its loop");
    assert_eq!((big.valu_outside, big.skippable_valu), (0, 0));
    assert_eq!(small.valu_outside, 1);
}

/// Without a period from the ABI, a block a forward branch skips is charged on every trip,
/// and the count says how much of the loop that is.
#[test]
fn blocks_a_branch_skips_inside_the_loop_are_said() {
    let disasm = "\
0000000000001000 <k>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001000: D3A30004
\ts_cbranch_execz 2 // 000000001004: BF880002 <k+0x10>
\tv_mov_b32_e32 v7, v8 // 000000001008: 7E0E0308
\tv_mov_b32_e32 v9, v8 // 00000000100C: 7E120308
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001010: D3A30004
\ts_cbranch_scc1 65530 // 000000001014: BF85FFFA <k+0x0>
";
    let h = HotLoop::from_disassembly_of(disasm, "k").expect("a loop");
    assert_eq!((h.valu, h.skippable_valu, h.valu_outside), (4, 2, 0));
    assert!(
        h.counted().ends_with(
            ": 4 VALU per trip (2 of its 4 in blocks a branch may skip, charged on every trip: \
             the ABI gives no period), 4 weights per trip (the products')"
        ),
        "{}",
        h.counted()
    );
}

#[test]
fn few_loads_in_flight_are_flagged() {
    let mut i = inputs(2.0, 1e6, 1e6);
    i.bytes_in_flight_per_wave = 1024.0;
    i.grid = 60;
    // 4 waves per CU from the grid × 1 KB = 4 KB per CU
    let m = model(&i);
    assert!((m.bytes_in_flight_per_cu - 4096.0).abs() < 1e-9);
    assert!(m.few_loads_in_flight);
    i.grid = 600; // the occupancy caps it: 16 waves × 1 KB
    assert!(!model(&i).few_loads_in_flight);
}

/// One disassembly line: `\tMNEMONIC OPERANDS // ADDR: 0` with a branch's `<k+0xOFF>`.
fn line(addr: u64, code: &str, target: Option<u64>) -> String {
    let to = target.map_or(String::new(), |t| format!(" <k+{:#x}>", t - 0x1000));
    format!("\t{code} // {addr:012X}: 00000000{to}\n")
}

/// A kernel `k` at 0x1000 from `(code, branch target)` lines, 4 bytes each.
fn kernel(lines: &[(&str, Option<u64>)]) -> String {
    let mut s = "0000000000001000 <k>:\n".to_owned();
    for (i, (code, t)) in lines.iter().enumerate() {
        s.push_str(&line(0x1000 + 4 * i as u64, code, *t));
    }
    s
}

/// A conditional reload block (a GEMV's per-group scale and zero reload, run once per
/// group of 128 rows = 16 words of 8 rows at one word per trip): hand count, per trip, 12
/// VALU always (decode, 8 `v_fma_mix_f32`, the address) + 6 in the block / 16 = 12.375 VALU
/// for 8 weights: 1.546875 per weight, where charging the block on every trip gives 18 / 8
/// = 2.25 (45 % more).
#[test]
fn a_conditional_reload_block_costs_its_share_of_the_trips() {
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("global_load_dword v1, v[2:3], off", None), // 0x1000: the loop
        ("s_and_b32 s4, s5, 15", None),
        ("s_cmp_lg_u32 s4, 0", None),
        ("s_cbranch_scc1 6", Some(0x1028)), // 0x100c: skip the reload
    ];
    l.extend([("v_mov_b32_e32 v7, v8", None); 6]); // 0x1010..0x1024: the reload
    l.extend([("v_fma_mix_f32 v4, v5, v6, v4", None); 8]); // 0x1028..
    l.extend([
        ("v_bfe_u32 v5, v1, 4, 4", None),
        ("v_lshrrev_b32_e32 v6, 8, v1", None),
        ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
        ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None),
        ("s_cbranch_scc0 65510", Some(0x1000)),
        ("s_endpgm", None),
    ]);
    let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    assert_eq!((h.valu, h.skippable_valu, h.fma_mix), (18, 6, 8));
    let facts = LoopFacts {
        weights_per_trip: Some(8.0),
        branch_period: Some(16.0),
        ..LoopFacts::default()
    };
    assert_eq!(h.valu_per_trip(&facts), 12.375);
    assert_eq!(h.valu_per_weight_with(1, &facts), Some(1.546875));
    assert_eq!(h.valu_per_weight(1), Some(2.25));
    assert!(
        h.counted_with(1, &facts).contains(
            ": 12.38 VALU per trip (6 of its 18 in blocks a branch skips, charged once per 16 trips), \
             8 weights per trip (the ABI's)"
        ),
        "{}",
        h.counted_with(1, &facts)
    );
}

/// hipcc's layout of the same reload (`gemv_int4_reload.hip`): the loop's inner backward
/// branch goes back while the group lasts; the reload after it runs when the group ends and
/// jumps back itself. Hand count as above: 12 + 6 / 16 VALU per trip.
#[test]
fn a_reload_after_the_inner_back_edge_costs_its_share_of_the_trips() {
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("global_load_dword v1, v[2:3], off", None), // 0x1000: the loop
    ];
    l.extend([("v_fma_mix_f32 v4, v5, v6, v4", None); 8]); // 0x1004..0x1020
    l.extend([
        ("v_bfe_u32 v5, v1, 4, 4", None),
        ("v_lshrrev_b32_e32 v6, 8, v1", None),
        ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
        ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None), // 0x1030
        ("s_cbranch_scc1 40", Some(0x10d8)),             // 0x1034: the exit
        ("s_cmp_lg_u32 s20, 0", None),
        ("s_cbranch_scc1 65523", Some(0x1000)), // 0x103c: the group lasts
    ]);
    l.extend([("v_mov_b32_e32 v7, v8", None); 6]); // 0x1040..0x1054: the reload
    l.extend([("s_branch 65512", Some(0x1000)), ("s_endpgm", None)]); // 0x1058
    let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    assert_eq!((h.first, h.last), (0x1000, 0x1058));
    assert_eq!((h.valu, h.skippable_valu), (18, 6));
    let facts = LoopFacts {
        weights_per_trip: Some(8.0),
        branch_period: Some(16.0),
        ..LoopFacts::default()
    };
    assert_eq!(h.valu_per_trip(&facts), 12.375);
    // A staging loop that shares the head, its back edge before the products: the tail is
    // the trip's work, not a skipped block.
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("ds_write_b32 v1, v2", None),           // 0x1000
        ("v_add_u32_e32 v1, 4, v1", None),       // 0x1004
        ("s_cbranch_execz 65533", Some(0x1000)), // 0x1008
    ];
    l.extend([("v_dot2_f32_f16 v4, v5, v6, v4", None); 4]); // 0x100c..0x1018
    l.extend([("s_branch 65530", Some(0x1000)), ("s_endpgm", None)]); // 0x101c
    let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    assert_eq!(
        (h.first, h.last, h.valu, h.skippable_valu),
        (0x1000, 0x101c, 5, 0)
    );
}

/// Batch tiles: a loop over the tiles around the K loop, the K loop holding every product
/// (and a staging loop of its own). With several weight passes the K loop is counted, not the
/// tile loop around it (the longer range with as many products): hand count, per K trip, 1
/// (head) + 1 (staging) + 8 `v_dot2_f32_f16` + 2 decode = 12 VALU for 2 · 8 / 4 = 4 weights
/// at batch 4: 3 per weight, where counting the tile loop as the loop charged its 3 + 4 VALU
/// (setup, reduction) on every K trip: 19 / 4 = 4.75. Those 7 run once per tile: per wave 2
/// before the tiles + 7 per pass.
#[test]
fn the_k_loop_inside_batch_tiles_is_counted_and_the_tiles_once_per_pass() {
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("v_mov_b32_e32 v1, 0", None), // 0x1000: before the tiles
        ("v_mov_b32_e32 v2, 0", None),
    ];
    l.extend([("v_mov_b32_e32 v3, 0", None); 3]); // 0x1008: the tile loop, its setup
    l.extend([
        ("v_add_u32_e32 v4, 16, v4", None),      // 0x1014: the K loop
        ("ds_write_b32 v1, v2", None),           // 0x1018: staging
        ("v_add_u32_e32 v1, 4, v1", None),       // 0x101c
        ("s_cbranch_execz 65533", Some(0x1018)), // 0x1020: the staging loop
    ]);
    l.extend([("v_dot2_f32_f16 v5, v6, v7, v5", None); 8]); // 0x1024..0x1040
    l.extend([("v_and_or_b32 v6, v8, 15, v9", None); 2]); // 0x1044, 0x1048
    l.push(("s_branch 65524", Some(0x1014))); // 0x104c: the K loop's back edge
    l.extend([("v_add_f32_e32 v5, v5, v10", None); 4]); // 0x1050: the tile's reduction
    l.extend([
        ("global_store_short v[0:1], v5, off", None), // 0x1060
        ("s_cbranch_scc0 65517", Some(0x1008)),       // 0x1064: the tile loop's back edge
        ("s_endpgm", None),
    ]);
    let tiles = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    // One pass: the longest loop of the products, as a K loop around a word loop would be.
    assert_eq!(tiles.for_passes(1.0), &tiles);
    assert_eq!((tiles.first, tiles.last, tiles.valu), (0x1008, 0x1064, 19));
    assert_eq!(tiles.valu_per_weight(4), Some(4.75));
    // Four passes: the K loop.
    let h = tiles.for_passes(4.0);
    assert_eq!((h.first, h.last), (0x1014, 0x104c), "{}", h.counted());
    assert_eq!(h.symbol.as_deref(), Some("k"));
    assert_eq!((h.valu, h.dot2), (12, 8));
    assert_eq!(h.valu_per_weight(4), Some(3.0));
    assert_eq!(h.enclosing, Some((0x1008, 0x1064)));
    assert_eq!((h.valu_outside_path, h.valu_enclosing_path), (9, 7));
    assert!(
        h.counted_with(4, &LoopFacts::default()).ends_with(
            "; 9 VALU outside the loop on every wave's path, counted once per wave \
             (7 of them in the loop 0x1008..0x1064 around it, once per weight pass)"
        ),
        "{}",
        h.counted_with(4, &LoopFacts::default())
    );
    // A disjoint loop of as many products after the tiles (a second copy of the K loop) is not
    // the tile loop's inner loop.
    let mut two = l.clone();
    two.pop(); // s_endpgm
    let at = 0x1000 + 4 * two.len() as u64;
    // Longer than the K loop (20 instructions against 15), shorter than the tile loop (25).
    two.extend([("v_mov_b32_e32 v9, v8", None); 11]);
    two.extend([("v_dot2_f32_f16 v5, v6, v7, v5", None); 8]);
    two.push(("s_cbranch_scc0 65516", Some(at)));
    two.push(("s_endpgm", None));
    let t2 = HotLoop::from_disassembly_of(&kernel(&two), "k").expect("a loop");
    assert_eq!((t2.first, t2.last), (0x1008, 0x1064), "{}", t2.counted());
    assert_eq!(
        t2.for_passes(4.0).first,
        0x1014,
        "{}",
        t2.for_passes(4.0).counted()
    );
    // Four tiles: 2 + 4 × 7 = 30 VALU per wave outside the loop, said with its passes.
    let mut i = inputs(3.0, 1e6, 1e6);
    (i.grid, i.workgroup_size) = (34, 128);
    (
        i.valu_outside_per_wave,
        i.valu_per_pass_per_wave,
        i.weight_passes,
    ) = (30.0, 7.0, 4.0);
    let m = model(&i);
    assert_eq!(m.valu_lane_instructions, 3e6 + 30.0 * 64.0 * 68.0);
    assert!(
        m.to_string()
            .contains("+ 30 VALU outside the loop (7 per weight pass x 4) x 68 waves"),
        "{m}"
    );
}

/// hipcc turns the first product of a word into `v_cvt_f32_f16` + `v_mul_f32` and the other
/// seven into `v_fma_mix_f32`, and adds a scale FMA: the products say 7 weights per trip
/// (2.71 VALU per weight); the ABI's one word per trip says 8 (hand count: 19 VALU / 8 =
/// 2.375).
#[test]
fn a_mul_first_word_counts_eight_weights_from_the_abi() {
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("global_load_dword v1, v[2:3], off", None),
        ("s_waitcnt vmcnt(0)", None),
        ("v_cvt_f32_f16_e32 v9, v8", None),
        ("v_mul_f32_e32 v10, v9, v11", None),
    ];
    l.extend([("v_fma_mix_f32 v10, v5, v6, v10", None); 7]);
    l.extend([("v_bfe_u32 v5, v1, 4, 4", None); 7]);
    l.extend([
        ("v_fmac_f32_e32 v4, v10, v12", None), // the scale
        ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
        ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None),
        ("s_cbranch_scc0 65510", Some(0x1000)),
    ]);
    let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    assert_eq!((h.valu, h.fma_mix, h.weights(1)), (19, 7, 7.0));
    let facts = LoopFacts {
        weights_per_trip: Some(8.0),
        branch_period: None,
        ..LoopFacts::default()
    };
    assert_eq!(h.valu_per_weight_with(1, &facts), Some(2.375));
    assert!(
        h.counted_with(1, &facts)
            .contains("8 weights per trip (the ABI's; the products say 7)"),
        "{}",
        h.counted_with(1, &facts)
    );
}

/// Work outside the loop: a guard around the whole work (`if (n < N)`) is the path taken, a
/// lane-0 store block after the loop is skipped on most waves. Hand count: 5 VALU before the
/// loop, 4 after it on every wave's path = 9 per wave; the 2 of the skippable block are said,
/// not counted. At 34 workgroups of 128 lanes (68 waves): 9 × 64 × 68 = 39,168
/// lane-instructions on top of the loop's.
#[test]
fn work_outside_the_loop_is_counted_once_per_wave_on_the_path_every_wave_runs() {
    let mut l: Vec<(&str, Option<u64>)> = vec![
        ("v_cmp_gt_i32_e32 vcc, s1, v0", None), // 0x1000
        ("s_and_saveexec_b64 s[6:7], vcc", None),
        ("s_cbranch_execz 20", Some(0x1054)), // 0x1008: the guard, to s_endpgm
    ];
    l.extend([("v_mul_lo_u32 v4, s16, v2", None); 4]); // 0x100c..0x1018
    l.extend([
        ("v_dot2_f32_f16 v4, v5, v6, v4", None), // 0x101c: the loop
        ("v_dot2_f32_f16 v4, v5, v6, v4", None),
        ("s_cbranch_scc0 65533", Some(0x101c)), // 0x1024
        ("v_cvt_f16_f32_e32 v2, v4", None),     // 0x1028: after the loop
        ("v_add_co_u32_e32 v0, vcc, s6, v0", None),
        ("v_addc_co_u32_e32 v1, vcc, v3, v1, vcc", None),
        ("v_cmp_eq_u32_e32 vcc, 0, v7", None), // 0x1034 (the 3rd after the loop)
        ("s_and_saveexec_b64 s[6:7], vcc", None),
        ("s_cbranch_execz 3", Some(0x1050)), // 0x103c: lane 0 only
        ("v_mov_b32_e32 v9, v2", None),
        ("v_mov_b32_e32 v10, v2", None),
        ("global_store_short v[0:1], v2, off", None), // 0x1048
        ("s_nop 0", None),
        ("s_or_b64 exec, exec, s[6:7]", None), // 0x1050
        ("s_endpgm", None),                    // 0x1054
    ]);
    let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
    assert_eq!((h.first, h.last), (0x101c, 0x1024));
    // 1 + 4 before the loop, 4 after it (the compare included), 2 in the lane-0 block.
    assert_eq!((h.valu_outside, h.valu_outside_path), (11, 9));
    let mut i = inputs(1.0, 1e6, 1e6);
    (i.grid, i.workgroup_size) = (34, 128);
    i.valu_outside_per_wave = h.valu_outside_path as f64;
    let m = model(&i);
    assert_eq!(m.valu_lane_instructions, 1e6 + 9.0 * 64.0 * 68.0);
    assert!(
        m.to_string()
            .contains("1.00 VALU/weight x 1.0 M weights + 9 VALU outside the loop x 68 waves"),
        "{m}"
    );
    assert!(
        h.counted().ends_with(
            "; 9 VALU outside the loop on every wave's path, counted once per wave, \
             2 in blocks a branch may skip, not counted"
        ),
        "{}",
        h.counted()
    );
}

/// One wave per 64 columns, one dword load in flight per lane: 34 workgroups of 128 lanes
/// at 5120 → 4352 (11.6 MB) leave 68 waves on 60 CUs, 256 B × 68 / 60 = 290 B in flight per
/// CU. Hand count: the bandwidth drawn is 0.85 TB/s × 290 / 16,384 = 15.1 GB/s; the latency
/// term 11.6 MB / 15.1 GB/s + 5 µs = 775.7 µs, latency-bound and said.
#[test]
fn a_latency_bound_shape_gets_the_latency_term_and_a_warning() {
    let mut i = inputs(2.0, 5120.0 * 4352.0, 11.6e6);
    (i.grid, i.workgroup_size, i.occupancy) = (34, 128, 10);
    i.bytes_in_flight_per_wave = 4.0 * 64.0;
    let m = model(&i);
    let per_cu = 256.0 * 68.0 / 60.0;
    assert!((m.bytes_in_flight_per_cu - per_cu).abs() < 1e-9);
    let stream = 11.6e6 / 0.85e12 * 1e6;
    let expect = stream * 16384.0 / per_cu + 5.0;
    assert!((m.latency_term_us - expect).abs() < 1e-6, "{m}");
    assert!((m.us - 775.7).abs() < 0.1, "{m}");
    assert_eq!(m.bound, Bound::Latency);
    assert!(
        m.to_string()
            .starts_with("modelled (MI50): 775.7 us (latency-bound")
            && m.to_string().contains("FEWER THAN 16 KB: latency-bound"),
        "{m}"
    );
    // Enough waves hide it: 16 KB per CU and more leave the memory term.
    (i.grid, i.bytes_in_flight_per_wave) = (480, 4096.0);
    let m = model(&i);
    assert_eq!((m.bound, m.few_loads_in_flight), (Bound::Memory, false));
    assert_eq!(m.latency_term_us, m.memory_term_us);
    // The Little's-law latency the 16 KB rule stands for.
    assert!((mi50_latency_us() - 1.157).abs() < 1e-3);
}

/// A fused kernel: its grid barrier and its PCIe flag round trips add to the GEMV's time.
#[test]
fn the_fused_parts_are_added() {
    let mut i = inputs(2.0, 5120.0 * 4352.0, 11.6e6);
    let gemv = model(&i);
    (i.grid_barriers, i.flag_round_trips) = (1, 2);
    let fused = model(&i);
    assert!((fused.fused_us - (1.5 + 2.0 * 5.0)).abs() < 1e-12);
    assert!((fused.us - gemv.us - 11.5).abs() < 1e-9);
    assert_eq!(fused.gemv_us(), gemv.us);
    assert!(
        fused
            .to_string()
            .contains(") + 1 grid barrier(s) x 1.5 + 2 PCIe flag round trip(s) x 5 us;"),
        "{fused}"
    );
}

#[test]
fn in_flight_follows_vmcnt() {
    let body = [
        "global_load_dwordx4",
        "global_load_dwordx4",
        "global_load_dword",
        "s_waitcnt vmcnt(1)",
        "global_load_dwordx2",
        "s_waitcnt vmcnt(0)",
    ];
    assert_eq!(in_flight(&body), 36);
}

/// An uneven grid, by hand: 68 workgroups on 60 CUs leave 8 CUs two and the rest one — the
/// busiest 2 / (68 / 60) = 1.765× the mean; 272 on 60: 5 / 4.533 = 1.103×, under the 1.2 the
/// line speaks from; 120: 1. Said on a compute-bound line only, never added to the time.
#[test]
fn an_uneven_grid_of_a_compute_bound_kernel_is_said_not_counted() {
    let mut i = inputs(40.0, 22.3e6, 24.4e6);
    i.grid = 68;
    let m = model(&i);
    assert_eq!(m.bound, Bound::Valu);
    assert!((m.grid_tail - 2.0 / (68.0 / 60.0)).abs() < 1e-12);
    assert!(m.uneven_grid());
    let even = model(&ModelInputs {
        grid: 120,
        ..i.clone()
    });
    assert_eq!(even.grid_tail, 1.0);
    assert_eq!(m.us, even.us, "the tail is said, not counted");
    assert!(
        m.to_string().contains(
            "(UNEVEN GRID: 68 workgroups on 60 CUs, the busiest runs 2 = 1.76x the mean; \
             a tail the compute term does not count)"
        ),
        "{m}"
    );
    i.grid = 272;
    assert!(!model(&i).uneven_grid());
    // Memory-bound at 68 workgroups: the bandwidth is shared, nothing said.
    let mut mem = inputs(1.0, 22.3e6, 24.4e6);
    mem.grid = 68;
    let mm = model(&mem);
    assert_eq!(mm.bound, Bound::Memory);
    assert!(!mm.uneven_grid() && !mm.to_string().contains("UNEVEN"));
}
