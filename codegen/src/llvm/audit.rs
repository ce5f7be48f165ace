//! A check of the emitted IR's synchronisation, independent of the emitter: every call of an
//! atomic, fence or barrier helper carries `!wavefuse.sync`, its ordering and scope are the ones
//! the helper's name (and, on AMDGPU, the helper's own atomic instruction) says, and they are at
//! least what the DESIGN.md §5 invariant it cites requires.

use std::collections::BTreeMap;

/// One synchronisation call of the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncSite {
    /// The helper called (`wf.atomic.add.u32.release.agent`).
    pub helper: String,
    /// The invariant cited (`5.1`).
    pub invariant: String,
    /// The LLVM ordering (`release`), or `barrier`.
    pub ordering: String,
    /// The scope (`agent`, `system`, …).
    pub scope: String,
}

/// What the audit found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("synchronisation audit: {0}")]
pub struct AuditError(pub String);

fn strength(o: &str) -> u8 {
    match o {
        "monotonic" => 0,
        "acquire" | "release" => 1,
        "acq_rel" => 2,
        "seq_cst" => 3,
        _ => 0,
    }
}

fn scope_rank(s: &str) -> u8 {
    match s {
        "wavefront" => 0,
        "workgroup" => 1,
        "agent" => 2,
        "system" => 3,
        _ => 0,
    }
}

/// `(needs acquire side, needs release side, minimum scope)` for an atomic of kind `op` citing
/// invariant `inv`, or `None` when the invariant sets no ordering requirement.
fn requirement(inv: &str, op: &str) -> Option<(bool, bool, &'static str)> {
    match (inv, op) {
        // The elected arrival publishes the workgroup's writes to the other workgroups.
        ("5.1", "add") => Some((false, true, "agent")),
        // The grid-barrier wait acquires them.
        ("5.4", "load") => Some((true, false, "agent")),
        // Cross-device flags: release the payload, acquire it, at system scope.
        ("5.3", "store") => Some((false, true, "system")),
        ("5.3", "load") => Some((true, false, "system")),
        // The error word is read by the host.
        ("5.10", "store") => Some((false, false, "system")),
        _ => None,
    }
}

/// Audits the IR text of one module; returns its synchronisation calls in order.
pub fn audit(ir: &str) -> Result<Vec<SyncSite>, AuditError> {
    let meta = metadata_nodes(ir);
    let defs = helper_bodies(ir);
    let mut sites = Vec::new();
    for line in ir.lines() {
        let Some(helper) = called_sync_helper(line) else {
            continue;
        };
        let fail = |m: String| AuditError(format!("{m}\n  at: {}", line.trim()));
        let id = line
            .split("!wavefuse.sync ")
            .nth(1)
            .and_then(|r| r.split(|c: char| c == ',' || c.is_whitespace()).next())
            .ok_or_else(|| fail(format!("call of @{helper} without !wavefuse.sync")))?;
        let fields = meta
            .get(id)
            .ok_or_else(|| fail(format!("metadata {id} not found")))?;
        let [inv, ord, scope, _summary] = fields.as_slice() else {
            return Err(fail(format!("metadata {id} has {} fields", fields.len())));
        };
        let site = SyncSite {
            helper: helper.to_owned(),
            invariant: inv.clone(),
            ordering: ord.clone(),
            scope: scope.clone(),
        };
        check_site(&site, defs.get(helper).map(String::as_str)).map_err(fail)?;
        sites.push(site);
    }
    Ok(sites)
}

