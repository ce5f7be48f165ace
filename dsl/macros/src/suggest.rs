//! "Did you mean …?" for misspelt keywords, op names and value names.

/// The candidate closest to `word` by edit distance, if it is close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    // A short form of the other (`eps` for `epsilon`) counts as close.
    let abbreviates =
        |c: &str| c.len() >= 3 && word.len() >= 3 && (word.starts_with(c) || c.starts_with(word));
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (if abbreviates(c) { 1 } else { distance(word, c) }, c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"`, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// The declaration keyword (`in` or `out`) that `word` misspells or spells out: `inptu`, `input`
/// and `inputs` all mean `in`. The spelled-out forms are candidates too because `in` is too short
/// for either a distance or an abbreviation to reach `input`.
pub fn declaration_keyword(word: &str) -> Option<&'static str> {
    const FORMS: [(&str, &str); 4] = [
        ("in", "in"),
        ("out", "out"),
        ("input", "in"),
        ("output", "out"),
    ];
    let forms = || FORMS.iter().map(|(form, _)| *form);
    if word == "in" || word == "out" {
        return None;
    }
    let form = forms()
        .find(|f| *f == word)
        .or_else(|| closest(word, forms()))?;
    FORMS.iter().find(|(f, _)| *f == form).map(|(_, kw)| *kw)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::{closest, declaration_keyword};

    #[test]
    fn typos_and_abbreviations_are_close() {
        assert_eq!(closest("rmsnrom", ["rmsnorm", "silu"]), Some("rmsnorm"));
        assert_eq!(
            closest("col_paralel", ["row_parallel", "col_parallel"]),
            Some("col_parallel")
        );
        assert_eq!(closest("epsilon", ["eps"]), Some("eps"));
        assert_eq!(closest("fp16", ["f16", "bf16"]), Some("f16"));
    }

    #[test]
    fn unrelated_words_are_not() {
        assert_eq!(closest("softmax", ["silu", "rmsnorm", "add"]), None);
        assert_eq!(closest("x", ["y"]), Some("y"));
        assert_eq!(closest("x", ["x"]), None);
    }

    #[test]
    fn spelled_out_declaration_keywords_are_the_keywords() {
        assert_eq!(declaration_keyword("input"), Some("in"));
        assert_eq!(declaration_keyword("inputs"), Some("in"));
        assert_eq!(declaration_keyword("inptu"), Some("in"));
        assert_eq!(declaration_keyword("output"), Some("out"));
        assert_eq!(declaration_keyword("ouput"), Some("out"));
        assert_eq!(declaration_keyword("weight"), None);
        assert_eq!(declaration_keyword("out"), None);
    }
}
