//! Secrets and credentials: where a secret is (inline, a file, an environment variable), reading
//! it, masking it for print, and the credentials read from it. Plain data: what goes on the wire
//! is `outbound::Authorize`'s part (config knows no HTTP client).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Basic authentication credentials.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BasicAuth {
    /// The user name.
    pub(crate) username: String,
    /// The password.
    pub(crate) password: Secret,
}

/// A secret given inline, in a file, or in an environment variable (exactly one of them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Secret {
    /// The secret itself (avoid in files under version control).
    pub(crate) value: Option<String>,
    /// A file holding the secret (trailing newline ignored), e.g. a Kubernetes Secret mount.
    pub(crate) file: Option<PathBuf>,
    /// The name of an environment variable holding the secret.
    pub(crate) env: Option<String>,
}

impl Secret {
    /// Reads the secret from wherever it is.
    pub(crate) fn resolve(&self) -> Result<String, String> {
        if let Some(v) = &self.value {
            return Ok(v.clone());
        }
        if let Some(f) = &self.file {
            let secret = std::fs::read_to_string(f)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
            // An empty token would lock everyone out (or let an empty header in).
            if secret.trim().is_empty() {
                return Err(format!("{}: expected a secret, the file is empty", f.display()));
            }
            return Ok(secret);
        }
        if let Some(name) = &self.env {
            let secret =
                std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?;
            if secret.trim().is_empty() {
                return Err(format!("environment variable {name}: expected a secret, it is empty"));
            }
            return Ok(secret);
        }
        Err("no value, file or env given".to_string())
    }

    /// The secret with its value hidden.
    pub(super) fn masked(&self) -> Secret {
        Secret { value: self.value.as_ref().map(|_| "********".to_string()), ..self.clone() }
    }
}

/// `basic_auth` or `bearer_token` with the secret read: what the daemon sends to Flink and to
/// Alertmanager, or expects from its own readers.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Credentials {
    /// None (for the daemon's own endpoints: open to anyone).
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// User.
        username: String,
        /// Password.
        password: String,
    },
    /// A bearer token.
    Bearer(String),
}

impl Credentials {
    /// Reads the secret of `basic` or, without it, of `bearer`; an error names the key under
    /// `prefix` (e.g. `alerting.basic_auth.password`).
    pub(crate) fn resolve(
        basic: Option<&BasicAuth>,
        bearer: Option<&Secret>,
        prefix: &str,
    ) -> Result<Credentials, String> {
        Ok(match (basic, bearer) {
            (Some(b), _) => Credentials::Basic {
                username: b.username.clone(),
                password: b.password.resolve().map_err(|e| format!("{prefix}basic_auth.password: {e}"))?,
            },
            (None, Some(t)) => {
                Credentials::Bearer(t.resolve().map_err(|e| format!("{prefix}bearer_token: {e}"))?)
            }
            (None, None) => Credentials::None,
        })
    }
}

/// `url` with the password of its user info (`http://user:pw@host/`) masked, for anything
/// printed or exported (check-config, logs, warnings, the `alertmanager` label).
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return url.to_string() };
    let authority_end = url[scheme_end..].find(['/', '?', '#']).map_or(url.len(), |i| scheme_end + i);
    let authority = &url[scheme_end..authority_end];
    let Some(at) = authority.rfind('@') else { return url.to_string() };
    let userinfo = &authority[..at];
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    format!("{}{user}:********{}", &url[..scheme_end], &url[scheme_end + at..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::tests::load;

    #[test]
    fn a_password_in_a_url_is_masked() {
        assert_eq!(redact_url("http://u:pw@flink:8081/x"), "http://u:********@flink:8081/x");
        assert_eq!(redact_url("https://token@am:9093"), "https://token:********@am:9093");
        assert_eq!(
            redact_url("http://flink:8081/a@b"),
            "http://flink:8081/a@b",
            "an @ in the path is no user info"
        );
        assert_eq!(redact_url("http://flink:8081"), "http://flink:8081");
        let text = "[[clusters]]\nname = \"a\"\nurl = \"http://admin:hunter2@flink:8081\"\n\
                    [alerting]\nalertmanagers = [\"http://am:s3cret@am:9093\"]\n";
        let shown = load(text).unwrap().to_masked_toml();
        assert!(!shown.contains("hunter2") && !shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("http://admin:********@flink:8081"), "{shown}");
    }

    #[test]
    fn secrets_are_masked_when_printed() {
        let c = load("[[clusters]]\nname='a'\nurl='http://x:1'\n[clusters.basic_auth]\nusername='u'\npassword={value='hunter2'}\n").unwrap();
        let shown = c.to_masked_toml();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("********"), "{shown}");
    }
}
