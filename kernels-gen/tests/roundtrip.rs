//! print ∘ parse is the identity on the kernel set (DESIGN.md §3), and the textual IR on disk
//! parses: the IR snapshots (`tests/tests/snapshots/*@ir_tp*.snap`) and the example of
//! `docs/ir-format.md`.
//!
//! The `qwen_ffn_block` example chains two kernels of the set (`gemv_int4_dual_silu`,
//! `gemv_int4_allreduce_rmsnorm`), which `kernel_set_round_trips` covers at every TP size; the
//! `fused_norm_gate_up` example's own kernels are round-tripped by a test in its `main.rs`.

use std::path::{Path, PathBuf};

use wavefuse::ir::{Kernel, parse, validate};
use wavefuse_kernels::{KernelId, Shapes};

const TP_SIZES: [u32; 4] = [1, 2, 4, 8];
const BATCHES: [usize; 2] = [1, 3];

fn shapes(tp: u32, batch: usize) -> Shapes {
    Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    }
}

/// The text parses back into the same kernel, prints the same, and validates alike.
fn assert_round_trip(kernel: &Kernel) {
    let text = kernel.to_string();
    let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
    assert_eq!(
        parsed.to_string(),
        text,
        "print(parse(print(k))) != print(k)"
    );
    assert_eq!(&parsed, kernel, "parse(print(k)) != k\n{text}");
    assert_eq!(validate(&parsed).err(), validate(kernel).err(), "{text}");
}

#[test]
fn kernel_set_round_trips() {
    let mut count = 0;
    for id in KernelId::ALL {
        for tp in TP_SIZES {
            for batch in BATCHES {
                let kernel = id.build(&shapes(tp, batch));
                validate(&kernel).unwrap_or_else(|e| panic!("{id} tp={tp} batch={batch}: {e}"));
                assert_round_trip(&kernel);
                count += 1;
            }
        }
    }
    assert_eq!(count, 8 * 4 * 2);
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("kernels-gen is inside the workspace")
        .to_path_buf()
}

/// The body of an insta snapshot (after its `---` header).
fn snapshot_body(file: &str) -> &str {
    let rest = file.strip_prefix("---\n").expect("an insta header");
    let (_, body) = rest.split_once("\n---\n").expect("the end of the header");
    body
}

/// The IR snapshots are printed kernels: each parses into the kernel it names and prints back
/// unchanged. This also pins that the printer's quoting of names changed none of them.
#[test]
fn ir_snapshots_parse() {
    let dir = repo_root().join("tests/tests/snapshots");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the snapshots directory") {
        let path = entry.expect("a directory entry").path();
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(stem) = file
            .strip_prefix("snapshots__")
            .and_then(|s| s.strip_suffix(".snap"))
        else {
            continue;
        };
        let Some((name, tp)) = stem.split_once("@ir_tp") else {
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("readable snapshot");
        let body = snapshot_body(&text).trim_end().to_owned() + "\n";
        let parsed = parse(&body).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(parsed.to_string(), body, "{file}");
        let id: KernelId = name.parse().expect("a kernel of the set");
        let tp: u32 = tp.parse().expect("a TP size");
        assert_eq!(parsed, id.build(&Shapes::qwen27b(tp)), "{file}");
        seen += 1;
    }
    assert_eq!(
        seen,
        KernelId::ALL.len() * TP_SIZES.len(),
        "IR snapshots found"
    );
}

/// The complete example of `docs/ir-format.md` is the printed fused kernel at TP 4, exactly.
#[test]
fn format_doc_example_is_a_printed_kernel() {
    let doc = std::fs::read_to_string(repo_root().join("docs/ir-format.md")).expect("the doc");
    let start = doc
        .find("```wfir\n")
        .expect("a ```wfir block in docs/ir-format.md")
        + "```wfir\n".len();
    let len = doc[start..].find("```").expect("the end of the block");
    let example = &doc[start..start + len];
    let kernel = KernelId::GemvInt4AllreduceRmsnorm.build(&Shapes::qwen27b(4));
    assert_eq!(example, kernel.to_string(), "regenerate the doc's example");
    assert_eq!(parse(example).expect("the example parses"), kernel);
}
