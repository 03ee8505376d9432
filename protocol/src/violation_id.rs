//! The self-describing `violation_id` of an evaluate record (seed 000 §5, D23):
//! `rv1:<layout16>:<deck16>:<rule>:<x pm>:<y pm>:<tile>:<group>:<index>`.
//!
//! The worker writes it (evaluate) and reads it back (optimize); the host reads it to
//! name what a cache miss needs. One type, so the three agree: [`ViolationId`]'s
//! `Display` writes the id, its `FromStr` parses it. `%` and `:` in the rule id are
//! escaped (`%25`, `%3A`) so the `:`-separated parts stay unambiguous.

use std::fmt;
use std::str::FromStr;

/// The version tag every id starts with.
const TAG: &str = "rv1";

/// The parts of a `violation_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViolationId {
    /// First 16 hex digits of the layout file's SHA-256.
    pub layout_sha16: String,
    /// First 16 hex digits of the rule deck's hash (without its `sha256:` prefix).
    pub deck16: String,
    /// The rule id, unescaped.
    pub rule_id: String,
    /// The violation's location (marker centre), picometres, layout frame.
    pub at_pm: (i64, i64),
    /// The report tile of the record (`T_<ix>_<iy>`).
    pub tile_id: String,
    /// The record's `violation_group_id` (16 hex digits).
    pub group_id: String,
    /// Index of the record in its group (the canonical record is 0).
    pub index: usize,
}

impl ViolationId {
    /// An id from the full layout SHA-256 (hex) and deck hash (`sha256:<hex>` or hex):
    /// both are cut to their first 16 hex digits.
    #[must_use]
    pub fn new(
        layout_sha256: &str,
        deck_hash: &str,
        rule_id: &str,
        at_pm: (i64, i64),
        tile_id: &str,
        group_id: &str,
        index: usize,
    ) -> Self {
        let first16 = |s: &str| s.chars().take(16).collect::<String>();
        Self {
            layout_sha16: first16(layout_sha256),
            deck16: first16(deck_hash.trim_start_matches("sha256:")),
            rule_id: rule_id.to_owned(),
            at_pm,
            tile_id: tile_id.to_owned(),
            group_id: group_id.to_owned(),
            index,
        }
    }

    /// The location in nm (`at_pm` / 1000), as reports write locations.
    #[must_use]
    pub fn location_nm(&self) -> [f64; 2] {
        [self.at_pm.0 as f64 / 1000.0, self.at_pm.1 as f64 / 1000.0]
    }
}

/// `%` first, so an escaped `:` is not escaped again.
fn escape_rule(rule: &str) -> String {
    rule.replace('%', "%25").replace(':', "%3A")
}

/// The inverse of [`escape_rule`]: `%3A` first, so `%253A` (an escaped `%3A`) comes back
/// as `%3A`.
fn unescape_rule(rule: &str) -> String {
    rule.replace("%3A", ":").replace("%25", "%")
}

impl fmt::Display for ViolationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{TAG}:{}:{}:{}:{}:{}:{}:{}:{}",
            self.layout_sha16,
            self.deck16,
            escape_rule(&self.rule_id),
            self.at_pm.0,
            self.at_pm.1,
            self.tile_id,
            self.group_id,
            self.index
        )
    }
}

