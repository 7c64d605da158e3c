//! Paging and filters of `/api/v1/jobs` and `/api/v1/alerts` (docs/api.md, "Paging"): the query,
//! the opaque cursor (the sort key of the last item handed out, hex-encoded, so a page starts
//! after it whatever came or went before it), and the totals every answer carries. Pure.

use serde::{Deserialize, Serialize};

use crate::health::Health;

/// Items in one answer when the query names no `limit`: with fewer items the answer holds all
/// of them, as before paging, plus the totals.
pub(crate) const DEFAULT_LIMIT: usize = 500;
/// The largest `limit` a query may ask.
pub(crate) const MAX_LIMIT: usize = 10_000;

/// The query string of `/api/v1/jobs` (and, but for the filters, of `/api/v1/alerts`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ListQuery {
    /// At most this many items ([`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    pub(crate) limit: Option<usize>,
    /// The `next_cursor` of the previous answer: this answer starts after it.
    pub(crate) cursor: Option<String>,
    /// Only this cluster's jobs.
    pub(crate) cluster: Option<String>,
    /// Only jobs in these Flink states (comma-separated, any case: `running,restarting`).
    pub(crate) state: Option<String>,
    /// Only jobs of these healths (comma-separated: `critical,warning`).
    pub(crate) health: Option<String>,
    /// Only jobs whose name contains this (any case).
    pub(crate) name: Option<String>,
}

/// Why a query is refused (HTTP 400, the text says which parameter and what was expected).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct QueryError(pub(crate) String);

impl ListQuery {
    /// The limit asked, defaulted and checked.
    pub(crate) fn limit(&self) -> Result<usize, QueryError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(n) => Err(QueryError(format!("limit: {n}: expected 1 to {MAX_LIMIT}"))),
        }
    }

    /// The cursor's key, when one is given.
    pub(crate) fn cursor_key(&self) -> Result<Option<String>, QueryError> {
        self.cursor
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(|c| {
                decode(c)
                    .ok_or_else(|| QueryError(format!("cursor: {c:?}: expected a next_cursor of this API")))
            })
            .transpose()
    }

    /// The job filter, checked (an unknown health is refused: it would match nothing).
    pub(crate) fn job_filter(&self) -> Result<JobFilter, QueryError> {
        let list = |v: &Option<String>| -> Vec<String> {
            v.as_deref()
                .unwrap_or("")
                .split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let healths = list(&self.health);
        for h in &healths {
            if !HEALTHS.iter().any(|(name, _)| name == h) {
                let names: Vec<&str> = HEALTHS.iter().map(|(n, _)| *n).collect();
                return Err(QueryError(format!("health: {h:?}: expected one of {}", names.join(", "))));
            }
        }
        Ok(JobFilter {
            cluster: self.cluster.clone().filter(|c| !c.is_empty()),
            states: list(&self.state),
            healths: healths
                .iter()
                .filter_map(|h| HEALTHS.iter().find(|(n, _)| n == h).map(|(_, v)| *v))
                .collect(),
            name: self.name.as_deref().map(str::to_lowercase).filter(|n| !n.is_empty()),
        })
    }
}

/// Healths by their API name.
const HEALTHS: [(&str, Health); 5] = [
    ("critical", Health::Critical),
    ("warning", Health::Warning),
    ("pending", Health::Pending),
    ("unknown", Health::Unknown),
    ("ok", Health::Ok),
];

/// Which jobs a query keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct JobFilter {
    cluster: Option<String>,
    states: Vec<String>,
    healths: Vec<Health>,
    name: Option<String>,
}

impl JobFilter {
    /// Whether a job of `cluster`, Flink state `state`, `health` and `name` is kept.
    pub(crate) fn keeps(&self, cluster: &str, state: &str, health: Health, name: &str) -> bool {
        self.cluster.as_deref().is_none_or(|c| c == cluster)
            && (self.states.is_empty() || self.states.iter().any(|s| s.eq_ignore_ascii_case(state)))
            && (self.healths.is_empty() || self.healths.contains(&health))
            && self.name.as_deref().is_none_or(|n| name.to_lowercase().contains(n))
    }
}

/// How many jobs have each health (`/api/v1/jobs`' `counts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct HealthCounts {
    pub(crate) critical: usize,
    pub(crate) warning: usize,
    pub(crate) pending: usize,
    pub(crate) unknown: usize,
    pub(crate) ok: usize,
}

