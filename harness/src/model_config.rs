//! A model's dimensions from its Hugging Face `config.json`: the shapes every command builds the
//! kernel set at with `--model-config PATH` instead of the Qwen 3.5 27B default.
//!
//! Read: `hidden_size`, `intermediate_size`, `num_attention_heads`, `num_key_value_heads`
//! (default: `num_attention_heads`), `head_dim` (default: `hidden_size / num_attention_heads`),
//! `rms_norm_eps` (default 1e-6) and `attn_output_gate` (default false: the attention's Q
//! projection also yields an output gate of the same width, as in Qwen 3.5). A multimodal
//! checkpoint's decoder dimensions under `text_config` are used when the top level has none.
//! TP and batch come from the command's flags; [`Model::check`] says whether the set can be
//! built at a TP size.

use std::path::{Path, PathBuf};

use serde_json::Value;
use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};
use wavefuse_kernels::shapes::{MAX_MODEL_DIM, Model};

/// The model of the `config.json` at `path`; the error names the file and the field. Its GPTQ
/// layout is the `quantization_config` object of the file (transformers, optimum) and/or a
/// `quantize_config.json` beside it (AutoGPTQ, GPTQModel), which must agree; the default layout
/// (groups of 128, v1 zero points) without either.
pub fn read(path: &Path) -> Result<Model, ConfigError> {
    let text = read_text(path)?;
    let mut m = parse(&text).map_err(|e| e.in_file(path))?;
    let beside = path.with_file_name("quantize_config.json");
    if beside.is_file() && beside != path {
        let q = read_text(&beside)?;
        let obj = json(&q).map_err(|e| e.in_file(&beside))?;
        let Value::Object(obj) = obj else {
            return Err(ConfigError::NotAnObject("").in_file(&beside));
        };
        let layout = gptq_layout(&obj).map_err(|e| e.in_file(&beside))?;
        if has_quantization_config(&text) && layout != m.gptq {
            return Err(ConfigError::Disagree {
                beside,
                config: path.to_owned(),
                beside_layout: layout,
                config_layout: m.gptq,
            });
        }
        m.gptq = layout;
    }
    Ok(m)
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Why a model's `config.json` (or the `quantize_config.json` beside it) gives no model.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// What is wrong inside the file `path`.
    #[error("{}: {source}", path.display())]
    In {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: Box<ConfigError>,
    },
    /// The text is not JSON, or an object gives a key twice.
    #[error("not JSON: {0}")]
    Json(String),
    /// The top level is not an object (`.0` says what a config is, where it is known).
    #[error("not a JSON object{0}")]
    NotAnObject(&'static str),
    /// `quantize_config.json` and the config's `quantization_config` give different layouts.
    #[error(
        "{} and the quantization_config of {} disagree on the GPTQ layout ({beside_layout:?} vs \
         {config_layout:?})",
        beside.display(),
        config.display()
    )]
    Disagree {
        /// `quantize_config.json`.
        beside: PathBuf,
        /// `config.json`.
        config: PathBuf,
        /// The layout of `quantize_config.json`.
        beside_layout: GptqLayout,
        /// The layout of the config's `quantization_config`.
        config_layout: GptqLayout,
    },
    /// In the config's `quantization_config` object.
    #[error("quantization_config: {0}")]
    QuantizationConfig(Box<ConfigError>),
    /// A field is missing, of the wrong type, out of range or unsupported (the message names it).
    #[error("{0}")]
    Field(String),
}

impl ConfigError {
    /// This error, inside the file `path`.
    fn in_file(self, path: &Path) -> ConfigError {
        ConfigError::In {
            path: path.to_owned(),
            source: Box::new(self),
        }
    }
}

/// Where a caller still words errors as text.
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

fn has_quantization_config(text: &str) -> bool {
    json(text)
        .ok()
        .and_then(|v| v.get("quantization_config").cloned())
        .is_some_and(|q| q.is_object())
}

