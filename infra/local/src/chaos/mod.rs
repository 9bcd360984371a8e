//! The chaos suite: `converger-local chaos <scenario>`. Each scenario runs the local runner
//! as a child process against its own emulator, sends activities as a producer would
//! (retrying a call that fails, with its own activity ids, so a retry is idempotent), injects
//! a fault, and prints one JSON line of figures: what was lost (must be nothing), how many
//! requests reached the receiver twice, and how long the pipeline took to recover.
//! `docs/benchmarks/chaos.md` keeps the measured results.

mod hostile_receiver;
mod stack;
mod tap;
use crate::emulator::Emulator;
use crate::receiver::Receiver;
use hostile_receiver::hostile_receiver;
use serde_json::{Value, json};
use stack::{Flow, Runner, RunnerEnv, client, tenant_and_channel};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::process::Command;

pub const USAGE: &str = "\
usage: converger-local chaos <scenario> [options]   (one JSON line of figures per scenario)
  crash [--activities N] [--kills K]     SIGKILL the runner K times while N activities flow
                                         (each also to a channel that dead-letters it)
  stall [--activities N] [--seconds S]   freeze the emulator (SIGSTOP) for S seconds mid-run
  hostile [--activities N]               hostile receivers and SSRF addresses beside a healthy
                                         channel of the same tenant
  smoke                                  all three, small, failing when anything is lost
  all                                    all three at their default sizes";

/// How long a scenario waits for every activity to arrive before it calls the rest lost:
/// longer than the queues' visibility timeout (360 s) and the sweeper's grace (300 s) plus its
/// period, the last resorts for a message that a fault hid.
const SETTLE: Duration = Duration::from_secs(480);

/// An activity that arrives later than this after the fault ended is counted as late.
const LATE: Duration = Duration::from_secs(60);

