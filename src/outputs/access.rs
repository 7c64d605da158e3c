//! Optional authentication in front of the HTTP server: a bearer token or basic credentials, and
//! with mutual TLS a client certificate, for `/metrics`, the API and the status page; `/healthz`
//! and `/readyz` stay open for probes.

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use crate::config::Credentials;
use crate::outputs::tls::TlsPeer;

/// Paths that stay open, so that liveness and readiness probes need no credentials.
const OPEN_PATHS: [&str; 2] = ["/healthz", "/readyz"];

fn expected_header(credentials: &Credentials) -> Option<String> {
    match credentials {
        Credentials::None => None,
        Credentials::Bearer(token) => Some(format!("Bearer {token}")),
        Credentials::Basic { username, password } => {
            Some(format!("Basic {}", base64(format!("{username}:{password}").as_bytes())))
        }
    }
}

/// Whether an `Authorization` header matches the expected one: the scheme (`Bearer`, `Basic`)
/// compared case-insensitively (RFC 9110 §11.1), the credentials in constant time.
fn scheme_and_credentials_match(given: &[u8], expected: &[u8]) -> bool {
    let split = |v: &[u8]| {
        let at = v.iter().position(|b| *b == b' ').unwrap_or(v.len());
        (v[..at].to_vec(), v[at..].to_vec())
    };
    let ((given_scheme, given_rest), (expected_scheme, expected_rest)) = (split(given), split(expected));
    given_scheme.eq_ignore_ascii_case(&expected_scheme) & constant_time_eq(&given_rest, &expected_rest)
}

/// Wraps `router` so every request but the probes must carry `credentials` and, with
/// `client_certificate_required` (mutual TLS), come over a connection whose client presented a
/// certificate the TLS layer verified. With neither (the default: bind to a private address, or
/// put a proxy in front) the router stays open.
pub(crate) fn protect(
    credentials: &Credentials,
    client_certificate_required: bool,
    router: Router,
) -> Router {
    let expected = expected_header(credentials);
    if expected.is_none() && !client_certificate_required {
        return router;
    }
    let challenge = match credentials {
        Credentials::Basic { .. } => "Basic realm=\"checkpoint-sentinel\"",
        _ => "Bearer",
    };
    router.layer(middleware::from_fn(move |request: Request, next: Next| {
        let expected = expected.clone();
        async move {
            if OPEN_PATHS.contains(&request.uri().path()) {
                return next.run(request).await;
            }
            let certificate_ok = !client_certificate_required
                || request.extensions().get::<ConnectInfo<TlsPeer>>().is_some_and(|c| c.0.client_certificate);
            if !certificate_ok {
                return (StatusCode::FORBIDDEN, "a client certificate is required\n").into_response();
            }
            let given =
                request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes).unwrap_or_default();
            if expected.as_ref().is_none_or(|e| scheme_and_credentials_match(given, e.as_bytes())) {
                next.run(request).await
            } else {
                (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)], "unauthorized\n")
                    .into_response()
            }
        }
    }))
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Standard base64 with padding (RFC 4648 §4), as Basic credentials are sent.
fn base64(input: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    fn app(credentials: Credentials) -> Router {
        protect(
            &credentials,
            false,
            Router::new().route("/metrics", get(|| async { "m" })).route("/healthz", get(|| async { "ok" })),
        )
    }

    async fn status(router: &Router, path: &str, auth: Option<&str>) -> StatusCode {
        let mut request = axum::http::Request::get(path);
        if let Some(a) = auth {
            request = request.header(header::AUTHORIZATION, a);
        }
        router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap().status()
    }

    #[test]
    fn base64_matches_rfc_4648() {
        assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[tokio::test]
    async fn credentials_are_required_except_for_probes() {
        let bearer = app(Credentials::Bearer("s3cret".into()));
        assert_eq!(status(&bearer, "/metrics", None).await, StatusCode::UNAUTHORIZED);
        assert_eq!(status(&bearer, "/metrics", Some("Bearer nope")).await, StatusCode::UNAUTHORIZED);
        assert_eq!(status(&bearer, "/metrics", Some("Bearer s3cret")).await, StatusCode::OK);
        assert_eq!(
            status(&bearer, "/metrics", Some("bearer s3cret")).await,
            StatusCode::OK,
            "scheme: any case"
        );
        assert_eq!(status(&bearer, "/metrics", Some("BEARER s3cret")).await, StatusCode::OK);
        assert_eq!(status(&bearer, "/metrics", Some("bearer S3cret")).await, StatusCode::UNAUTHORIZED);
        assert_eq!(status(&bearer, "/healthz", None).await, StatusCode::OK);
        let basic = app(Credentials::Basic { username: "Aladdin".into(), password: "open sesame".into() });
        assert_eq!(
            status(&basic, "/metrics", Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")).await,
            StatusCode::OK
        );
        assert_eq!(
            status(&basic, "/metrics", Some("Basic QWxhZGRpbjpvcGVu")).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(status(&app(Credentials::None), "/metrics", None).await, StatusCode::OK);
    }

    #[tokio::test]
    async fn mutual_tls_requires_a_verified_client_certificate_except_for_probes() {
        let router = protect(
            &Credentials::None,
            true,
            Router::new().route("/metrics", get(|| async { "m" })).route("/readyz", get(|| async { "ok" })),
        );
        let request = |path: &str, client_certificate: Option<bool>| {
            let mut request = axum::http::Request::get(path).body(Body::empty()).unwrap();
            if let Some(client_certificate) = client_certificate {
                let peer = TlsPeer { client_certificate };
                request.extensions_mut().insert(ConnectInfo(peer));
            }
            request
        };
        let status = |r: axum::http::Request<Body>| {
            let router = router.clone();
            async move { router.oneshot(r).await.unwrap().status() }
        };
        assert_eq!(status(request("/metrics", Some(true))).await, StatusCode::OK);
        assert_eq!(status(request("/metrics", Some(false))).await, StatusCode::FORBIDDEN);
        assert_eq!(status(request("/metrics", None)).await, StatusCode::FORBIDDEN);
        assert_eq!(status(request("/readyz", Some(false))).await, StatusCode::OK);
    }
}