/// Why a string is not a `violation_id`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a reticle violation_id: {0}")]
pub struct ParseViolationIdError(&'static str);

impl FromStr for ViolationId {
    type Err = ParseViolationIdError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = id.split(':').collect();
        let [tag, layout, deck, rule, x, y, tile, group, index] = parts.as_slice() else {
            return Err(ParseViolationIdError("not 9 ':'-separated parts"));
        };
        if *tag != TAG {
            return Err(ParseViolationIdError("does not start with rv1"));
        }
        let hex16 = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !(hex16(layout) && hex16(deck) && hex16(group)) {
            return Err(ParseViolationIdError(
                "layout, deck and group parts must be 16 hex digits",
            ));
        }
        if rule.is_empty() {
            return Err(ParseViolationIdError("empty rule id"));
        }
        let coordinate = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| ParseViolationIdError("location is not integer picometres"))
        };
        Ok(Self {
            layout_sha16: (*layout).to_owned(),
            deck16: (*deck).to_owned(),
            rule_id: unescape_rule(rule),
            at_pm: (coordinate(x)?, coordinate(y)?),
            tile_id: (*tile).to_owned(),
            group_id: (*group).to_owned(),
            index: index
                .parse()
                .map_err(|_| ParseViolationIdError("index is not a whole number"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str =
        "rv1:0123456789abcdef:fedcba9876543210:M1.W%3AX:1500:-2000:T_1_0:00112233aabbccdd:3";

    #[test]
    fn parses_every_part() {
        let id: ViolationId = ID.parse().unwrap();
        assert_eq!(id.layout_sha16, "0123456789abcdef");
        assert_eq!(id.deck16, "fedcba9876543210");
        assert_eq!(id.rule_id, "M1.W:X");
        assert_eq!(id.at_pm, (1500, -2000));
        assert_eq!(id.location_nm(), [1.5, -2.0]);
        assert_eq!(id.tile_id, "T_1_0");
        assert_eq!(id.group_id, "00112233aabbccdd");
        assert_eq!(id.index, 3);
    }

    #[test]
    fn round_trips() {
        let id: ViolationId = ID.parse().unwrap();
        assert_eq!(id.to_string(), ID);
        for rule in ["M1.W", "a:b", "100%", "%3A", "%25:%", "::", "%"] {
            let id = ViolationId {
                rule_id: rule.to_owned(),
                ..id.clone()
            };
            let text = id.to_string();
            assert_eq!(text.split(':').count(), 9, "{text}");
            assert_eq!(text.parse::<ViolationId>().unwrap(), id, "{text}");
        }
    }

    #[test]
    fn new_cuts_the_hashes_to_16_digits() {
        let sha = "0123456789abcdef".repeat(4);
        let deck = format!("sha256:{}", "fedcba9876543210".repeat(4));
        let id = ViolationId::new(&sha, &deck, "R:1", (7, -8), "T_0_-1", "00112233aabbccdd", 0);
        assert_eq!(
            id.to_string(),
            "rv1:0123456789abcdef:fedcba9876543210:R%3A1:7:-8:T_0_-1:00112233aabbccdd:0"
        );
    }

    #[test]
    fn escaping_is_percent_then_colon() {
        assert_eq!(escape_rule("a%3Ab:c"), "a%253Ab%3Ac");
        assert_eq!(unescape_rule("a%253Ab%3Ac"), "a%3Ab:c");
    }

    #[test]
    fn rejects_foreign_strings() {
        let bad = [
            "",
            "v1a2b3",
            "rv1:x",
            "rv2:0123456789abcdef:fedcba9876543210:R:1:2:T:00112233aabbccdd:0",
            "rv1:xyz:fedcba9876543210:R:1:2:T:00112233aabbccdd:0",
            "rv1:0123456789abcdef:fedcba987654321:R:1:2:T:00112233aabbccdd:0",
            "rv1:0123456789abcdef:fedcba9876543210:R:1:2:T:0011223g3aabbccd:0",
            "rv1:0123456789abcdef:fedcba9876543210::1:2:T:00112233aabbccdd:0",
            "rv1:0123456789abcdef:fedcba9876543210:R:1.5:2:T:00112233aabbccdd:0",
            "rv1:0123456789abcdef:fedcba9876543210:R:1:2:T:00112233aabbccdd:x",
            "rv1:0123456789abcdef:fedcba9876543210:R:1:2:T:00112233aabbccdd:-1",
            "rv1:0123456789abcdef:fedcba9876543210:R:1:2:T:00112233aabbccdd:0:extra",
        ];
        for text in bad {
            assert!(text.parse::<ViolationId>().is_err(), "{text:?}");
        }
        assert!(ID.replace(":3", ":x").parse::<ViolationId>().is_err());
    }
}
