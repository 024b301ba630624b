//! The fleet dashboard: a page at `/` that shows the fleet from this same admin API.
//!
//! Plain HTML, CSS and JavaScript modules under `dashboard/`, compiled into the binary
//! with `include_str!`: nothing to build, fetch or install, and what the browser runs
//! is exactly what is checked in. The page holds no data of its own — it reads
//! `/v1/edges`, `/v1/edges/{id}/status`, `/v1/commands/{id}` and the `/v1/events`
//! stream, and sends commands with `POST /v1/edges/{id}/commands`, under the same
//! access rules as any client ([`access`](super::http::access)). So its assets are served
//! without a token (the page asks for one, keeps it for the tab only in
//! `sessionStorage`, and sends it as `Authorization: Bearer`, never in a URL).
//!
//! Every asset is sent with a Content-Security-Policy that allows only this origin's
//! scripts, styles and connections (no inline script, no framing), `nosniff`, and no
//! referrer; the page writes data into the document only as text, never as markup.

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The paths the dashboard serves, without a token: the page and its assets.
pub const PATHS: [&str; 7] = [
    "/",
    "/ui/app.js",
    "/ui/api.js",
    "/ui/views.js",
    "/ui/fleet.js",
    "/ui/charts.js",
    "/ui/style.css",
];

const INDEX: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const API_JS: &str = include_str!("api.js");
const VIEWS_JS: &str = include_str!("views.js");
const FLEET_JS: &str = include_str!("fleet.js");
const CHARTS_JS: &str = include_str!("charts.js");
const STYLE: &str = include_str!("style.css");

/// What the page may load and reach: this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes, merged into the admin router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route(
            "/ui/app.js",
            get(|| asset("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/ui/api.js",
            get(|| asset("text/javascript; charset=utf-8", API_JS)),
        )
        .route(
            "/ui/views.js",
            get(|| asset("text/javascript; charset=utf-8", VIEWS_JS)),
        )
        .route(
            "/ui/fleet.js",
            get(|| asset("text/javascript; charset=utf-8", FLEET_JS)),
        )
        .route(
            "/ui/charts.js",
            get(|| asset("text/javascript; charset=utf-8", CHARTS_JS)),
        )
        .route(
            "/ui/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE)),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ];
    (headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        let sources = [INDEX, APP_JS, API_JS, VIEWS_JS];
        for source in sources {
            for chunk in source.split("/ui/").skip(1) {
                let name: String = chunk
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
                    .collect();
                let path = format!("/ui/{name}");
                assert!(PATHS.contains(&path.as_str()), "{path} is not served");
            }
        }
        let mut imports = 0;
        for js in [APP_JS, API_JS, VIEWS_JS] {
            for chunk in js.split(" from \"").skip(1) {
                let target = chunk.split('"').next().unwrap_or_default();
                let path = format!("/ui/{}", target.trim_start_matches("./"));
                assert!(
                    PATHS.contains(&path.as_str()),
                    "{path} is imported, not served"
                );
                imports += 1;
            }
        }
        assert!(imports >= 2, "app.js imports api.js and views.js");
    }

    #[test]
    fn the_page_writes_data_as_text_only() {
        // Views, node labels, messages and event details come from Edges: the page
        // never parses them as markup.
        for (name, js) in [
            ("app.js", APP_JS),
            ("api.js", API_JS),
            ("views.js", VIEWS_JS),
        ] {
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!js.contains(sink), "{name} uses {sink}");
            }
        }
        assert!(
            !INDEX.contains("<script>"),
            "no inline script (the CSP forbids it)"
        );
        assert!(
            !INDEX.contains("style="),
            "no inline style (the CSP forbids it)"
        );
    }
}
