//! `--demo`: a tenant, two webhook channels to built-in receivers (one healthy, one that fails
//! once), a few activities, and what happened to each delivery.

use crate::receiver::{Receiver, Reply};
use crate::stack::Stack;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let mut req = http.request(method, &url).bearer_auth(token);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{url}: {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{url}: {e}"))
}

pub async fn run(stack: &Stack) -> Result<(), String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let healthy = Receiver::always(200).await?;
    let flaky = Receiver::start(vec![Reply::status(503)], Reply::status(200)).await?;

    let tenant = call(
        &http,
        reqwest::Method::POST,
        format!("{}/admin/api/tenants", stack.admin_url),
        &stack.admin_token,
        Some(json!({"name": "demo", "tier": "default"})),
    )
    .await?;
    let key = tenant["api_key"].as_str().unwrap_or_default().to_owned();
    let mut channels = Vec::new();
    for (name, url, policy) in [
        ("demo-webhook", &healthy.url, json!({})),
        (
            "demo-flaky-webhook",
            &flaky.url,
            json!({"backoff": "fixed", "base_ms": 1000}),
        ),
    ] {
        let ch = call(
            &http,
            reqwest::Method::POST,
            format!("{}/api/v1/channels", stack.api_url),
            &key,
            Some(json!({"type": "webhook", "name": name, "config": {"url": url}, "retry_policy": policy})),
        )
        .await?;
        channels.push((name, ch["id"].as_str().unwrap_or_default().to_owned()));
    }
    println!("DEMO tenant {} with channels {:?}", tenant["id"], channels);

    let mut sent = Vec::new();
    for i in 1..=3 {
        let t0 = Instant::now();
        let act = call(
            &http,
            reqwest::Method::POST,
            format!("{}/api/v1/activities", stack.api_url),
            &key,
            Some(json!({
                "conversation_id": "demo-conversation",
                "channel_ids": channels.iter().map(|c| c.1.clone()).collect::<Vec<_>>(),
                "payload": {"text": format!("hello #{i}")},
            })),
        )
        .await?;
        sent.push((t0, act));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let deadline = Instant::now() + Duration::from_secs(30);
    for (t0, act) in &sent {
        let activity_id = act["activity_id"].as_str().unwrap_or_default();
        for d in act["deliveries"].as_array().cloned().unwrap_or_default() {
            let id = d["id"].as_str().unwrap_or_default();
            let name = channels
                .iter()
                .find(|c| Some(c.1.as_str()) == d["channel_id"].as_str())
                .map(|c| c.0)
                .unwrap_or("?");
            let mut row = Value::Null;
            while Instant::now() < deadline {
                row = call(
                    &http,
                    reqwest::Method::GET,
                    format!("{}/api/v1/deliveries/{id}", stack.api_url),
                    &key,
                    None,
                )
                .await?;
                if row["status"] != "pending" {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let receiver = if name == "demo-webhook" {
                &healthy
            } else {
                &flaky
            };
            let first = receiver
                .requests()
                .into_iter()
                .find(|r| {
                    serde_json::from_slice::<Value>(&r.body)
                        .is_ok_and(|b| b["activity_id"] == activity_id)
                })
                .map(|r| r.at.duration_since(*t0).as_secs_f64() * 1000.0);
            println!(
                "DEMO activity {activity_id} -> {name}: status {}, attempts {}, first request reached the receiver {} after the API call{}",
                row["status"],
                row["attempts"],
                first
                    .map(|ms| format!("{ms:.1} ms"))
                    .unwrap_or_else(|| "never".into()),
                row["last_error"]
                    .as_str()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default(),
            );
        }
    }
    Ok(())
}
