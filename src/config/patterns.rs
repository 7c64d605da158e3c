//! `Pattern`: a regular expression of the config, compiled once, when the config is read.

use serde::{Deserialize, Serialize};

/// A regular expression of the config (`include_jobs`, `exclude_jobs`, `[[logs.patterns]]
/// regex`), compiled once, when the config is read: its text as written and the compiled form,
/// or why it does not compile. `Config::problems` reports the error (so a config with a bad
/// pattern is refused) and the poller and the tailer take the compiled form from here: nothing
/// compiles a pattern a second time, and no compile error can be dropped on the way.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub(crate) struct Pattern {
    text: String,
    compiled: Result<regex::Regex, regex::Error>,
}

impl Pattern {
    /// The pattern as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The compiled regular expression, or why the text is not one.
    pub(crate) fn regex(&self) -> Result<&regex::Regex, &regex::Error> {
        self.compiled.as_ref()
    }
}

impl From<String> for Pattern {
    fn from(text: String) -> Self {
        let compiled = regex::Regex::new(&text);
        Pattern { text, compiled }
    }
}

impl From<&str> for Pattern {
    fn from(text: &str) -> Self {
        Pattern::from(text.to_string())
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> Self {
        p.text
    }
}

/// Two patterns are the same when written the same (what a reload compares).
impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}
