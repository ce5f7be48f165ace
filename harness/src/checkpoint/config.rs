//! The quantisation settings a checkpoint declares beside its weights.
//!
//! Two places, as the tools that write GPTQ checkpoints use them: `quantize_config.json`
//! (AutoGPTQ, GPTQModel) and the `quantization_config` object of `config.json` (transformers /
//! optimum). Where both exist, both are read and must agree on every field they share; a
//! disagreement is an error naming the field and both files. AutoAWQ's `quant_config.json` is
//! read only to recognise, and reject, an AWQ checkpoint.

use std::path::Path;

use serde_json::{Map, Value};

use super::CheckpointError;

/// The GPTQ fields of one checkpoint's config, as written (nothing defaulted).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantConfig {
    /// Where each field came from, for messages: `dir/quantize_config.json`, …
    pub sources: Vec<String>,
    /// `bits`.
    pub bits: Option<i64>,
    /// `group_size` (−1: per-channel).
    pub group_size: Option<i64>,
    /// `sym`.
    pub sym: Option<bool>,
    /// `desc_act` (act-order).
    pub desc_act: Option<bool>,
    /// `checkpoint_format`: `gptq` (v1 zero points) or `gptq_v2`.
    pub checkpoint_format: Option<String>,
    /// `quant_method` (`gptq` where present).
    pub quant_method: Option<String>,
}

/// Read the quantisation config in `dir`; `None` when the directory has none.
pub fn read_config(dir: &Path) -> Result<Option<QuantConfig>, CheckpointError> {
    reject_awq_file(&dir.join("quant_config.json"))?;
    let mut found = Vec::new();
    let qc = dir.join("quantize_config.json");
    if let Some(obj) = read_json(&qc)? {
        found.push((qc.display().to_string(), obj));
    }
    let cfg = dir.join("config.json");
    if let Some(mut obj) = read_json(&cfg)? {
        let where_ = format!("{} (quantization_config)", cfg.display());
        match obj.remove("quantization_config") {
            Some(Value::Object(q)) => found.push((where_, q)),
            Some(other) => {
                return Err(field_type(
                    &where_,
                    "quantization_config",
                    "an object",
                    &other,
                ));
            }
            None => {}
        }
    }
    let mut merged: Option<QuantConfig> = None;
    for (source, obj) in found {
        reject_awq(&source, &obj)?;
        let one = parse(&source, &obj)?;
        merged = Some(match merged {
            None => one,
            Some(first) => merge(first, one)?,
        });
    }
    Ok(merged)
}

fn read_json(path: &Path) -> Result<Option<Map<String, Value>>, CheckpointError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CheckpointError::Io {
                path: path.to_owned(),
                source: e,
            });
        }
    };
    let bad = |what: String| CheckpointError::Config {
        origin: path.display().to_string(),
        field: String::new(),
        what,
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(bad("is not a JSON object".into())),
        Err(e) => Err(bad(format!("is not valid JSON: {e}"))),
    }
}

fn parse(source: &str, obj: &Map<String, Value>) -> Result<QuantConfig, CheckpointError> {
    let int = |f: &str| get(source, obj, f, "an integer", Value::as_i64);
    let boolean = |f: &str| get(source, obj, f, "true or false", Value::as_bool);
    let string = |f: &str| {
        get(source, obj, f, "a string", |v| {
            v.as_str().map(str::to_owned)
        })
    };
    Ok(QuantConfig {
        sources: vec![source.to_owned()],
        bits: int("bits")?,
        group_size: int("group_size")?,
        sym: boolean("sym")?,
        desc_act: boolean("desc_act")?,
        checkpoint_format: string("checkpoint_format")?,
        quant_method: string("quant_method")?,
    })
}

/// A field that is absent or `null` is `None`; one of the wrong JSON type is an error.
fn get<T>(
    source: &str,
    obj: &Map<String, Value>,
    field: &str,
    expected: &str,
    conv: impl Fn(&Value) -> Option<T>,
) -> Result<Option<T>, CheckpointError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => conv(v)
            .map(Some)
            .ok_or_else(|| field_type(source, field, expected, v)),
    }
}

fn field_type(source: &str, field: &str, expected: &str, found: &Value) -> CheckpointError {
    CheckpointError::Config {
        origin: source.to_owned(),
        field: field.to_owned(),
        what: format!("expected {expected}, found {found}"),
    }
}

/// Two configs of one checkpoint: every field both state must agree.
fn merge(a: QuantConfig, b: QuantConfig) -> Result<QuantConfig, CheckpointError> {
    fn pick<T: PartialEq + std::fmt::Debug>(
        field: &str,
        a: Option<T>,
        b: Option<T>,
        sources: &[String],
    ) -> Result<Option<T>, CheckpointError> {
        match (a, b) {
            (Some(x), Some(y)) if x != y => Err(CheckpointError::Config {
                origin: sources.join(" and "),
                field: field.to_owned(),
                what: format!(
                    "the two configs disagree: {x:?} vs {y:?}; pass the setting explicitly"
                ),
            }),
            (x, y) => Ok(x.or(y)),
        }
    }
    let sources: Vec<String> = a.sources.iter().chain(&b.sources).cloned().collect();
    Ok(QuantConfig {
        bits: pick("bits", a.bits, b.bits, &sources)?,
        group_size: pick("group_size", a.group_size, b.group_size, &sources)?,
        sym: pick("sym", a.sym, b.sym, &sources)?,
        desc_act: pick("desc_act", a.desc_act, b.desc_act, &sources)?,
        checkpoint_format: pick(
            "checkpoint_format",
            a.checkpoint_format,
            b.checkpoint_format,
            &sources,
        )?,
        quant_method: pick("quant_method", a.quant_method, b.quant_method, &sources)?,
        sources,
    })
}

/// Keys only AutoAWQ writes.
const AWQ_KEYS: [&str; 3] = ["w_bit", "q_group_size", "zero_point"];

fn reject_awq(source: &str, obj: &Map<String, Value>) -> Result<(), CheckpointError> {
    let method = obj
        .get("quant_method")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let key = AWQ_KEYS.iter().find(|k| obj.contains_key(**k));
    if method.as_deref() == Some("awq") || key.is_some() {
        let field = if method.as_deref() == Some("awq") {
            "quant_method"
        } else {
            key.copied().unwrap_or_default()
        };
        return Err(CheckpointError::Awq {
            origin: source.to_owned(),
            field: field.to_owned(),
        });
    }
    Ok(())
}

fn reject_awq_file(path: &Path) -> Result<(), CheckpointError> {
    match read_json(path)? {
        Some(obj) => reject_awq(&path.display().to_string(), &obj),
        None => Ok(()),
    }
}
