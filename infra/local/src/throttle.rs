//! API Gateway's route throttles, as the local HTTP gateway holds each route to them: the
//! HTTP API's `DefaultRouteSettings` for every route and `RouteSettings` for the routes named,
//! read from the template with the stack's parameters.

use crate::cfn::{Route, template};
use std::collections::{BTreeMap, HashMap};

/// One route's throttle: API Gateway's token bucket (`rate` a second, `burst` at most).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    pub rate: f64,
    pub burst: f64,
}

/// The HTTP API's throttles as the template sets them (its `DefaultRouteSettings` for every
/// route, `RouteSettings` for the routes named), resolved with the stack's parameters: what
/// the local gateway holds each route to, a bucket per route, as API Gateway does.
#[derive(Debug)]
pub struct RouteThrottles {
    default: Option<Throttle>,
    routes: BTreeMap<String, Throttle>,
    buckets: std::sync::Mutex<HashMap<String, (f64, std::time::Instant)>>,
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
        let api = doc
            .get("Resources")
            .and_then(serde_yaml::Value::as_mapping)
            .and_then(|m| {
                m.values().find(|r| {
                    r.get("Type").and_then(serde_yaml::Value::as_str)
                        == Some("AWS::Serverless::HttpApi")
                })
            })
            .ok_or("the template has no AWS::Serverless::HttpApi")?;
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
            buckets: std::sync::Mutex::default(),
        })
    }

    /// The throttle of `route` (its own, else the default).
    pub fn of_route(&self, route: &Route) -> Option<Throttle> {
        self.routes
            .get(&format!("{} {}", route.method.to_uppercase(), route.path))
            .copied()
            .or(self.default)
    }

    /// Whether a request on `route` is let through now (a token taken from its bucket).
    pub fn admit(&self, route: &Route) -> bool {
        let Some(t) = self.of_route(route) else {
            return true;
        };
        let key = format!("{} {}", route.method.to_uppercase(), route.path);
        let now = std::time::Instant::now();
        let Ok(mut buckets) = self.buckets.lock() else {
            return true;
        };
        let (tokens, at) = buckets.entry(key).or_insert((t.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * t.rate).min(t.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
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
}
