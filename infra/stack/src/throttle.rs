//! API Gateway's route throttles, as the local gateways hold each route to them: the HTTP
//! API's `DefaultRouteSettings` for every route and `RouteSettings` for the routes named, and
//! the WebSocket stage's `DefaultRouteSettings` for each of its routes (`$connect`,
//! `$default`), read from the template with the stack's parameters.

use crate::cfn::{Route, template};
use converger_core::RateLimit;
use std::collections::{BTreeMap, HashMap};

/// One route's throttle: `rate` requests a second, `burst` at once (API Gateway's token
/// bucket).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    pub rate: f64,
    pub burst: f64,
}

impl Throttle {
    /// The same as a rate schedule: `burst` requests per the time `rate` takes to refill
    /// them, which spaces requests 1/`rate` apart and lets `burst` through at once.
    pub fn limit(&self) -> RateLimit {
        // Whole requests (API Gateway takes the burst as a count); `as` saturates.
        let count = self.burst.max(1.0).floor();
        RateLimit {
            count: count as u32,
            per_ms: ((count * 1000.0 / self.rate.max(0.001)).round() as u64).max(1),
        }
    }
}

/// The HTTP API's throttles as the template sets them (its `DefaultRouteSettings` for every
/// route, `RouteSettings` for the routes named), resolved with the stack's parameters: what
/// the local gateway holds each route to, a bucket per route, as API Gateway does.
#[derive(Debug)]
pub struct RouteThrottles {
    default: Option<Throttle>,
    routes: BTreeMap<String, Throttle>,
    /// Each route's schedule (GCRA's theoretical arrival time, in µs since `started`).
    schedules: std::sync::Mutex<HashMap<String, i64>>,
    started: std::time::Instant,
}

impl RouteThrottles {
    /// The template's HTTP API, with `parameters` over the parameters' defaults.
    pub fn of_http_api(parameters: &BTreeMap<String, String>) -> Result<Self, String> {
        Self::of(&template()?, parameters)
    }

    pub fn of(
        doc: &serde_yaml::Value,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        Self::of_type(doc, parameters, "AWS::Serverless::HttpApi")
    }

    /// The template's WebSocket stage (its `DefaultRouteSettings`, a bucket per route), with
    /// `parameters` over the parameters' defaults.
    pub fn of_websocket_stage(parameters: &BTreeMap<String, String>) -> Result<Self, String> {
        Self::of_type(&template()?, parameters, "AWS::ApiGatewayV2::Stage")
    }