impl HealthCounts {
    /// Counts one job of `health`.
    pub(crate) fn add(&mut self, health: Health) {
        match health {
            Health::Critical => self.critical += 1,
            Health::Warning => self.warning += 1,
            Health::Pending => self.pending += 1,
            Health::Unknown => self.unknown += 1,
            Health::Ok => self.ok += 1,
        }
    }
}

/// Keys are compared as strings: a separator below every printable character keeps the parts'
/// order (a name that is a prefix of another sorts first).
pub(crate) const KEY_SEPARATOR: char = '\u{1}';

/// One page of `keys` (sorted ascending, unique): the indices of the items after `after`, at most
/// `limit` of them, and the cursor of the next page when more follow.
pub(crate) fn page(
    keys: &[&str],
    after: Option<&str>,
    limit: usize,
) -> (std::ops::Range<usize>, Option<String>) {
    let start = after.map_or(0, |a| keys.partition_point(|k| *k <= a));
    let end = (start + limit).min(keys.len());
    let next = (end < keys.len() && end > start).then(|| encode(keys[end - 1]));
    (start..end, next)
}

/// A key as a cursor: hex, safe in a query string.
pub(crate) fn encode(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

/// A cursor back to its key; `None` when it is not one.
pub(crate) fn decode(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..cursor.len()).step_by(2).map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_walks_every_key_once_in_order() {
        let owned: Vec<String> = (0..23).map(|i| format!("k{i:03}")).collect();
        let keys: Vec<&str> = owned.iter().map(String::as_str).collect();
        for limit in [1, 4, 5, 22, 23, 100] {
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let after = cursor.as_deref().map(|c| decode(c).unwrap());
                let (range, next) = page(&keys, after.as_deref(), limit);
                assert!(range.len() <= limit);
                seen.extend_from_slice(&keys[range]);
                match next {
                    Some(n) => cursor = Some(n),
                    None => break,
                }
            }
            assert_eq!(seen, keys, "limit {limit}");
        }
    }

    #[test]
    fn a_page_starts_after_its_cursor_even_when_that_item_went() {
        let keys = ["a", "c", "d"];
        // "b" was handed out last and has gone since: the page starts at the next one.
        assert_eq!(page(&keys, Some("b"), 10), (1..3, None));
        assert_eq!(page(&keys, Some("a"), 1), (1..2, Some(encode("c"))));
        assert_eq!(page(&keys, Some("z"), 10), (3..3, None));
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let key = format!("0{KEY_SEPARATOR}demo-failing-1004{KEY_SEPARATOR}démo");
        assert_eq!(decode(&encode(&key)).as_deref(), Some(key.as_str()));
        assert_eq!(decode("zz"), None);
        assert_eq!(decode("abc"), None);
        let q = ListQuery { cursor: Some("nothex".into()), ..Default::default() };
        assert!(q.cursor_key().unwrap_err().0.starts_with("cursor: \"nothex\": expected"));
    }

    #[test]
    fn limits_default_and_are_bounded() {
        assert_eq!(ListQuery::default().limit(), Ok(DEFAULT_LIMIT));
        assert_eq!(ListQuery { limit: Some(7), ..Default::default() }.limit(), Ok(7));
        let zero = ListQuery { limit: Some(0), ..Default::default() }.limit().unwrap_err();
        assert_eq!(zero.0, "limit: 0: expected 1 to 10000");
        assert!(ListQuery { limit: Some(MAX_LIMIT + 1), ..Default::default() }.limit().is_err());
    }

    #[test]
    fn filters_keep_what_they_name() {
        let q = ListQuery {
            cluster: Some("prod".into()),
            state: Some("running, RESTARTING".into()),
            health: Some("critical,warning".into()),
            name: Some("Orders".into()),
            ..Default::default()
        };
        let f = q.job_filter().unwrap();
        assert!(f.keeps("prod", "RUNNING", Health::Critical, "big-orders-7"));
        assert!(f.keeps("prod", "RESTARTING", Health::Warning, "ORDERS"));
        assert!(!f.keeps("test", "RUNNING", Health::Critical, "orders"));
        assert!(!f.keeps("prod", "FAILED", Health::Critical, "orders"));
        assert!(!f.keeps("prod", "RUNNING", Health::Ok, "orders"));
        assert!(!f.keeps("prod", "RUNNING", Health::Critical, "payments"));
        assert!(ListQuery::default().job_filter().unwrap().keeps("x", "CREATED", Health::Unknown, ""));
        let bad = ListQuery { health: Some("sick".into()), ..Default::default() }.job_filter().unwrap_err();
        assert_eq!(bad.0, "health: \"sick\": expected one of critical, warning, pending, unknown, ok");
    }
}
