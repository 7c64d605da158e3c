//! The daemon's outgoing HTTP requests (to Flink's JobManagers, to the Alertmanagers): the
//! configured credentials put on a reqwest request. Config holds them as plain data.

use crate::config::Credentials;

/// Adds configured credentials to an outgoing request.
pub(crate) trait Authorize {
    /// The request with `credentials` on it (basic or bearer authentication, or nothing).
    fn authorize(self, credentials: &Credentials) -> Self;
}

impl Authorize for reqwest::RequestBuilder {
    fn authorize(self, credentials: &Credentials) -> Self {
        match credentials {
            Credentials::None => self,
            Credentials::Basic { username, password } => self.basic_auth(username, Some(password)),
            Credentials::Bearer(token) => self.bearer_auth(token),
        }
    }
}
