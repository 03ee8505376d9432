//! Tool names as agents spell them (seed 004, method-token normalization): `listLayers`,
//! `list-layers`, `List_Layers` and `list layers` all reach `list_layers`. Names are
//! compared by their ASCII letters and digits, lowercased, the folding libmcp applies to
//! method tokens (its helper is crate-private, so the rule is restated here). An exact
//! name always wins; a spelling that folds to several tools is refused with the candidates,
//! never guessed (docs/DECISIONS.md D134).

/// A name reduced to its ASCII letters and digits, lowercased.
#[must_use]
pub fn fold(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// What a client's spelling of a tool name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolName {
    /// One tool: its registered name.
    Canonical(&'static str),
    /// Several tools fold to the spelling: their registered names, sorted.
    Ambiguous(Vec<&'static str>),
    /// No tool has that name or folds to it.
    Unknown,
}

/// Resolves `spelling` among the registered `names`.
pub fn resolve(names: impl IntoIterator<Item = &'static str>, spelling: &str) -> ToolName {
    let folded = fold(spelling);
    let mut matches = Vec::new();
    for name in names {
        if name == spelling {
            return ToolName::Canonical(name);
        }
        if !folded.is_empty() && fold(name) == folded {
            matches.push(name);
        }
    }
    matches.sort_unstable();
    match matches.as_slice() {
        [] => ToolName::Unknown,
        [one] => ToolName::Canonical(one),
        _ => ToolName::Ambiguous(matches),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 4] = ["list_layers", "list_cells", "evaluate", "get_schema"];

    #[test]
    fn respellings_reach_the_one_tool() {
        for spelling in [
            "list_layers",
            "listLayers",
            "list-layers",
            "List_Layers",
            "LIST LAYERS",
            "ListLayers",
            "list.layers",
        ] {
            assert_eq!(
                resolve(NAMES, spelling),
                ToolName::Canonical("list_layers"),
                "{spelling}"
            );
        }
        assert_eq!(resolve(NAMES, "Evaluate"), ToolName::Canonical("evaluate"));
    }

    #[test]
    fn unknown_and_empty_spellings_match_nothing() {
        for spelling in ["list_layer", "layers_list", "", "--", "évaluate"] {
            assert_eq!(resolve(NAMES, spelling), ToolName::Unknown, "{spelling}");
        }
    }

    #[test]
    fn a_spelling_of_two_tools_is_ambiguous_and_an_exact_name_is_not() {
        let names = ["list_layers", "listlayers", "list-layers", "evaluate"];
        assert_eq!(
            resolve(names, "ListLayers"),
            ToolName::Ambiguous(vec!["list-layers", "list_layers", "listlayers"])
        );
        assert_eq!(
            resolve(names, "listlayers"),
            ToolName::Canonical("listlayers")
        );
        assert_eq!(
            resolve(names, "list_layers"),
            ToolName::Canonical("list_layers")
        );
    }
}
