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

use std::path::Path;

use serde_json::Value;
use wavefuse_kernels::shapes::Model;

/// The model of the `config.json` at `path`; the error names the file and the field.
pub fn read(path: &Path) -> Result<Model, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The model of a `config.json` text.
pub fn parse(text: &str) -> Result<Model, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let top = root
        .as_object()
        .ok_or("not a JSON object (a Hugging Face config.json is one)")?;
    let cfg = match (top.get("hidden_size"), top.get("text_config")) {
        (None, Some(Value::Object(t))) => t,
        _ => top,
    };
    let int = |key: &str| -> Result<Option<usize>, String> {
        match cfg.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| Some(n as usize))
                .ok_or_else(|| format!("`{key}` is {v}, not a positive integer")),
        }
    };
    let need = |key: &str| int(key)?.ok_or_else(|| format!("no `{key}`"));
    let hidden = need("hidden_size")?;
    let ffn = need("intermediate_size")?;
    let heads = need("num_attention_heads")?;
    let kv_heads = int("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = match int("head_dim")? {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(format!(
                "no `head_dim`, and hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            ));
        }
    };
    let gate = match cfg.get("attn_output_gate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("`attn_output_gate` is {v}, not true or false")),
    };
    let rms_eps = match cfg.get("rms_norm_eps") {
        None | Some(Value::Null) => 1e-6,
        Some(v) => v
            .as_f64()
            .filter(|e| e.is_finite() && *e > 0.0)
            .ok_or_else(|| format!("`rms_norm_eps` is {v}, not a positive number"))?,
    };
    Ok(Model {
        hidden,
        ffn,
        q_gate: heads * head_dim * if gate { 2 } else { 1 },
        kv: kv_heads * head_dim,
        head_dim,
        rms_eps,
    })
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
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
