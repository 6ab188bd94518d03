//! The routes: one table ([`routes`]) from which the router is built and against which the
//! OpenAPI document is checked; the token on `/api/v1`; the `Host` of every request and the
//! content type and origin of every mutation ([`crate::guard`]); the error object for
//! unknown routes (404) and known routes asked with another method (405, naming the methods
//! it answers, with `Allow`).

use crate::auth::require_token;
use crate::guard::{require_host, require_same_site_json, Hosts};
use crate::server::AppState;
use crate::{actions, logs, meta, metrics, runs, signal, stream, ui, workers, ApiError};
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{header, Method, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use serde_json::json;
use std::sync::Arc;

type Shared = Arc<AppState>;

/// One route: a method, a path (`{param}` for a segment) and what answers it.
pub struct Route {
    /// The method.
    pub method: Method,
    /// The path.
    pub path: &'static str,
    handler: MethodRouter<Shared>,
}

fn route<H, T>(method: Method, path: &'static str, handler: H) -> Route
where
    H: Handler<T, Shared>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
    let mut handler = on(filter, handler);
    if !method.is_safe() {
        handler = handler.route_layer(from_fn(require_same_site_json));
    }
    Route {
        method,
        path,
        handler,
    }
}

/// Every route the server answers.
pub fn routes() -> Vec<Route> {
    (api_routes().into_iter())
        .chain(worker_routes())
        .chain(open_routes())
        .collect()
}

/// The routes of workers, behind the worker token.
fn worker_routes() -> Vec<Route> {
    vec![
        route(Method::POST, "/api/v1/worker/take", workers::take),
        route(Method::POST, "/api/v1/worker/heartbeat", workers::heartbeat),
        route(
            Method::POST,
            "/api/v1/worker/tries/{token}/started",
            workers::started,
        ),
        route(
            Method::POST,
            "/api/v1/worker/tries/{token}/log",
            workers::log,
        ),
        route(
            Method::POST,
            "/api/v1/worker/tries/{token}/result",
            workers::result,
        ),
    ]
}

/// The routes anyone may call.
fn open_routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/healthz", healthz),
        route(Method::GET, "/readyz", readyz),
        route(Method::GET, "/", ui::index),
        route(Method::GET, "/ui/{file}", ui::file),
    ]
}

/// The routes behind the token.
fn api_routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/api/v1/openapi.json", openapi),
        route(Method::GET, "/api/v1/meta", meta::meta),
        route(Method::GET, "/api/v1/workflows", runs::workflows),
        route(Method::POST, "/api/v1/workflows/reload", runs::reload),
        route(Method::GET, "/api/v1/runs", runs::list),
        route(Method::POST, "/api/v1/runs", runs::start),
        route(Method::GET, "/api/v1/runs/{id}", runs::status),
        route(Method::GET, "/api/v1/runs/{id}/events", runs::events),
        route(
            Method::GET,
            "/api/v1/runs/{id}/events/stream",
            stream::events,
        ),
        route(Method::GET, "/api/v1/runs/{id}/plan", runs::plan),
        route(Method::POST, "/api/v1/runs/{id}/pause", actions::pause),
        route(Method::POST, "/api/v1/runs/{id}/resume", actions::resume),
        route(
            Method::POST,
            "/api/v1/runs/{id}/rollback",
            actions::rollback,
        ),
        route(
            Method::POST,
            "/api/v1/runs/{id}/steps/{step}/override",
            actions::override_step,
        ),
        route(
            Method::POST,
            "/api/v1/runs/{id}/steps/{step}/rerun",
            actions::rerun,
        ),
        route(
            Method::GET,
            "/api/v1/runs/{id}/steps/{step}/rerun",
            runs::rerun_plan,
        ),
        route(
            Method::POST,
            "/api/v1/runs/{id}/steps/{step}/signal",
            signal::signal,
        ),
        route(
            Method::GET,
            "/api/v1/runs/{id}/steps/{step}/log",
            logs::step_log,
        ),
        route(Method::GET, "/api/v1/workers", workers::list),
        route(Method::GET, "/api/v1/schedules", crate::firing::list),
        route(
            Method::POST,
            "/api/v1/schedules/backfill",
            crate::firing::backfill,
        ),
        route(
            Method::POST,
            "/api/v1/schedules/{workflow}/{name}/pause",
            crate::firing::pause,
        ),
        route(
            Method::POST,
            "/api/v1/schedules/{workflow}/{name}/resume",
            crate::firing::resume,
        ),
        route(Method::GET, "/metrics", metrics::scrape),
    ]
}

/// The router of `state`, with `token` required on the API routes when set and
/// `worker_token` (or else `token`) on the worker routes, answering requests whose `Host`
/// is one of `hosts`.
pub(crate) fn router(
    state: Shared,
    token: Option<String>,
    worker_token: Option<String>,
    hosts: Hosts,
) -> Router {
    let worker_token = Arc::new(worker_token.or_else(|| token.clone()));
    let token = Arc::new(token);
    let api = with(api_routes()).route_layer(from_fn_with_state(token, require_token));
    let worker = with(worker_routes()).route_layer(from_fn_with_state(worker_token, require_token));
    let routed = api
        .merge(worker)
        .merge(with(open_routes()))
        .fallback(not_found)
        .with_state(state);
    // Outside the routes: axum adds `Allow` to a 405 after the layers of its route.
    Router::new()
        .fallback_service(routed)
        .layer(map_response(method_not_allowed))
        .layer(from_fn_with_state(Arc::new(hosts), require_host))
}

fn with(routes: Vec<Route>) -> Router<Shared> {
    routes
        .into_iter()
        .fold(Router::new(), |router, r| router.route(r.path, r.handler))
}

async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound(format!(
        "no route {} {}",
        request.method(),
        request.uri().path()
    ))
}

/// axum answers a known path asked with another method with an empty 405 and `Allow`: the
/// error object naming the allowed methods replaces the body, the headers stay.
async fn method_not_allowed(response: Response) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let allowed = allow
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut answer =
        ApiError::MethodNotAllowed(format!("this route answers {allowed} only")).into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], crate::OPENAPI).into_response()
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(state): State<Shared>) -> Result<Response, ApiError> {
    state.backend.readiness()?;
    Ok(axum::Json(json!({"status": "ready"})).into_response())
}