/// A GPTQ layout from a quantisation config object (`bits`, `group_size`, `sym`, `desc_act`,
/// `checkpoint_format`, `quant_method`); absent fields take the default layout's values.
fn gptq_layout(q: &serde_json::Map<String, Value>) -> Result<GptqLayout, ConfigError> {
    let mut l = Model::QWEN27B.gptq;
    if let Some(m) = q.get("quant_method").and_then(Value::as_str)
        && m != "gptq"
    {
        return Err(ConfigError::Field(format!(
            "quant_method = \"{m}\": the kernel set's weights are GPTQ"
        )));
    }
    match q.get("bits") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_i64() == Some(4) => {}
        Some(v) => {
            return Err(ConfigError::Field(format!(
                "bits = {v}: the kernel set's GPTQ kernels are INT4 (bits = 4)"
            )));
        }
    }
    match q.get("group_size") {
        None | Some(Value::Null) => {}
        Some(v) => {
            l.group = match v.as_i64() {
                Some(-1) => GroupSize::PerChannel,
                Some(g @ (32 | 64 | 128)) => GroupSize::Rows(g as u32),
                _ => {
                    return Err(ConfigError::Field(format!(
                        "group_size = {v}: use 32, 64, 128 or -1 (per channel)"
                    )));
                }
            }
        }
    }
    let flag = |key: &str| match q.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ConfigError::Field(format!(
            "{key} = {v}, not true or false"
        ))),
    };
    let v2 = match q.get("checkpoint_format").and_then(Value::as_str) {
        None | Some("gptq") => false,
        Some("gptq_v2") => true,
        Some(f) => {
            return Err(ConfigError::Field(format!(
                "checkpoint_format = \"{f}\": use gptq or gptq_v2"
            )));
        }
    };
    l.zero = match (flag("sym")?, v2) {
        (Some(true), _) => ZeroPoint::Symmetric,
        (_, true) => ZeroPoint::V2,
        _ => ZeroPoint::V1,
    };
    l.act_order = flag("desc_act")?.unwrap_or(false);
    Ok(l)
}

/// A JSON text as a value: a leading UTF-8 byte-order mark (some Windows editors write one) is
/// skipped, and an object with a key given twice is an error naming the key (serde_json would
/// silently keep the last).
pub fn json(text: &str) -> Result<Value, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str::<Strict>(text)
        .map(|s| s.0)
        .map_err(|e| ConfigError::Json(e.to_string()))
}

/// A JSON value whose objects have distinct keys.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(d).map(|s: Strict| s.0)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key `{key}` (which of the two is meant?)"
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// The model of a `config.json` text.
pub fn parse(text: &str) -> Result<Model, ConfigError> {
    let root = json(text)?;
    let top = root.as_object().ok_or(ConfigError::NotAnObject(
        " (a Hugging Face config.json is one)",
    ))?;
    let cfg = match (top.get("hidden_size"), top.get("text_config")) {
        (None, Some(Value::Object(t))) => t,
        _ => top,
    };
    let int = |key: &str| -> Result<Option<usize>, ConfigError> {
        match cfg.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let n = v
                    .as_u64()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| field(format!("`{key}` is {v}, not a positive integer")))?;
                bounded(key, n).map(Some)
            }
        }
    };
    let need = |key: &str| int(key)?.ok_or_else(|| field(format!("no `{key}`")));
    let hidden = need("hidden_size")?;
    let ffn = need("intermediate_size")?;
    let heads = need("num_attention_heads")?;
    let kv_heads = int("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = match int("head_dim")? {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(field(format!(
                "no `head_dim`, and hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            )));
        }
    };
    let gate = match cfg.get("attn_output_gate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(field(format!(
                "`attn_output_gate` is {v}, not true or false"
            )));
        }
    };
    let rms_eps = match cfg.get("rms_norm_eps") {
        None | Some(Value::Null) => 1e-6,
        Some(v) => v
            .as_f64()
            .filter(|e| e.is_finite() && *e > 0.0)
            .ok_or_else(|| field(format!("`rms_norm_eps` is {v}, not a positive number")))?,
    };
    let gptq = match root
        .get("quantization_config")
        .or_else(|| cfg.get("quantization_config"))
    {
        None | Some(Value::Null) => Model::QWEN27B.gptq,
        Some(Value::Object(q)) => {
            gptq_layout(q).map_err(|e| ConfigError::QuantizationConfig(Box::new(e)))?
        }
        Some(v) => {
            return Err(field(format!(
                "`quantization_config` is {v}, not an object"
            )));
        }
    };
    // Each factor is at most MAX_MODEL_DIM (2^20), so a product of three fits u64.
    let width = |what: &str, factors: &[(&str, usize)], gate: bool| {
        let gate_factor = if gate { 2 } else { 1 };
        let n = factors
            .iter()
            .fold(gate_factor, |acc, &(_, x)| acc * x as u64);
        if n as usize <= MAX_MODEL_DIM {
            return Ok(n as usize);
        }
        let mut named: Vec<String> = factors.iter().map(|(f, x)| format!("{f} {x}")).collect();
        if gate {
            named.push("2 (attn_output_gate)".into());
        }
        Err(field(format!(
            "the {what} ({}) is {n}, more than {MAX_MODEL_DIM}, the largest dimension wavefuse builds kernels at",
            named.join(" × ")
        )))
    };
    let q_gate = width(
        "Q width",
        &[("num_attention_heads", heads), ("head_dim", head_dim)],
        gate,
    )?;
    let kv = width(
        "KV width",
        &[("num_key_value_heads", kv_heads), ("head_dim", head_dim)],
        false,
    )?;
    Ok(Model {
        hidden,
        ffn,
        q_gate,
        kv,
        head_dim,
        rms_eps,
        gptq,
    })
}

