//! [`Labels`], an alert's labels or annotations: a small sorted map of shared texts in one
//! exact-size allocation.
//!
//! An alert carries about seven labels and three annotations. As `BTreeMap`s they took a
//! node each, 384 bytes with room for eleven entries; at 10,000 jobs the ~24,000 active alerts
//! held 19 MB of such nodes (issue 31). A sorted boxed slice holds the same in 32 bytes an
//! entry. The API is the part of `BTreeMap`'s the product uses, and it serialises as a map.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::text::Text;

/// Names to texts, sorted by name, each name once.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels(Box<[(Text, Text)]>);

impl Labels {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The text of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Text> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    #[cfg(test)]
    /// The stored name and text of `name`.
    pub(crate) fn get_key_value(&self, name: &str) -> Option<(&Text, &Text)> {
        self.position(name).ok().map(|i| (&self.0[i].0, &self.0[i].1))
    }

    #[cfg(test)]
    /// Whether `name` is set.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    #[cfg(test)]
    /// Sets `name` to `text` (replacing its text if it is set).
    pub(crate) fn insert(&mut self, name: Text, text: Text) {
        match self.position(&name) {
            Ok(i) => self.0[i].1 = text,
            Err(i) => {
                let mut entries = std::mem::take(&mut self.0).into_vec();
                entries.insert(i, (name, text));
                self.0 = entries.into_boxed_slice();
            }
        }
    }

    /// The entries, by name.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&Text, &Text)> + Clone {
        self.0.iter().map(|(k, v)| (k, v))
    }

    #[cfg(test)]
    /// The names, sorted.
    pub(crate) fn keys(&self) -> impl ExactSizeIterator<Item = &Text> + Clone {
        self.0.iter().map(|(k, _)| k)
    }

    #[cfg(test)]
    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl FromIterator<(Text, Text)> for Labels {
    /// As a `BTreeMap` collects: a name given twice keeps its last text.
    fn from_iter<I: IntoIterator<Item = (Text, Text)>>(entries: I) -> Self {
        let mut entries: Vec<(Text, Text)> = entries.into_iter().collect();
        // Stable: equal names stay in the order given, so the last one is the last kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut deduplicated: Vec<(Text, Text)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match deduplicated.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => deduplicated.push(entry),
            }
        }
        Labels(deduplicated.into_boxed_slice())
    }
}

impl<const N: usize> From<[(Text, Text); N]> for Labels {
    fn from(entries: [(Text, Text); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl std::ops::Index<&str> for Labels {
    type Output = Text;
    /// The text of `name`; panics when it is not set, as a `BTreeMap` does.
    fn index(&self, name: &str) -> &Text {
        self.get(name).unwrap_or_else(|| panic!("no label or annotation {name:?}"))
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a Text, &'a Text);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (Text, Text)>, fn(&'a (Text, Text)) -> (&'a Text, &'a Text)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<Text, Text>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(entries: &[(&str, &str)]) -> Labels {
        entries.iter().map(|&(k, v)| (Text::from(k), Text::from(v))).collect()
    }

    #[test]
    fn it_answers_as_the_btreemap_it_replaces() {
        let entries = [("severity", "page"), ("alertname", "A"), ("cluster", "c"), ("severity", "warning")];
        let ours = labels(&entries);
        let theirs: std::collections::BTreeMap<&str, &str> = entries.into_iter().collect();
        let pairs: Vec<(&str, &str)> = ours.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, theirs.into_iter().collect::<Vec<_>>());
        assert_eq!(ours["severity"], "warning");
        assert_eq!(ours.get("job_id"), None);
        assert!(ours.contains_key("cluster") && !ours.contains_key("clusters"));
        assert_eq!(ours.len(), 3);
    }

    #[test]
    fn insert_keeps_the_entries_sorted_and_replaces_a_set_name() {
        let mut ours = labels(&[("b", "1"), ("d", "2")]);
        ours.insert("c".into(), "3".into());
        ours.insert("a".into(), "0".into());
        ours.insert("d".into(), "4".into());
        let names: Vec<&str> = ours.keys().map(Text::as_str).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(ours["d"], "4");
    }

    #[test]
    fn it_serialises_as_a_json_map_and_reads_one_back() {
        let ours = labels(&[("summary", "s"), ("description", "d")]);
        let json = serde_json::to_string(&ours).unwrap();
        assert_eq!(json, r#"{"description":"d","summary":"s"}"#);
        assert_eq!(serde_json::from_str::<Labels>(&json).unwrap(), ours);
    }

    #[test]
    fn it_holds_its_entries_in_one_exact_allocation() {
        let ours = labels(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert_eq!(std::mem::size_of_val(&*ours.0), 3 * 2 * std::mem::size_of::<Text>());
    }
}
