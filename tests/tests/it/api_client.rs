//! The typed client crate (`converger-client`) against a local stack: the calls a program
//! integrating with Converger makes, and an error answer with its status and code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_client::{Client, DeliveryQuery, Error, NewActivity, NewChannel};
use converger_tests::{Receiver, TestStack};
use serde_json::json;
use std::time::{Duration, Instant};

async fn settled(api: &Client, id: &str) -> converger_client::Delivery {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = api.delivery(id).await.unwrap();
        if d.is_settled() || Instant::now() > deadline {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_client_crate_drives_the_tenant_api() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let api = t.client(&a.key);

    let mut settings = serde_json::Map::new();
    settings.insert("retry_policy".into(), json!({"max_attempts": 2}));
    let created = api
        .create_channel(&NewChannel {
            kind: "webhook".into(),
            name: "orders".into(),
            config: json!({"url": rx.url}).as_object().cloned().unwrap(),
            settings,
        })
        .await
        .unwrap();
    assert!(created.signing_secret.starts_with("whsec_"));
    let ch = created.channel.id.clone();
    assert_eq!(api.channel(&ch).await.unwrap().name, "orders");
    assert!(
        api.channels(None)
            .await
            .unwrap()
            .data
            .iter()
            .any(|c| c.id == ch)
    );

    let posted = api
        .post_activity(&NewActivity {
            conversation_id: "conv-1".into(),
            channel_ids: vec![ch.clone()],
            payload: json!({"text": "hello"}),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = posted.deliveries[0].id.clone();
    let d = settled(&api, &id).await;
    assert_eq!((d.status.as_str(), d.attempts), ("sent", 1));
    assert_eq!(rx.count(), 1);
    let listed = api
        .deliveries(&DeliveryQuery {
            channel_id: Some(ch.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    assert_eq!(api.attempts(&id).await.unwrap().data[0].attempt, 1);

    // Pause parks, resume releases.
    assert_eq!(api.pause_channel(&ch).await.unwrap().state, "paused");
    assert_eq!(api.resume_channel(&ch).await.unwrap().state, "flowing");
    let patched = api
        .patch_channel(&ch, &json!({"name": "orders v2"}))
        .await
        .unwrap();
    assert_eq!(patched.name, "orders v2");

    // An error answer keeps its status and stable code.
    match api.retry_delivery(&id).await {
        Err(Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (409, "not_failed"))
        }
        other => panic!("{other:?}"),
    }
    match api.delivery("dl_unknown").await {
        Err(Error::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (404, "not_found"))
        }
        other => panic!("{other:?}"),
    }
    let wrong = t.client("cvg_wrong");
    assert!(matches!(
        wrong.channels(None).await,
        Err(Error::Api { status: 401, .. })
    ));
    assert!(
        api.aws_identity()
            .await
            .unwrap()
            .external_id
            .starts_with("cvg-")
    );

    api.delete_channel(&ch).await.unwrap();
    assert!(matches!(
        api.channel(&ch).await,
        Err(Error::Api { status: 404, .. })
    ));
}

/// Runs one `converger` command line against the stack; its exit code and what it printed.
async fn converger(t: &TestStack, key: &str, args: &[&str]) -> (i32, String) {
    let (url, key) = (t.stack.api_url.clone(), key.to_owned());
    let env = move |k: &str| match k {
        "CONVERGER_API_URL" => Some(url.clone()),
        "CONVERGER_API_KEY" => Some(key.clone()),
        _ => None,
    };
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let mut out = Vec::new();
    let code = converger_client::cli::main(&args, &env, &mut out).await;
    (code, String::from_utf8(out).unwrap())
}

#[tokio::test]
async fn the_command_line_sends_lists_shows_retries_and_pauses() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = a.webhook(&rx.url, json!({})).await.channel.id;

    let (code, listed) = converger(&t, &a.key, &["channels", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        listed.contains(&ch) && listed.contains("webhook"),
        "{listed}"
    );

    let (code, sent) = converger(
        &t,
        &a.key,
        &[
            "send",
            "--channel",
            &ch,
            "--conversation",
            "c1",
            "--payload",
            r#"{"text":"hi"}"#,
            "--json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{sent}");
    let ingested: converger_client::Ingested = serde_json::from_str(sent.trim()).unwrap();
    let id = ingested.deliveries[0].id.clone();
    rx.wait_for(1, Duration::from_secs(20)).await;
    let api = t.client(&a.key);
    assert_eq!(settled(&api, &id).await.status, "sent");

    let (code, shown) = converger(&t, &a.key, &["deliveries", "show", &id]).await;
    assert_eq!(code, 0);
    assert!(shown.contains("status sent after 1 attempt(s)"), "{shown}");
    let (code, list) = converger(
        &t,
        &a.key,
        &["deliveries", "list", "--channel", &ch, "--json"],
    )
    .await;
    assert_eq!(code, 0);
    let page: converger_client::Page<converger_client::Delivery> =
        serde_json::from_str(list.trim()).unwrap();
    assert_eq!(page.data[0].id, id);

    // A call the API refuses: exit 1, nothing printed; a wrong command line: exit 2.
    let (code, printed) = converger(&t, &a.key, &["deliveries", "retry", &id]).await;
    assert_eq!((code, printed.as_str()), (1, ""));
    assert_eq!(
        converger(&t, &a.key, &["deliveries", "frobnicate"]).await.0,
        2
    );
    assert_eq!(
        converger(&t, &a.key, &["send", "--channel", &ch]).await.0,
        2
    );

    let (code, paused) = converger(&t, &a.key, &["channels", "pause", &ch]).await;
    assert_eq!((code, paused.trim()), (0, format!("{ch}: paused").as_str()));
    let (code, resumed) = converger(&t, &a.key, &["channels", "resume", &ch]).await;
    assert_eq!(
        (code, resumed.trim()),
        (0, format!("{ch}: flowing").as_str())
    );
    // Usage: today's one delivery and one attempt, with the client and from the command line
    // (counted from the table's stream, once its batch went).
    assert!(t.stack.changes_settled().await);
    let u = api.usage(None, None).await.unwrap();
    assert_eq!((u.total.deliveries, u.total.attempts), (1, 1), "{u:?}");
    assert_eq!(u.days.len(), 30);
    let (code, usage) = converger(&t, &a.key, &["usage"]).await;
    assert_eq!(code, 0);
    assert!(
        usage.contains("total       deliveries 1      attempts 1"),
        "{usage}"
    );
    assert_eq!(
        converger(&t, &a.key, &["usage", "--from", "soon"]).await.0,
        1,
        "the API refuses the date"
    );
    let (code, help) = converger(&t, &a.key, &["--help"]).await;
    assert_eq!(code, 0);
    assert!(
        help.contains("listen <channel id> --forward-to URL"),
        "{help}"
    );
}

/// `converger listen` forwards a websocket channel's delivery to a local URL, signed as a
/// webhook; a failed forward leaves it waiting, and the next replay brings it again; a 2xx
/// acknowledges it, which settles it.
#[tokio::test]
async fn listen_forwards_deliveries_and_acknowledges_what_the_receiver_took() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = converger_tests::Receiver::start(
        vec![converger_tests::Reply::status(500)],
        converger_tests::Reply::status(200),
    )
    .await
    .unwrap();
    let token = "listen-token-0123456789";
    let created = a
        .create_channel(json!({"type": "websocket", "name": "dev",
                               "config": {"token": token, "require_ack": true}}))
        .await
        .unwrap();
    let (ch, secret) = (created.channel.id, created.signing_secret);
    let api = t.client(&a.key);
    let listen = |count: Option<usize>| {
        let opts = converger_client::cli::Listen {
            channel_id: ch.clone(),
            forward_to: rx.url.clone(),
            ws_url: t.stack.ws_url.clone(),
            token: token.to_owned(),
            count,
            json: true,
        };
        let api = api.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            converger_client::cli::listen(&api, &opts, &mut out)
                .await
                .unwrap();
            String::from_utf8(out).unwrap()
        })
    };

    // Posted with no client connected: the delivery is handed off and waits.
    let posted = api
        .post_activity(&NewActivity {
            conversation_id: "dev".into(),
            channel_ids: vec![ch.clone()],
            payload: json!({"text": "hello"}),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = posted.deliveries[0].id.clone();
    // A listener's replay brings it; its forward is answered 500: not acknowledged.
    let first = listen(None);
    rx.wait_for(1, Duration::from_secs(20)).await;
    first.abort();
    let d = api.delivery(&id).await.unwrap();
    assert_eq!((d.status.as_str(), d.awaiting_ack), ("pending", true));

    // The next listener's replay brings it again; the 200 acknowledges it.
    let printed = tokio::time::timeout(Duration::from_secs(30), listen(Some(1)))
        .await
        .unwrap()
        .unwrap();
    assert!(printed.contains(r#""acknowledged":true"#), "{printed}");
    assert_eq!(settled(&api, &id).await.status, "sent");
    let got = rx.requests();
    assert_eq!(got.len(), 2);
    for r in &got {
        let header = |n: &str| r.headers[n].to_str().unwrap().to_owned();
        assert_eq!(header("webhook-id"), id);
        let body = std::str::from_utf8(&r.body).unwrap();
        let expected = converger_client::cli::signature(
            std::slice::from_ref(&secret),
            &id,
            header("webhook-timestamp").parse().unwrap(),
            body.as_bytes(),
        )
        .unwrap();
        assert_eq!(header("webhook-signature"), expected);
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["payload"]["text"], "hello");
    }
}

/// `send --file`: a JSON-lines file sent a hundred to a request, each line's result printed,
/// a refused line failing the command once every line was sent.
#[tokio::test]
async fn the_command_line_sends_a_file_of_activities() {
    let t = TestStack::start().await;
    let a = t.new_tenant("default").await;
    let rx = Receiver::always(200).await.unwrap();
    let ch = a.webhook(&rx.url, json!({})).await.channel.id;
    let mut lines = Vec::new();
    for i in 1..=150 {
        let target = if i == 3 { "ch_nosuch" } else { ch.as_str() };
        lines.push(
            json!({"conversation_id": format!("c{}", i % 7), "channel_ids": [target],
                   "payload": {"n": i}})
            .to_string(),
        );
        if i == 10 {
            lines.push(String::new());
        }
    }
    let path = std::env::temp_dir().join(format!(
        "converger-send-{}.jsonl",
        a.key.len() + rx.url.len() + std::process::id() as usize
    ));
    std::fs::write(&path, lines.join("\n")).unwrap();
    let (code, out) = converger(&t, &a.key, &["send", "--file", path.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{out}");
    let printed: Vec<&str> = out.lines().filter(|l| l.starts_with("line ")).collect();
    assert_eq!(printed.len(), 150, "{out}");
    assert!(
        printed
            .iter()
            .any(|l| l.starts_with("line 3: refused: unknown_channel")),
        "{out}"
    );
    // The blank line is skipped: the last activity is the file's line 151.
    assert!(printed[149].starts_with("line 151: activity "), "{out}");
    assert_eq!(rx.wait_for(149, Duration::from_secs(60)).await.len(), 149);

    // A line that is not an activity stops the command before anything is sent.
    std::fs::write(&path, "{\"conversation_id\": \"c\"}\nnot json\n").unwrap();
    let (code, out) = converger(&t, &a.key, &["send", "--file", path.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty(), "nothing sent: {out}");
    let _ = std::fs::remove_file(&path);
}
