//! [`Text`], an alert's label or annotation text shared between the alerts that carry it, and
//! the [`Interner`] that shares them.
//!
//! At 10,000 jobs the evaluator holds ~20,000 active alerts, and each carried its own copy of
//! every label name and value (`alertname`, `cluster`, `severity`, …) and of its runbook URL:
//! 3 KB an alert, 66 MB of the heap (issue 31). An interned text is one allocation for all.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable, shared string: cloning it copies a pointer.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Text(Arc<str>);

impl Text {
    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(s.into())
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Text(s.into())
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Self {
        Text(s.as_str().into())
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        &*self.0 == other.as_str()
    }
}

impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Text::from)
    }
}

/// The texts in use, each held once. [`Interner::prune`] forgets those no alert holds any more.
#[derive(Default)]
pub(crate) struct Interner {
    texts: HashSet<Text>,
}

impl Interner {
    /// The shared text equal to `s` (added when new).
    pub(crate) fn get(&mut self, s: &str) -> Text {
        if let Some(t) = self.texts.get(s) {
            return t.clone();
        }
        let t = Text::from(s);
        self.texts.insert(t.clone());
        t
    }

    /// Forgets the texts held by nothing but the interner.
    pub(crate) fn prune(&mut self) {
        self.texts.retain(|t| Arc::strong_count(&t.0) > 1);
    }

    #[cfg(test)]
    /// How many texts are held.
    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    #[cfg(test)]
    /// Whether none are.
    pub(crate) fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_allocation_until_nothing_holds_them() {
        let mut interner = Interner::default();
        let a = interner.get("cluster");
        let b = interner.get(&String::from("cluster"));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!((interner.len(), a.as_str()), (1, "cluster"));
        interner.get("gone");
        interner.prune();
        assert_eq!(interner.len(), 1, "'gone' is held by nothing else");
        drop((a, b));
        interner.prune();
        assert!(interner.is_empty());
    }

    #[test]
    fn a_text_reads_and_serializes_as_its_string() {
        let t = Text::from("FlinkCheckpointFailed");
        assert!(t == "FlinkCheckpointFailed" && t.starts_with("Flink"));
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"FlinkCheckpointFailed\"");
        let back: Text = serde_json::from_str("\"x\"").unwrap();
        assert_eq!(back, "x");
    }
}
