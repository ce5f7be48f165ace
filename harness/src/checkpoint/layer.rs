//! One GPTQ layer: its tensors read, checked against each other and the settings, decoded.

use std::path::Path;

use safetensors::Dtype;
use wavefuse::ir::reference::PackedInt4;
use wavefuse::ir::{GptqLayout, GroupSize, ScalarType, Weight, WeightFormat, ZeroPoint};

use super::settings::Resolver;
use super::store::{RawTensor, TensorStore};
use super::{CheckpointError, QuantOverrides, read_config};

/// What was loaded for a layer, without the data.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerInfo {
    /// The layer name (tensor prefix).
    pub layer: String,
    /// Reduction length.
    pub k: usize,
    /// Output length.
    pub n: usize,
    /// The layout decided for it.
    pub layout: GptqLayout,
    /// How each setting was decided, and anything suspicious: for the user to read.
    pub notes: Vec<String>,
}

impl LayerInfo {
    /// The weight type of the whole (unsharded) layer.
    pub fn weight(&self) -> Weight {
        Weight {
            format: WeightFormat::Gptq(self.layout),
            k: self.k,
            n: self.n,
        }
    }
}

/// One GPTQ layer: its description and packed arrays.
#[derive(Clone, Debug, PartialEq)]
pub struct GptqWeight {
    /// Shape, layout and notes.
    pub info: LayerInfo,
    /// The arrays, as stored (zeros dropped when symmetric, `g_idx` dropped when trivial).
    pub packed: PackedInt4,
}

impl GptqWeight {
    /// Columns `start .. start + len` of the weight (a column-parallel shard). Both must be
    /// multiples of 8 when zero points are stored.
    pub fn columns(&self, start: usize, len: usize) -> PackedInt4 {
        let (n, p) = (self.info.n, &self.packed);
        let rows = |v: &[i32], width: usize, lo: usize, cnt: usize| -> Vec<i32> {
            v.chunks(width)
                .flat_map(|r| r[lo..lo + cnt].iter().copied())
                .collect()
        };
        PackedInt4 {
            qweight: rows(&p.qweight, n, start, len),
            scales: p
                .scales
                .chunks(n)
                .flat_map(|r| r[start..start + len].iter().copied())
                .collect(),
            qzeros: if p.qzeros.is_empty() {
                Vec::new()
            } else {
                rows(&p.qzeros, n / 8, start / 8, len / 8)
            },
            g_idx: p.g_idx.clone(),
        }
    }
}

/// Load layer `layer` of the checkpoint at `weights` (a `.safetensors` file, a
/// `model.safetensors.index.json`, or a directory holding one). See the module docs for the rules.
pub fn load_layer(
    weights: &Path,
    layer: &str,
    over: &QuantOverrides,
) -> Result<GptqWeight, CheckpointError> {
    let layer = layer.strip_suffix(".qweight").unwrap_or(layer);
    let mut store = TensorStore::open(weights)?;
    let cfg = read_config(&store.dir)?;
    let mut r = Resolver {
        cfg: cfg.as_ref(),
        over,
        layer,
        file: weights.display().to_string(),
        notes: Vec::new(),
    };
    r.check_method()?;
    // Settings that are not known are all reported at once (the first other error wins).
    let mut missing = Vec::new();
    known(r.bits(), &mut missing)?;
    let group = known(r.group(), &mut missing)?;
    let t = match LayerTensors::read(&mut store, &r) {
        Ok(t) => t,
        Err(e) if missing.is_empty() => return Err(e),
        Err(_) => return Err(all_missing(missing)),
    };
    let Some(group) = group.filter(|_| missing.is_empty()) else {
        if let Err(e @ CheckpointError::MissingSetting { .. }) = r.zero(t.qzeros.is_some()) {
            missing.push(e);
        }
        return Err(all_missing(missing));
    };
    let (k, n) = t.check_shapes(group, &r)?;
    let zero = r.zero(t.qzeros.is_some())?;
    let g_idx = r.act_order(t.g_idx, k, group)?;
    let qzeros = match zero {
        ZeroPoint::Symmetric => Vec::new(),
        _ => t.qzeros.expect("checked by Resolver::zero"),
    };
    if zero != ZeroPoint::Symmetric && r.sym() == Some(true) {
        r.check_symmetric_zeros(&qzeros, zero);
    }
    r.check_v1_zeros_all_nine(&qzeros, zero);
    r.check_scales(&t.scales);
    let layout = GptqLayout {
        group,
        scale: t.scale_type,
        zero,
        act_order: g_idx.is_some(),
    };
    let info = LayerInfo {
        layer: layer.to_owned(),
        k,
        n,
        layout,
        notes: r.notes,
    };
    Ok(GptqWeight {
        info,
        packed: PackedInt4 {
            qweight: t.qweight,
            scales: t.scales,
            qzeros,
            g_idx,
        },
    })
}