/// Runs `chaos <args>`.
pub async fn run(args: &[String]) -> Result<(), String> {
    let Some(scenario) = args.first() else {
        return Err(USAGE.into());
    };
    let num = |flag: &str, default: usize| -> Result<usize, String> {
        match args.iter().position(|a| a == flag) {
            Some(i) => args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{flag} needs a number")),
            None => Ok(default),
        }
    };
    let figures = match scenario.as_str() {
        "crash" => vec![crash(num("--activities", 300)?, num("--kills", 3)?).await?],
        "stall" => vec![stall(num("--activities", 200)?, num("--seconds", 20)?).await?],
        "hostile" => vec![hostile(num("--activities", 100)?).await?],
        "all" => vec![
            crash(300, 3).await?,
            stall(200, 20).await?,
            hostile(100).await?,
        ],
        "smoke" => vec![crash(40, 1).await?, stall(40, 5).await?, hostile(20).await?],
        _ => return Err(USAGE.into()),
    };
    let mut failed = Vec::new();
    for f in &figures {
        println!("{f}");
        if f["lost"].as_u64() != Some(0) {
            failed.push(format!("{}: {} activities lost", f["scenario"], f["lost"]));
        }
        if let Some(n) = f["sent_without_event"].as_u64()
            && n > 0
        {
            failed.push(format!(
                "{}: {n} deliveries sent without their status event",
                f["scenario"]
            ));
        }
        for (field, what) in [
            (
                "dead_letters_without_event",
                "dead letters without their event",
            ),
            (
                "dead_letters_missing",
                "deliveries to the refusing channel never dead-lettered",
            ),
        ] {
            if let Some(k) = f[field].as_u64()
                && k > 0
            {
                failed.push(format!("{}: {k} {what}", f["scenario"]));
            }
        }
        if let Some(problems) = f["problems"].as_array()
            && !problems.is_empty()
        {
            failed.push(format!(
                "{}: {}",
                f["scenario"],
                Value::Array(problems.clone())
            ));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// What the receiver got: (distinct activity numbers, requests, the instant each number
/// arrived first).
fn received(rx: &Receiver) -> (HashSet<u64>, usize, Vec<(u64, Instant)>) {
    let reqs = rx.requests();
    let mut seen = HashSet::new();
    let mut firsts = Vec::new();
    for r in &reqs {
        let n = serde_json::from_slice::<Value>(&r.body)
            .ok()
            .and_then(|v| v["payload"]["n"].as_u64());
        if let Some(n) = n
            && seen.insert(n)
        {
            firsts.push((n, r.at));
        }
    }
    (seen, reqs.len(), firsts)
}

/// Waits until the receiver has every activity `0..n` or `SETTLE` passes.
async fn settle(rx: &Receiver, n: usize) -> Instant {
    let deadline = Instant::now() + SETTLE;
    loop {
        if received(rx).0.len() >= n || Instant::now() > deadline {
            return Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The deliveries of the activities that never arrived (at most five), as the API shows them:
/// what a lost activity was waiting for.
async fn missing(r: &Runner, key: &str, seen: &HashSet<u64>, n: usize) -> Vec<Value> {
    let Ok(http) = client() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in (0..n as u64).filter(|i| !seen.contains(i)).take(5) {
        let url = format!("{}/api/v1/deliveries?activity_id=act_chaos-{i}", r.api_url);
        let v = match http.get(&url).bearer_auth(key).send().await {
            Ok(resp) => {
                serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null)
            }
            Err(e) => json!(e.to_string()),
        };
        out.push(json!({"activity": i, "deliveries": v["data"]}));
    }
    out
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The runner SIGKILLed `kills` times while `n` activities flow at 50/s to a receiver that
/// takes 500 ms (so that many attempts are in flight when it dies), each time restarted a
/// second later. For each restart: how long until every
/// activity accepted before the kill had reached the receiver (the crashed attempts, with their
/// leases, and the messages the dead process had received). Each activity also goes to a
/// channel whose receiver answers 400: every dead letter must have its
/// `delivery.dead_lettered` on the bus, though the runner died between writes.
async fn crash(n: usize, kills: usize) -> Result<Value, String> {
    let Flow {
        em,
        rx,
        env,
        mut runner,
        key,
        sent,
        failed_posts,
        started,
        producing,
        tap,
        dead,
    } = Flow::start("crash", n, 50, true).await?;
    let mut restarts = Vec::new();
    for k in 1..=kills {
        let at = n * k / (kills + 1);
        while sent.load(Ordering::Relaxed) < at {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let accepted = sent.load(Ordering::Relaxed);
        let killed = Instant::now();
        runner.kill().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        runner = env.start().await?;
        let ready = Instant::now();
        let before = received(&rx).1;
        // Every activity accepted before the kill, delivered.
        let deadline = ready + SETTLE;
        let mut first = None;
        let recovered = loop {
            if first.is_none() && received(&rx).1 > before {
                first = Some(ready.elapsed());
            }
            let (seen, _, _) = received(&rx);
            if (0..accepted as u64).all(|i| seen.contains(&i)) {
                break Some(ready.elapsed());
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        restarts.push(json!({
            "accepted_before_kill": accepted,
            "restart_ms": ms(ready - killed),
            "first_delivery_after_restart_ms": first.or(recovered).map(ms),
            "recovered_after_restart_ms": recovered.map(ms),
        }));
    }
    producing.await.map_err(|e| e.to_string())??;
    let done = settle(&rx, n).await;
    let (seen, requests, _) = received(&rx);
    let lost = missing(&runner, &key, &seen, n).await;
    // Every delivery the receiver took has its `sent` event on the bus, though the runner was
    // killed between writes and whatever followed them (the events come from the table's
    // stream, read again after the restart).
    // And every dead letter its `delivery.dead_lettered` (each activity's delivery to the
    // refusing channel is one, at its first attempt).
    let dead_id = dead.as_ref().map(|(_, id)| id.as_str()).unwrap_or_default();
    let dead_letters = tap::failed_deliveries(&runner.api_url, &key, dead_id, n).await?;
    let heard = tap::announced(&tap, seen.len(), dead_letters).await?;
    let announced = heard.sent;
    runner.kill().await;
    em.stop().await;
    let worst = restarts
        .iter()
        .filter_map(|r| r["recovered_after_restart_ms"].as_u64())
        .max();
    Ok(json!({
        "scenario": "crash",
        "activities": n,
        "kills": kills,
        "lost": n - seen.len().min(n),
        "duplicates": requests.saturating_sub(seen.len()),
        "failed_posts_retried": failed_posts.load(Ordering::Relaxed),
        "restarts": restarts,
        "worst_recovery_after_restart_ms": worst,
        "missing": lost,
        "sent_events": announced,
        "sent_without_event": seen.len().saturating_sub(announced),
        "dead_letters": dead_letters,
        "dead_letters_missing": n.saturating_sub(dead_letters),
        "dead_letter_events": heard.dead_lettered,
        "dead_letters_without_event": dead_letters.saturating_sub(heard.dead_lettered),
        "total_s": (done - started).as_secs_f64(),
    }))
}

/// The emulator frozen (SIGSTOP) for `seconds` while `n` activities flow at 20/s to a
/// receiver that takes 500 ms (calls are in flight when storage stops), then thawed
/// (SIGCONT): how long until deliveries resume and until everything accepted has arrived.
async fn stall(n: usize, seconds: usize) -> Result<Value, String> {
    let Flow {
        em,
        rx,
        runner,
        key,
        sent,
        failed_posts,
        started,
        producing,
        ..
    } = Flow::start("stall", n, 20, false).await?;
    let pid = em.pid().ok_or("the emulator has no process id")?;
    while sent.load(Ordering::Relaxed) < n / 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(pid, "STOP").await?;
    tokio::time::sleep(Duration::from_secs(seconds as u64)).await;
    let accepted = sent.load(Ordering::Relaxed);
    signal(pid, "CONT").await?;
    let thawed = Instant::now();
    let before = received(&rx).1;
    // The first request after the thaw, and every activity accepted before it.
    let deadline = thawed + SETTLE;
    let (mut resumed, mut recovered) = (None, None);
    while Instant::now() < deadline && recovered.is_none() {
        let (seen, requests, _) = received(&rx);
        if resumed.is_none() && requests > before {
            resumed = Some(thawed.elapsed());
        }
        if (0..accepted as u64).all(|i| seen.contains(&i)) {
            recovered = Some(thawed.elapsed());
            resumed.get_or_insert(thawed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    producing.await.map_err(|e| e.to_string())??;
    let done = settle(&rx, n).await;
    let (seen, requests, firsts) = received(&rx);
    let late = firsts.iter().filter(|(_, at)| *at > thawed + LATE).count();
    let lost = missing(&runner, &key, &seen, n).await;
    runner.kill().await;
    em.stop().await;
    Ok(json!({
        "scenario": "stall",
        "late": late,
        "last_arrival_after_thaw_ms": firsts.iter().map(|(_, at)| *at).max().map(|at| ms(at.saturating_duration_since(thawed))),
        "missing": lost,
        "activities": n,
        "stall_s": seconds,
        "accepted_before_thaw": accepted,
        "lost": n - seen.len().min(n),
        "duplicates": requests.saturating_sub(seen.len()),
        "failed_posts_retried": failed_posts.load(Ordering::Relaxed),
        "first_delivery_after_thaw_ms": resumed.map(ms),
        "recovered_after_thaw_ms": recovered.map(ms),
        "total_s": (done - started).as_secs_f64(),
    }))
}

async fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let st = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .await
        .map_err(|e| format!("kill -{sig}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("kill -{sig} {pid} failed ({st})"))
    }
}

/// Hostile receivers (one that never answers, a slowloris body, a 50 MB body, a redirect to
/// the metadata address, a body that is not UTF-8) and webhook URLs aimed at addresses a
/// tenant must not reach (the metadata address written five ways, a private and a
/// unique-local address), all beside a healthy channel of the same tenant that gets `n`
/// activities at 10/s. Each hostile delivery must end bounded (within its 2 s timeout and
/// grace per attempt) with the outcome its receiver earned; no forbidden address may be
/// called; the healthy channel must lose nothing, and its latency is printed beside a run of
/// the same channel alone.
async fn hostile(n: usize) -> Result<Value, String> {
    let em = Emulator::start().await?;
    let rx = Receiver::always(200).await?;
    let env = RunnerEnv::new(&em.endpoint, "hostile")?;
    let runner = env.start().await?;
    let http = client()?;
    let (key, healthy) = tenant_and_channel(&http, &runner, &rx).await?;
    // The tenant API as JSON: a POST with a body, or a GET without.
    let call = |path: String, body: Option<Value>| {
        let (http, url, key) = (
            http.clone(),
            format!("{}{path}", runner.api_url),
            key.clone(),
        );
        async move {
            let req = match body {
                Some(b) => http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(b.to_string()),
                None => http.get(&url),
            };
            let resp = req
                .bearer_auth(&key)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let text = resp.text().await.map_err(|e| e.to_string())?;
            serde_json::from_str::<Value>(&text).map_err(|e| format!("{url}: {e}: {text}"))
        }
    };
    let post = |path: &str, body: Value| call(path.to_owned(), Some(body));

    // The healthy channel alone: its latency baseline.
    let baseline = healthy_run(&post, &rx, &healthy, 0, n).await?;

    // The hostile channels: two attempts each, 1 s apart, 2 s timeout.
    let policy =
        json!({"max_attempts": 2, "backoff": "fixed", "base_ms": 1000, "timeout_ms": 2000});
    let mut hostile = Vec::new();
    for kind in ["sleeper", "slowloris", "huge", "redirect", "bad-utf8"] {
        hostile.push((kind, hostile_receiver(kind).await?));
    }
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:169.254.169.254]/latest/meta-data",
        "http://2852039166/latest/meta-data",
        "http://0xa9fea9fe/latest/meta-data",
        "http://169.254.43518/latest/meta-data",
        "http://10.0.0.1/hook",
        "http://[fd00::1]/hook",
    ] {
        hostile.push(("ssrf", url.to_owned()));
    }
    let mut targets = Vec::new();
    for (kind, url) in &hostile {
        let ch = post(
            "/api/v1/channels",
            json!({"type": "webhook", "name": format!("hostile-{kind}"),
                   "config": {"url": url}, "retry_policy": policy}),
        )
        .await?;
        let Some(id) = ch["id"].as_str() else {
            return Err(format!("channel for {url}: {ch}"));
        };
        let a = post(
            "/api/v1/activities",
            json!({"conversation_id": "hostile", "channel_ids": [id], "payload": {"kind": kind}}),
        )
        .await?;
        let d = a["deliveries"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        targets.push((*kind, url.clone(), d));
    }
    let during = healthy_run(&post, &rx, &healthy, n, n).await?;

    // Every hostile delivery settles, each attempt bounded.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut outcomes = Vec::new();
    let mut problems = Vec::new();
    for (kind, url, id) in &targets {
        let row = loop {
            let row = call(format!("/api/v1/deliveries/{id}"), None).await?;
            if row["status"] != "pending" || Instant::now() > deadline {
                break row;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let log = call(format!("/api/v1/deliveries/{id}/attempts"), None).await?;
        let durations: Vec<u64> = log["data"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["duration_ms"].as_u64()).collect())
            .unwrap_or_default();
        let longest = durations.iter().copied().max().unwrap_or(0);
        let error = row["last_error"].as_str().unwrap_or_default().to_owned();
        let expected = match *kind {
            // Their status line said 200: accepted, whatever the body does (it is read for
            // at most the timeout, and at most 64 KiB of it).
            "huge" | "slowloris" => row["status"] == "sent",
            "ssrf" => {
                row["status"] == "failed" && error.contains("not allowed") && row["attempts"] == 1
            }
            _ => row["status"] == "failed",
        };
        // 2 s timeout + 5 s grace at most, whatever the receiver does.
        if !expected || longest > 7_000 {
            problems.push(json!({"kind": kind, "url": url, "row": row, "attempt_ms": durations}));
        }
        outcomes.push(json!({
            "kind": kind,
            "url": url,
            "status": row["status"],
            "attempts": row["attempts"],
            "longest_attempt_ms": longest,
            "last_error": error.chars().take(120).collect::<String>(),
        }));
    }
    let (seen, requests, _) = received(&rx);
    runner.kill().await;
    em.stop().await;
    let lost = 2 * n - seen.len().min(2 * n);
    Ok(json!({
        "scenario": "hostile",
        "activities": n,
        "lost": lost,
        "duplicates": requests.saturating_sub(seen.len()),
        "healthy_alone_ms": baseline,
        "healthy_beside_hostile_ms": during,
        "hostile": outcomes,
        "problems": problems,
    }))
}

/// `n` activities (numbered from `from`) at 10/s to the healthy channel; the time from each
/// POST to its arrival, as p50/p95/max in milliseconds.
async fn healthy_run<F, Fut>(
    post: &F,
    rx: &Receiver,
    channel: &str,
    from: usize,
    n: usize,
) -> Result<Value, String>
where
    F: Fn(&str, Value) -> Fut,
    Fut: std::future::Future<Output = Result<Value, String>>,
{
    let mut sent = Vec::with_capacity(n);
    for i in from..from + n {
        let at = Instant::now();
        post(
            "/api/v1/activities",
            json!({"conversation_id": "healthy", "channel_ids": [channel], "payload": {"n": i}}),
        )
        .await?;
        sent.push((i as u64, at));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (seen, _, _) = received(rx);
        if sent.iter().all(|(i, _)| seen.contains(i)) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let firsts = received(rx).2;
    let mut lat: Vec<u64> = sent
        .iter()
        .filter_map(|(i, at)| {
            firsts
                .iter()
                .find(|(n, _)| n == i)
                .map(|(_, got)| ms(got.saturating_duration_since(*at)))
        })
        .collect();
    lat.sort_unstable();
    let pct = |p: f64| -> Option<u64> {
        let idx = ((lat.len() as f64 * p).ceil() as usize).saturating_sub(1);
        lat.get(idx).copied()
    };
    Ok(json!({"p50": pct(0.5), "p95": pct(0.95), "max": lat.last(), "arrived": lat.len()}))
}