    /// The settings of the template's one resource of type `kind`.
    fn of_type(
        doc: &serde_yaml::Value,
        parameters: &BTreeMap<String, String>,
        kind: &str,
    ) -> Result<Self, String> {
        let mut of_kind = doc
            .get("Resources")
            .and_then(serde_yaml::Value::as_mapping)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|r| r.get("Type").and_then(serde_yaml::Value::as_str) == Some(kind));
        let api = of_kind
            .next()
            .ok_or_else(|| format!("the template has no {kind}"))?;
        if of_kind.next().is_some() {
            return Err(format!("the template has more than one {kind}"));
        }
        let value = |v: &serde_yaml::Value| -> Result<f64, String> {
            let text = match v {
                serde_yaml::Value::Tagged(t) if t.tag == "Ref" => {
                    let name = t.value.as_str().ok_or("a Ref that is not a name")?;
                    match parameters.get(name) {
                        Some(p) => p.clone(),
                        None => doc
                            .get("Parameters")
                            .and_then(|p| p.get(name))
                            .and_then(|p| p.get("Default"))
                            .map(|d| match d {
                                serde_yaml::Value::String(s) => s.clone(),
                                other => serde_yaml::to_string(other)
                                    .unwrap_or_default()
                                    .trim()
                                    .to_owned(),
                            })
                            .ok_or_else(|| format!("parameter {name} has no default"))?,
                    }
                }
                serde_yaml::Value::Number(n) => n.to_string(),
                other => return Err(format!("a throttle setting {other:?}")),
            };
            text.parse::<f64>()
                .map_err(|e| format!("a throttle setting {text:?}: {e}"))
        };
        let throttle = |s: &serde_yaml::Value| -> Result<Option<Throttle>, String> {
            match (s.get("ThrottlingRateLimit"), s.get("ThrottlingBurstLimit")) {
                (Some(r), Some(b)) => Ok(Some(Throttle {
                    rate: value(r)?,
                    burst: value(b)?,
                })),
                _ => Ok(None),
            }
        };
        let props = api.get("Properties");
        let default = match props.and_then(|p| p.get("DefaultRouteSettings")) {
            Some(s) => throttle(s)?,
            None => None,
        };
        let mut routes = BTreeMap::new();
        if let Some(m) = props
            .and_then(|p| p.get("RouteSettings"))
            .and_then(serde_yaml::Value::as_mapping)
        {
            for (k, s) in m {
                if let (Some(k), Some(t)) = (k.as_str(), throttle(s)?) {
                    routes.insert(k.to_owned(), t);
                }
            }
        }
        Ok(Self {
            default,
            routes,
            schedules: std::sync::Mutex::default(),
            started: std::time::Instant::now(),
        })
    }

    /// The throttle of `route` (its own, else the default).
    pub fn of_route(&self, route: &Route) -> Option<Throttle> {
        self.of_key(&Self::key(route))
    }

    fn key(route: &Route) -> String {
        format!("{} {}", route.method.to_uppercase(), route.path)
    }

    /// The throttle of the route whose key is `key` (`POST /api/...`, `$connect`).
    pub fn of_key(&self, key: &str) -> Option<Throttle> {
        self.routes.get(key).copied().or(self.default)
    }

    /// Whether a request on `route` is let through now: the flow control's rate schedule
    /// (GCRA, `core::flow::RateLimit`) with API Gateway's rate and burst.
    pub fn admit(&self, route: &Route) -> bool {
        self.admit_key(&Self::key(route))
    }

    /// [`Self::admit`] for the route whose key is `key`: each key its own bucket.
    pub fn admit_key(&self, key: &str) -> bool {
        let Some(t) = self.of_key(key) else {
            return true;
        };
        let key = key.to_owned();
        let now_us = i64::try_from(self.started.elapsed().as_micros()).unwrap_or(i64::MAX);
        let Ok(mut schedules) = self.schedules.lock() else {
            return true;
        };
        let tat = schedules.get(&key).copied();
        match t.limit().decide(tat, now_us) {
            Ok(next) => {
                schedules.insert(key, next);
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn route(method: &str, path: &str) -> Route {
        Route {
            path: path.into(),
            method: method.into(),
        }
    }

    /// The template's defaults: the receipts' route has its own settings, every other route
    /// the default's; a parameter given to the stack replaces its default.
    #[test]
    fn each_route_takes_its_own_settings_or_the_default() {
        let t = RouteThrottles::of_http_api(&BTreeMap::new()).unwrap();
        let receipts = route("POST", "/api/v1/channels/{id}/status");
        let api = route("ANY", "/api/{proxy+}");
        assert_eq!(
            t.of_route(&receipts),
            Some(Throttle {
                rate: 3000.0,
                burst: 1500.0
            })
        );
        assert_eq!(
            t.of_route(&api),
            Some(Throttle {
                rate: 4000.0,
                burst: 2000.0
            })
        );
        let given = BTreeMap::from([("ApiThrottleBurst".to_owned(), "2".to_owned())]);
        let t = RouteThrottles::of_http_api(&given).unwrap();
        assert!(t.admit(&api) && t.admit(&api));
        assert!(!t.admit(&api), "a third at once is past a burst of 2");
        assert!(t.admit(&receipts), "the receipts' bucket is its own");
    }

    /// The WebSocket stage: every route the default's settings, a bucket per route.
    #[test]
    fn the_websocket_stage_holds_each_route_to_its_default_settings() {
        let t = RouteThrottles::of_websocket_stage(&BTreeMap::new()).unwrap();
        assert_eq!(
            t.of_key("$default"),
            Some(Throttle {
                rate: 1000.0,
                burst: 500.0
            })
        );
        let given = BTreeMap::from([
            ("WebSocketThrottleRate".to_owned(), "1".to_owned()),
            ("WebSocketThrottleBurst".to_owned(), "2".to_owned()),
        ]);
        let t = RouteThrottles::of_websocket_stage(&given).unwrap();
        assert!(t.admit_key("$default") && t.admit_key("$default"));
        assert!(
            !t.admit_key("$default"),
            "a third at once is past a burst of 2"
        );
        assert!(t.admit_key("$connect"), "each route has its own bucket");
    }
}