/// `Ok(Some(v))`, or `Ok(None)` with a missing setting collected; any other error is returned.
fn known<T>(
    r: Result<T, CheckpointError>,
    missing: &mut Vec<CheckpointError>,
) -> Result<Option<T>, CheckpointError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e @ CheckpointError::MissingSetting { .. }) => {
            missing.push(e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// One error for the collected missing settings (itself when there is one).
fn all_missing(mut missing: Vec<CheckpointError>) -> CheckpointError {
    if missing.len() == 1 {
        return missing.remove(0);
    }
    let (mut fields, mut list) = (Vec::new(), Vec::new());
    for e in missing {
        if let CheckpointError::MissingSetting { field, what } = e {
            fields.push(field);
            list.push(format!("`{field}`: {what}"));
        }
    }
    CheckpointError::MissingSettings {
        fields,
        list: list.join("; "),
    }
}

/// The layer's tensors, dtype-checked and decoded.
struct LayerTensors {
    qweight: Vec<i32>,
    qweight_shape: Vec<usize>,
    scales: Vec<f64>,
    scales_shape: Vec<usize>,
    scale_type: ScalarType,
    qzeros: Option<Vec<i32>>,
    qzeros_shape: Vec<usize>,
    g_idx: Option<Vec<i32>>,
    g_idx_shape: Vec<usize>,
}

impl LayerTensors {
    fn read(store: &mut TensorStore, r: &Resolver<'_>) -> Result<Self, CheckpointError> {
        let required = |store: &mut TensorStore, suffix: &str| {
            let name = r.tensor(suffix);
            store
                .read(&name)?
                .map(|t| (name.clone(), t))
                .ok_or_else(|| missing_tensor(store, r, &name))
        };
        let optional = |store: &mut TensorStore, suffix: &str| {
            let name = r.tensor(suffix);
            Ok::<_, CheckpointError>(store.read(&name)?.map(|t| (name, t)))
        };
        let (qw_name, qw) = required(store, "qweight")?;
        let (sc_name, sc) = required(store, "scales")?;
        let qz = optional(store, "qzeros")?;
        let gi = optional(store, "g_idx")?;
        let (scale_type, scales) = floats(&sc_name, &sc)?;
        let ints = |t: Option<(String, RawTensor)>| -> Result<(Option<Vec<i32>>, Vec<usize>), CheckpointError> {
            match t {
                Some((name, t)) => Ok((Some(i32s(&name, &t)?), t.shape)),
                None => Ok((None, Vec::new())),
            }
        };
        let (qzeros, qzeros_shape) = ints(qz)?;
        let (g_idx, g_idx_shape) = ints(gi)?;
        Ok(LayerTensors {
            qweight: i32s(&qw_name, &qw)?,
            qweight_shape: qw.shape,
            scales,
            scales_shape: sc.shape,
            scale_type,
            qzeros,
            qzeros_shape,
            g_idx,
            g_idx_shape,
        })
    }

    /// K and N, after checking every shape against the others and the group size.
    fn check_shapes(
        &self,
        group: GroupSize,
        r: &Resolver<'_>,
    ) -> Result<(usize, usize), CheckpointError> {
        let shape_err =
            |suffix: &str, expected: String, found: &[usize], why: String| CheckpointError::Shape {
                tensor: r.tensor(suffix),
                expected,
                found: found.to_vec(),
                why,
            };
        let [kw, n] = two_d(&self.qweight_shape).ok_or_else(|| {
            shape_err(
                "qweight",
                "[K/8, N] (2-D)".into(),
                &self.qweight_shape,
                String::new(),
            )
        })?;
        let k = kw * 8;
        let [groups, sn] = two_d(&self.scales_shape).ok_or_else(|| {
            shape_err(
                "scales",
                format!("[K/G, N={n}] (2-D)"),
                &self.scales_shape,
                String::new(),
            )
        })?;
        if sn != n {
            let why = if sn == 8 * n {
                "; scales are 8× wider than qweight ([K, N/8]?): this looks like an AWQ checkpoint, which wavefuse does not load".to_string()
            } else {
                format!("; N = {n} is the width of `{}`", r.tensor("qweight"))
            };
            return Err(shape_err(
                "scales",
                format!("[K/G, N={n}]"),
                &self.scales_shape,
                why,
            ));
        }
        let rows = group.rows(k);
        if rows == 0 || k % rows != 0 {
            let why = format!("; K = 8 × {kw} = {k} is not a multiple of the group size {rows}");
            return Err(shape_err(
                "qweight",
                format!("[K/8, N] with K a multiple of {rows}"),
                &self.qweight_shape,
                why,
            ));
        }
        if groups != k / rows {
            let why = format!(
                "; K = {k} (from `{}`) in groups of {group} gives {} groups",
                r.tensor("qweight"),
                k / rows
            );
            return Err(shape_err(
                "scales",
                format!("[K/G={}, N={n}]", k / rows),
                &self.scales_shape,
                why,
            ));
        }
        if self.qzeros.is_some() {
            let want = [groups, n / 8];
            if n % 8 != 0 || self.qzeros_shape != want {
                let why = if n % 8 != 0 {
                    format!("; N = {n} is not a multiple of 8")
                } else {
                    String::new()
                };
                return Err(shape_err(
                    "qzeros",
                    format!("[K/G={groups}, N/8={}]", n / 8),
                    &self.qzeros_shape,
                    why,
                ));
            }
        }
        if self.g_idx.is_some() && self.g_idx_shape != [k] {
            return Err(shape_err(
                "g_idx",
                format!("[K={k}]"),
                &self.g_idx_shape,
                String::new(),
            ));
        }
        Ok((k, n))
    }
}

fn two_d(shape: &[usize]) -> Option<[usize; 2]> {
    match shape {
        &[a, b] => Some([a, b]),
        _ => None,
    }
}

fn i32s(name: &str, t: &RawTensor) -> Result<Vec<i32>, CheckpointError> {
    expect_dtype(name, t.dtype, &[Dtype::I32])?;
    Ok(t.bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn floats(name: &str, t: &RawTensor) -> Result<(ScalarType, Vec<f64>), CheckpointError> {
    expect_dtype(name, t.dtype, &[Dtype::F16, Dtype::BF16, Dtype::F32])?;
    let (ty, v): (ScalarType, Vec<f64>) = match t.dtype {
        Dtype::F16 => (
            ScalarType::F16,
            t.bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
        ),
        Dtype::BF16 => (
            ScalarType::Bf16,
            t.bytes
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
        ),
        _ => (
            ScalarType::F32,
            t.bytes
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        ),
    };
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(CheckpointError::Values {
            tensor: name.into(),
            what: format!("element {i} is {}", v[i]),
        });
    }
    Ok((ty, v))
}

fn expect_dtype(name: &str, found: Dtype, accepted: &[Dtype]) -> Result<(), CheckpointError> {
    if accepted.contains(&found) {
        return Ok(());
    }
    let expected = accepted
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" or ");
    Err(CheckpointError::Dtype {
        tensor: name.into(),
        expected,
        found: found.to_string(),
    })
}

/// A missing tensor, with what the checkpoint has instead.
fn missing_tensor(store: &mut TensorStore, r: &Resolver<'_>, name: &str) -> CheckpointError {
    let names = store.names().unwrap_or_default();
    let prefix = format!("{}.", r.layer);
    let here: Vec<&str> = names
        .iter()
        .filter(|n| n.starts_with(&prefix))
        .map(String::as_str)
        .collect();
    let hint = if !here.is_empty() {
        format!("; under `{}` it has: {}", r.layer, list(&here))
    } else {
        let mut layers: Vec<&str> = names
            .iter()
            .filter_map(|n| n.strip_suffix(".qweight"))
            .collect();
        // The nearest names first: a typo's intended layer leads the list.
        layers.sort_by_cached_key(|l| (edit_distance(l, r.layer), l.to_string()));
        match layers.len() {
            0 => "; it has no `*.qweight` tensor at all: not a GPTQ checkpoint".into(),
            _ => format!("; GPTQ layers it has, nearest first: {}", list(&layers)),
        }
    };
    CheckpointError::MissingTensor {
        tensor: name.into(),
        file: r.file.clone(),
        hint,
    }
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn list(items: &[&str]) -> String {
    const SHOWN: usize = 6;
    let head = items
        .iter()
        .take(SHOWN)
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        format!("{head}, … ({} in all)", items.len())
    } else {
        head
    }
}
