//! Dependency direction (DESIGN.md §4): ir ← codegen ← runtime; ir ← dsl; the macro crate depends
//! on nothing internal and only on syn, quote and proc-macro2; the runtime never sees the DSL.

use std::collections::BTreeSet;

use cargo_metadata::{DependencyKind, MetadataCommand};

/// Internal crates each crate may depend on (normal and build dependencies).
fn allowed(krate: &str) -> Option<&'static [&'static str]> {
    Some(match krate {
        "wavefuse-ir" => &[],
        "wavefuse-codegen" => &["wavefuse-ir"],
        "wavefuse-macros" => &[],
        "wavefuse" => &["wavefuse-ir", "wavefuse-macros"],
        "wavefuse-runtime" => &["wavefuse-ir", "wavefuse-codegen"],
        "wavefuse-kernels" => &["wavefuse", "wavefuse-ir", "wavefuse-codegen"],
        "wavefuse-harness" => &[
            "wavefuse",
            "wavefuse-ir",
            "wavefuse-codegen",
            "wavefuse-runtime",
            "wavefuse-kernels",
        ],
        "wavefuse-cli" => &[
            "wavefuse",
            "wavefuse-ir",
            "wavefuse-codegen",
            "wavefuse-runtime",
            "wavefuse-harness",
        ],
        _ => return None,
    })
}

const MACRO_EXTERNALS: [&str; 3] = ["syn", "quote", "proc-macro2"];

/// Every forbidden edge among `(from, to, is_internal)` triples.
fn violations<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str, bool)>) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, to, internal) in edges {
        let ok = match (allowed(from), internal) {
            (Some(list), true) => list.contains(&to),
            (Some(_), false) if from == "wavefuse-macros" => MACRO_EXTERNALS.contains(&to),
            _ => true,
        };
        if !ok {
            bad.push(format!("{from} → {to}"));
        }
    }
    bad
}

#[test]
fn the_rule_table_rejects_backward_edges() {
    let bad = violations([
        ("wavefuse-runtime", "wavefuse", true),
        ("wavefuse-ir", "wavefuse-codegen", true),
        ("wavefuse-macros", "serde", false),
        ("wavefuse-codegen", "wavefuse-ir", true),
    ]);
    assert_eq!(
        bad,
        [
            "wavefuse-runtime → wavefuse",
            "wavefuse-ir → wavefuse-codegen",
            "wavefuse-macros → serde"
        ]
    );
}

#[test]
fn workspace_dependencies_point_one_way() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let meta = MetadataCommand::new()
        .manifest_path(root)
        .no_deps()
        .exec()
        .expect("cargo metadata");
    let internal: BTreeSet<&str> = meta
        .workspace_packages()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    for name in [
        "wavefuse-ir",
        "wavefuse-codegen",
        "wavefuse-macros",
        "wavefuse",
        "wavefuse-runtime",
        "wavefuse-kernels",
        "wavefuse-harness",
        "wavefuse-cli",
    ] {
        assert!(internal.contains(name), "workspace lacks {name}");
    }
    let edges: Vec<(&str, &str, bool)> = meta
        .workspace_packages()
        .iter()
        .flat_map(|p| {
            p.dependencies
                .iter()
                .filter(|d| d.kind != DependencyKind::Development)
                .map(|d| {
                    (
                        p.name.as_str(),
                        d.name.as_str(),
                        internal.contains(d.name.as_str()),
                    )
                })
        })
        .collect();
    let bad = violations(edges);
    assert!(bad.is_empty(), "forbidden dependencies: {bad:?}");
}
