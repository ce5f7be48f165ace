//! Each quantisation setting decided from the overrides and the checkpoint's config, never
//! guessed (the rules are in the module docs of [`checkpoint`](super)).

use wavefuse::ir::{GroupSize, ZeroPoint};

use super::{CheckpointError, QuantConfig, QuantOverrides, group_size};

/// Decides each setting from the overrides and the config, recording how.
pub(super) struct Resolver<'a> {
    pub cfg: Option<&'a QuantConfig>,
    pub over: &'a QuantOverrides,
    /// The layer name (tensor prefix).
    pub layer: &'a str,
    /// The weights path, for messages.
    pub file: String,
    /// How each setting was decided.
    pub notes: Vec<String>,
}

impl Resolver<'_> {
    pub fn tensor(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.layer)
    }

    pub fn origin(&self) -> String {
        match self.cfg {
            Some(c) => c.sources.join(" and "),
            None => "no quantize_config.json or config.json beside the weights".into(),
        }
    }

    pub fn sym(&self) -> Option<bool> {
        self.cfg.and_then(|c| c.sym)
    }

    pub fn check_method(&self) -> Result<(), CheckpointError> {
        match self.cfg.and_then(|c| c.quant_method.as_deref()) {
            None | Some("gptq") => Ok(()),
            Some(m) => Err(CheckpointError::Unsupported {
                field: "quant_method",
                found: m.into(),
                origin: self.origin(),
                supported: "wavefuse loads GPTQ (quant_method = \"gptq\") checkpoints only".into(),
            }),
        }
    }

    pub fn bits(&mut self) -> Result<(), CheckpointError> {
        let (bits, origin) = match (self.over.bits, self.cfg.and_then(|c| c.bits)) {
            (Some(b), _) => (i64::from(b), "--bits".to_string()),
            (None, Some(b)) => (b, self.origin()),
            (None, None) => {
                return Err(CheckpointError::MissingSetting {
                    field: "bits",
                    what: format!("{}; pass --bits 4", self.origin()),
                });
            }
        };
        if bits != 4 {
            let supported = "wavefuse's GPTQ kernels are INT4 (bits = 4)".into();
            return Err(CheckpointError::Unsupported {
                field: "bits",
                found: bits.to_string(),
                origin,
                supported,
            });
        }
        Ok(())
    }

    pub fn group(&mut self) -> Result<GroupSize, CheckpointError> {
        if let Some(g) = self.over.group_size {
            self.notes
                .push(format!("group size {g} (from --group-size)"));
            return match g {
                GroupSize::Rows(32 | 64 | 128) | GroupSize::PerChannel => Ok(g),
                GroupSize::Rows(r) => Err(unsupported_group(i64::from(r), "--group-size".into())),
            };
        }
        let Some(g) = self.cfg.and_then(|c| c.group_size) else {
            return Err(CheckpointError::MissingSetting {
                field: "group_size",
                what: format!("{}; pass --group-size 32|64|128|-1", self.origin()),
            });
        };
        let group = group_size(g).ok_or_else(|| unsupported_group(g, self.origin()))?;
        self.notes.push(format!(
            "group size {group} (group_size = {g} in {})",
            self.origin()
        ));
        Ok(group)
    }

    pub fn zero(&mut self, has_qzeros: bool) -> Result<ZeroPoint, CheckpointError> {
        let qzeros = self.tensor("qzeros");
        if let Some(z) = self.over.zero {
            match (z, has_qzeros) {
                (ZeroPoint::Symmetric, true) => self.notes.push(format!(
                    "zero points: symmetric z = 8 (from --checkpoint-format sym); the stored `{qzeros}` is ignored"
                )),
                (ZeroPoint::Symmetric, false) => self.notes.push("zero points: symmetric z = 8 (from --checkpoint-format sym)".into()),
                (_, true) => self.notes.push(format!("zero points: {} convention (from --checkpoint-format)", z.name())),
                (_, false) => return Err(self.missing(&qzeros, "the --checkpoint-format given needs stored zero points")),
            }
            return Ok(z);
        }
        if !has_qzeros {
            if self.sym() == Some(false) {
                return Err(self.missing(
                    &qzeros,
                    &format!("sym = false in {} needs stored zero points", self.origin()),
                ));
            }
            self.notes.push(format!(
                "zero points: symmetric z = 8 (no `{qzeros}` tensor)"
            ));
            return Ok(ZeroPoint::Symmetric);
        }
        self.zero_from_format()
    }

    fn zero_from_format(&mut self) -> Result<ZeroPoint, CheckpointError> {
        let format = self.cfg.and_then(|c| c.checkpoint_format.as_deref());
        let z = match format {
            Some("gptq") => ZeroPoint::V1,
            Some("gptq_v2") => ZeroPoint::V2,
            Some(other) => {
                return Err(CheckpointError::Unsupported {
                    field: "checkpoint_format",
                    found: format!("\"{other}\""),
                    origin: self.origin(),
                    supported: "gptq (v1 zero points) or gptq_v2; repacked formats (marlin, bitblas, …) are not the GPTQ layout".into(),
                });
            }
            None => {
                return Err(CheckpointError::MissingSetting {
                    field: "checkpoint_format",
                    what: format!(
                        "`{}` stores zero points but {} does not say whether they are stored as z − 1 \
                         (checkpoint_format = \"gptq\", AutoGPTQ's v1) or as z (\"gptq_v2\"); wavefuse does not \
                         guess: pass --checkpoint-format gptq or --checkpoint-format gptq_v2",
                        self.tensor("qzeros"),
                        self.origin()
                    ),
                });
            }
        };
        let stored = if z == ZeroPoint::V1 { "z − 1" } else { "z" };
        self.notes.push(format!(
            "zero points: {} convention, stored as {stored} (checkpoint_format = \"{}\" in {})",
            z.name(),
            format.unwrap_or_default(),
            self.origin()
        ));
        Ok(z)
    }

    /// A v1 declaration without `sym = true` whose every zero point decodes to 9: most likely a
    /// symmetric checkpoint (z = 8 stored as 8) declared v1 (stored z − 1). Only a warning: the
    /// convention is never guessed.
    pub fn check_v1_zeros_all_nine(&mut self, qzeros: &[i32], zero: ZeroPoint) {
        if zero != ZeroPoint::V1 || self.sym() == Some(true) || qzeros.is_empty() {
            return;
        }
        let all_nine = qzeros
            .iter()
            .all(|&w| (0..8).all(|i| zero.decode((w as u32) >> (4 * i)) == 9));
        if all_nine {
            let from = match self.over.zero {
                Some(_) => "--checkpoint-format gptq".to_string(),
                None => format!("checkpoint_format = \"gptq\" in {}", self.origin()),
            };
            self.notes.push(format!(
                "warning: every one of the {} zero points in `{}` is stored as 8 and decodes to z = 9 under the v1 \
                 convention ({from}, sym not true): this looks like a symmetric checkpoint (z = 8) declared v1; they are \
                 used as declared. If the output looks wrong, check checkpoint_format (gptq_v2 or sym).",
                qzeros.len() * 8,
                self.tensor("qzeros"),
            ));
        }
    }

    /// Every scale zero: the layer's output is all zeros whatever the input.
    pub fn check_scales(&mut self, scales: &[f64]) {
        if !scales.is_empty() && scales.iter().all(|&s| s == 0.0) {
            self.notes.push(format!(
                "warning: every one of the {} scales in `{}` is zero: the layer's output is zero for any input \
                 (a broken or unfilled checkpoint?)",
                scales.len(),
                self.tensor("scales"),
            ));
        }
    }

    /// `sym = true` with stored zeros: every zero point should decode to 8.
    pub fn check_symmetric_zeros(&mut self, qzeros: &[i32], zero: ZeroPoint) {
        let decoded = qzeros
            .iter()
            .flat_map(|&w| (0..8).map(move |i| zero.decode((w as u32) >> (4 * i))));
        let (mut off, mut example) = (0usize, None);
        for z in decoded.filter(|&z| z != 8) {
            off += 1;
            example.get_or_insert(z);
        }
        if let Some(z) = example {
            self.notes.push(format!(
                "warning: sym = true but {off} of {} zero points in `{}` decode to z ≠ 8 (e.g. {z}) under the {} \
                 convention; they are used as stored. If the output looks wrong, check checkpoint_format.",
                qzeros.len() * 8,
                self.tensor("qzeros"),
                zero.name()
            ));
        }
    }

    pub fn act_order(
        &mut self,
        g_idx: Option<Vec<i32>>,
        k: usize,
        group: GroupSize,
    ) -> Result<Option<Vec<i32>>, CheckpointError> {
        let name = self.tensor("g_idx");
        let (wanted, from) = match (self.over.act_order, self.cfg.and_then(|c| c.desc_act)) {
            (Some(a), _) => (Some(a), "--act-order".to_string()),
            (None, Some(d)) => (Some(d), format!("desc_act in {}", self.origin())),
            (None, None) => (None, String::new()),
        };
        let Some(g) = g_idx else {
            if wanted == Some(true) {
                return Err(self.missing(&name, &format!("act-order ({from} = true) needs it")));
            }
            return Ok(None);
        };
        let rows = group.rows(k);
        check_group_map(&name, &g, k, rows)?;
        if g.iter().enumerate().all(|(i, &x)| x as usize == i / rows) {
            self.notes.push(format!(
                "`{name}` is the identity grouping k / {rows}: no act-order"
            ));
            return Ok(None);
        }
        if wanted == Some(false) {
            return Err(CheckpointError::Values {
                tensor: name,
                what: format!(
                    "reorders rows across groups (act-order) but {from} = false; a g_idx is never ignored: \
                     remove the override or fix the config"
                ),
            });
        }
        self.notes
            .push(format!("act-order: `{name}` maps rows to groups"));
        Ok(Some(g))
    }

    pub fn missing(&self, tensor: &str, why: &str) -> CheckpointError {
        CheckpointError::MissingTensor {
            tensor: tensor.into(),
            file: self.file.clone(),
            hint: format!(": {why}"),
        }
    }
}

fn unsupported_group(g: i64, origin: String) -> CheckpointError {
    CheckpointError::Unsupported {
        field: "group_size",
        found: g.to_string(),
        origin,
        supported: "GPTQ groups of 32, 64, 128 rows, or -1 (per-channel)".into(),
    }
}

/// A valid act-order map: every row in a group, every group holding exactly `rows` rows.
fn check_group_map(name: &str, g: &[i32], k: usize, rows: usize) -> Result<(), CheckpointError> {
    let groups = k / rows;
    let mut count = vec![0usize; groups];
    for (i, &x) in g.iter().enumerate() {
        if x < 0 || x as usize >= groups {
            let what =
                format!("g_idx[{i}] = {x} is not a group (0..{groups} for K = {k}, G = {rows})");
            return Err(CheckpointError::Values {
                tensor: name.into(),
                what,
            });
        }
        count[x as usize] += 1;
    }
    match count.iter().position(|&c| c != rows) {
        Some(bad) => Err(CheckpointError::Values {
            tensor: name.into(),
            what: format!(
                "is not a valid group map: group {bad} has {} rows, every group must have G = {rows}",
                count[bad]
            ),
        }),
        None => Ok(()),
    }
}