/// `n` from field `key` if it is at most [`MAX_MODEL_DIM`] (issue 39: unbounded dimensions
/// wrapped in the products built from them).
fn bounded(key: &str, n: u64) -> Result<usize, ConfigError> {
    if n <= MAX_MODEL_DIM as u64 {
        Ok(n as usize)
    } else {
        Err(field(format!(
            "`{key}` is {n}, more than {MAX_MODEL_DIM}, the largest dimension wavefuse builds kernels at"
        )))
    }
}

fn field(message: String) -> ConfigError {
    ConfigError::Field(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen 3.5 27B's decoder dimensions, written as its config states them, give the default.
    #[test]
    fn the_default_model_from_its_config() {
        let m = parse(
            r#"{"architectures": ["Qwen3_5ForCausalLM"], "text_config": {
                "hidden_size": 5120, "intermediate_size": 17408, "num_attention_heads": 24,
                "num_key_value_heads": 4, "head_dim": 256, "rms_norm_eps": 1e-06,
                "attn_output_gate": true}}"#,
        )
        .unwrap();
        assert_eq!(m, Model::QWEN27B);
        assert_eq!(m.name(), "qwen27b");
    }

    /// A Llama-style config: head_dim from hidden / heads, no gate, its own epsilon.
    #[test]
    fn a_small_llama_config() {
        let m = parse(
            r#"{"hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
                "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "num_hidden_layers": 22}"#,
        )
        .unwrap();
        assert_eq!(
            (m.hidden, m.ffn, m.q_gate, m.kv, m.head_dim),
            (2048, 5632, 2048, 256, 64)
        );
        assert_eq!(m.rms_eps, 1e-5);
        assert_eq!(m.name(), "h2048-f5632-q2048-kv256-d64");
        assert!(m.check(2, 128).is_ok());
        // 5632 / 4 = 1408 = 11 groups of 128: fine; / 8 = 704: not whole groups.
        let e = m.check(8, 128).unwrap_err();
        assert!(e.contains("intermediate_size / TP = 704"), "{e}");
    }

    /// A GPTQ checkpoint's config: the layout from `quantization_config` (transformers) and from
    /// a `quantize_config.json` beside it (AutoGPTQ), which must agree; names say the layout.
    #[test]
    fn a_gptq_checkpoints_quantization_config_is_the_layout() {
        let llama = r#""hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32"#;
        let m = parse(&format!(
            r#"{{{llama}, "quantization_config": {{"quant_method": "gptq", "bits": 4,
                "group_size": 64, "sym": true, "desc_act": false}}}}"#
        ))
        .unwrap();
        assert_eq!(
            m.gptq,
            GptqLayout::new(GroupSize::Rows(64), ZeroPoint::Symmetric)
        );
        assert_eq!(m.name(), "h2048-f5632-q2048-kv2048-d64-g64-sym");
        let v2 = parse(&format!(
            r#"{{{llama}, "quantization_config": {{"bits": 4, "group_size": -1, "sym": false,
                "checkpoint_format": "gptq_v2"}}}}"#
        ))
        .unwrap();
        assert_eq!(
            v2.gptq,
            GptqLayout::new(GroupSize::PerChannel, ZeroPoint::V2)
        );
        for (q, says) in [
            (r#"{"bits": 8}"#, "bits = 8"),
            (r#"{"group_size": 100}"#, "group_size = 100"),
            (r#"{"quant_method": "awq"}"#, "quant_method = \"awq\""),
            (r#"{"sym": "yes"}"#, "sym = \"yes\""),
        ] {
            let e = parse(&format!(r#"{{{llama}, "quantization_config": {q}}}"#))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(says) && e.contains("quantization_config"),
                "{q}: {e}"
            );
        }
        // quantize_config.json beside config.json: read, and checked against the inline one.
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.json");
        std::fs::write(&cfg, format!("{{{llama}}}")).unwrap();
        std::fs::write(
            dir.path().join("quantize_config.json"),
            r#"{"bits": 4, "group_size": 32}"#,
        )
        .unwrap();
        assert_eq!(read(&cfg).unwrap().gptq.group, GroupSize::Rows(32));
        std::fs::write(
            &cfg,
            format!(r#"{{{llama}, "quantization_config": {{"bits": 4, "group_size": 128}}}}"#),
        )
        .unwrap();
        let e = read(&cfg).unwrap_err().to_string();
        assert!(e.contains("disagree"), "{e}");
    }

    /// A key given twice is an error naming it (it silently took the last); a UTF-8 BOM is
    /// accepted (it was "not valid JSON"); both also inside nested objects (issue 39, item 9).
    #[test]
    fn duplicate_keys_are_refused_and_a_bom_is_accepted() {
        let good = r#"{"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 128}"#;
        let plain = parse(good);
        let with_bom = parse(&format!("\u{feff}{good}"));
        assert_eq!(format!("{with_bom:?}"), format!("{plain:?}"));
        assert!(with_bom.is_ok(), "{with_bom:?}");
        let twice = good.replace(
            "\"head_dim\": 128",
            "\"head_dim\": 128, \"hidden_size\": 1024",
        );
        let e = parse(&twice).unwrap_err().to_string();
        assert!(e.contains("duplicate key `hidden_size`"), "{e}");
        assert!(e.contains("line"), "{e}");
        let nested = r#"{"text_config": {"hidden_size": 1, "hidden_size": 2}}"#;
        let e = parse(nested).unwrap_err().to_string();
        assert!(e.contains("duplicate key `hidden_size`"), "{e}");
    }

    #[test]
    fn bad_configs_name_the_field() {
        for (text, says) in [
            ("[1, 2]", "not a JSON object"),
            ("{", "not JSON"),
            (r#"{"hidden_size": 2048}"#, "no `intermediate_size`"),
            (
                r#"{"hidden_size": 2048, "intermediate_size": -3, "num_attention_heads": 8}"#,
                "`intermediate_size` is -3",
            ),
            (
                r#"{"hidden_size": 2050, "intermediate_size": 8, "num_attention_heads": 8}"#,
                "no `head_dim`",
            ),
            (
                r#"{"hidden_size": 2048, "intermediate_size": 8, "num_attention_heads": 8, "rms_norm_eps": "x"}"#,
                "`rms_norm_eps` is \"x\"",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    /// Issue 39 items 4 and 5: dimensions were unbounded and their products wrapped (`KV width =
    /// 18446744073709551612 is not a multiple of …`, `n=9223372036854776288`; `hidden_size` 2^63
    /// panicked generating the workload). Every field is now at most `MAX_MODEL_DIM` and every
    /// product is checked, the error naming the fields.
    #[test]
    fn invalid_dimensions_are_bounded_and_products_checked() {
        let cfg = |h: u64, f: u64, heads: u64, kv: u64, d: u64| {
            format!(
                r#"{{"hidden_size": {h}, "intermediate_size": {f}, "num_attention_heads": {heads},
                    "num_key_value_heads": {kv}, "head_dim": {d}, "attn_output_gate": true}}"#
            )
        };
        let big = 1u64 << 63;
        for (text, says) in [
            (cfg(big, 8, 8, 8, 8), format!("`hidden_size` is {big}, more than 1048576")),
            (cfg(8, big + 480, 8, 8, 8), format!("`intermediate_size` is {}", big + 480)),
            (cfg(8, 8, 1 << 20, 8, 8), "the Q width (num_attention_heads 1048576 × head_dim 8 × 2 (attn_output_gate)) is 16777216, more than 1048576".into()),
            (cfg(8, 8, 1, 1 << 20, 1 << 19), "the KV width (num_key_value_heads 1048576 × head_dim 524288) is 549755813888".into()),
            (cfg(8, 8, 8, 8, 1 << 21), "`head_dim` is 2097152".into()),
            (cfg(8, 8, 8, 4611686018427387903, 4), "`num_key_value_heads` is 4611686018427387903".into()),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&says), "{text}: {e}");
        }
        // At the bound: accepted (whether a weight of 2^20 × 2^20 then fits the generated code's
        // indices is the lowering's refusal, not the config's).
        let m = parse(&cfg(1 << 20, 1 << 20, 2048, 8, 256)).unwrap();
        assert_eq!((m.hidden, m.q_gate, m.kv), (1 << 20, 1 << 20, 2048));
        // Its weights (2^40 elements) are more than the textual IR takes: the set is not built
        // at it (it printed IR the parser refuses).
        let e = m.check_tp(1).unwrap_err();
        assert!(e.contains("hidden_size 1048576 × intermediate_size 1048576 has 1099511627776 elements, more than 17179869184"), "{e}");
        let e = Model {
            hidden: (1 << 20) + 8,
            ..m
        }
        .check_tp(1)
        .unwrap_err();
        assert!(
            e.contains("hidden_size = 1048584 is more than 1048576"),
            "{e}"
        );
    }
}