fn check_site(s: &SyncSite, body: Option<&str>) -> Result<(), String> {
    let parts: Vec<&str> = s.helper.split('.').collect();
    match parts.as_slice() {
        ["wf", "barrier", "workgroup"] => {
            if s.invariant != "5.8" {
                return Err(format!("a barrier citing §{}", s.invariant));
            }
            Ok(())
        }
        ["wf", "atomic", _, _, ord, scope] | ["wf", "fence", ord, scope] => {
            let op = if parts[1] == "fence" {
                "fence"
            } else {
                parts[2]
            };
            if (*ord, *scope) != (s.ordering.as_str(), s.scope.as_str()) {
                return Err(format!("@{} tagged {} {}", s.helper, s.ordering, s.scope));
            }
            if let Some((acq, rel, min_scope)) = requirement(&s.invariant, op) {
                let st = strength(ord);
                let acq_ok = !acq || (st >= 1 && *ord != "release");
                let rel_ok = !rel || (st >= 1 && *ord != "acquire");
                if !acq_ok || !rel_ok || scope_rank(scope) < scope_rank(min_scope) {
                    return Err(format!(
                        "§{} needs {}{}at {min_scope} scope or wider, got {ord} {scope} (@{})",
                        s.invariant,
                        if acq { "acquire " } else { "" },
                        if rel { "release " } else { "" },
                        s.helper
                    ));
                }
            }
            if let Some(body) = body {
                check_body(body, ord, scope)?;
            }
            Ok(())
        }
        _ => Err(format!("unknown synchronisation helper @{}", s.helper)),
    }
}

/// On AMDGPU the helper holds the LLVM atomic itself: its ordering and syncscope must match the
/// name. (NVPTX helpers hold PTX; their mapping is checked by ptxas and the GPU run.)
fn check_body(body: &str, ord: &str, scope: &str) -> Result<(), String> {
    let atomic = body.lines().find(|l| {
        l.contains(" atomic ") || l.contains("atomicrmw") || l.trim_start().starts_with("fence")
    });
    let Some(atomic) = atomic else {
        return Ok(());
    };
    let has_order = atomic
        .split_whitespace()
        .any(|w| w.trim_end_matches(',') == ord);
    let want = if scope == "system" {
        None
    } else {
        Some(format!("syncscope(\"{scope}\")"))
    };
    let has_scope = match &want {
        Some(w) => atomic.contains(w.as_str()),
        None => !atomic.contains("syncscope"),
    };
    if has_order && has_scope {
        Ok(())
    } else {
        Err(format!(
            "helper body `{}` is not {ord} at {scope} scope",
            atomic.trim()
        ))
    }
}

fn called_sync_helper(line: &str) -> Option<&str> {
    let l = line.trim_start();
    if l.starts_with("define") || l.starts_with("declare") || !l.contains("call ") {
        return None;
    }
    let at = l.find("@wf.")?;
    let name = &l[at + 1..];
    let name = &name[..name.find('(')?];
    let sync = name.starts_with("wf.atomic.")
        || name.starts_with("wf.fence.")
        || name.starts_with("wf.barrier.");
    sync.then_some(name)
}

/// `!N = !{!"a", !"b", …}` → strings, for every metadata node made only of strings.
fn metadata_nodes(ir: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for l in ir.lines() {
        let Some((id, rest)) = l.split_once(" = !{") else {
            continue;
        };
        if !id.starts_with('!') || id.contains(' ') {
            continue;
        }
        // Only string nodes: `!"…"` fields, none containing a quote.
        let fields: Vec<String> = rest
            .split("!\"")
            .skip(1)
            .filter_map(|f| f.split('"').next())
            .map(str::to_owned)
            .collect();
        out.insert(id.to_owned(), fields);
    }
    out
}

/// The body text of every `define … @wf.…` in the module.
fn helper_bodies(ir: &str) -> BTreeMap<&str, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(&str, String)> = None;
    for l in ir.lines() {
        if l.starts_with("define") {
            if let Some(at) = l.find("@wf.") {
                let name = &l[at + 1..];
                if let Some(end) = name.find('(') {
                    current = Some((&name[..end], String::new()));
                    continue;
                }
            }
        }
        if let Some((name, body)) = current.as_mut() {
            if l.starts_with('}') {
                out.insert(*name, std::mem::take(body));
                current = None;
            } else {
                body.push_str(l);
                body.push('\n');
            }
        }
    }
    out
}
