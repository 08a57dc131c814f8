//! G3, failover: lifecycles over every node (each step retried on the next node when its node
//! does not answer, with the same client id) and a stream of requests whose executor is
//! notified by webhook; one node is SIGKILLed partway. Then nothing acknowledged may be
//! missing, no client id may have two threads, no thread two claims, and every queued
//! delivery must arrive (by delivery id) within the lease plus backoff.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::nodes::Cluster;
use crate::{Outcome, Recorder, ref_of, try_post};

/// How long a node holds leased deliveries (the exchange's lease).
const LEASE: Duration = Duration::from_secs(30);

/// After a lease runs out: the surviving nodes look for due deliveries every 2 s, and a send
/// that failed when its node died waits for its retry's backoff.
const LOOK_AND_BACKOFF: Duration = Duration::from_secs(7);

/// What one step's POST came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// 2xx the first time.
    Acked,
    /// Retried after its node vanished, then 2xx or 409 (it may have been applied before).
    Retried,
    /// No node took it.
    Lost,
}

/// Posts `body` to `urls[first]`, moving on to the next node while a node does not answer.
async fn post_any(
    client: &reqwest::Client,
    urls: &[String],
    first: usize,
    key: &str,
    body: &str,
) -> (Answer, String) {
    let mut retried = false;
    for k in 0..urls.len() * 3 {
        match try_post(client, &urls[(first + k) % urls.len()], key, body).await {
            Ok((s, text)) if (200..300).contains(&s) => {
                return (
                    if retried {
                        Answer::Retried
                    } else {
                        Answer::Acked
                    },
                    text,
                );
            }
            Ok((409, text)) if retried => return (Answer::Retried, text),
            Ok((503, _)) | Err(_) => retried = true,
            Ok((s, text)) => panic!("{s}: {text}"),
        }
    }
    (Answer::Lost, String::new())
}

/// One lifecycle's record: its thread and what each step came to.
struct Done {
    thread: Option<String>,
    answers: [Answer; 4],
}

/// Runs G3 for `seconds` on the running nodes of `cluster`, killing `victim` at `kill_at`.
pub(crate) async fn run(
    cluster: &mut Cluster,
    keys: &[(String, String)],
    recorder: &Recorder,
    seconds: u64,
    kill_at: Duration,
) -> Outcome {
    let urls = cluster.mess_urls();
    let agent = cluster.token("agent", "g3-courier-agent");
    let client = reqwest::Client::new();
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let acks: Arc<Mutex<Vec<Duration>>> = Arc::default();

    let mut tasks = Vec::new();
    for (i, (agent, executor)) in keys.iter().enumerate() {
        let (client, urls, acks) = (client.clone(), urls.clone(), acks.clone());
        let (agent, executor) = (agent.clone(), executor.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut n = 0;
            while Instant::now() < until {
                let node = |step: usize| (i + n * 4 + step) % urls.len();
                let mut answers = [Answer::Lost; 4];
                let (a, text) = post_any(
                    &client,
                    &urls,
                    node(0),
                    &agent,
                    &format!(
                        "MESS:\n  - request:\n      id: g3-{i}-{n}\n      intent: failover task {n} of client {i}\n      requires: [bench-task-{i}]\n"
                    ),
                )
                .await;
                answers[0] = a;
                let thread = ref_of(&text);
                if let Some(r) = &thread {
                    acks.lock().unwrap().push(started.elapsed());
                    let bodies = [
                        format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n"),
                        format!("MESS:\n  - status:\n      re: {r}\n      code: in_progress\n      progress: 50\n"),
                        format!("MESS:\n  - status:\n      re: {r}\n      code: completed\n  - response:\n      re: {r}\n      content: [done]\n"),
                    ];
                    for (s, body) in bodies.iter().enumerate() {
                        let (a, _) = post_any(&client, &urls, node(s + 1), &executor, body).await;
                        answers[s + 1] = a;
                        if a == Answer::Lost {
                            break;
                        }
                        acks.lock().unwrap().push(started.elapsed());
                    }
                }
                done.push((format!("g3-{i}-{n}"), Done { thread, answers }));
                n += 1;
            }
            done
        }));
    }
    // Requests for the courier, who is told by webhook and never claims: deliveries to send.
    let couriers = {
        let (client, urls) = (client.clone(), urls.clone());
        tokio::spawn(async move {
            let mut refs = Vec::new();
            let mut n = 0;
            while Instant::now() < until {
                let body = format!(
                    "MESS:\n  - request:\n      id: g3-note-{n}\n      intent: deliver note {n}\n      requires: [deliver-note]\n"
                );
                if let (Answer::Acked | Answer::Retried, text) =
                    post_any(&client, &urls, n, &agent, &body).await
                    && let Some(r) = ref_of(&text)
                {
                    refs.push((r, Instant::now()));
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            refs
        })
    };
    tokio::time::sleep_until((started + kill_at).into()).await;
    // The node that took the background work first (routing, expiry) is the one to die.
    cluster.kill(0);
    let killed = Instant::now();

    let mut done: Vec<(String, Done)> = Vec::new();
    for task in tasks {
        done.extend(task.await.unwrap());
    }
    let notes = couriers.await.unwrap();
    let wall = started.elapsed();

    // Every delivery of a note arrives, by its id: those queued before the kill (some leased
    // by the dead node) within the lease, the look of the others and a retry's backoff after
    // the kill; those after it as the surviving nodes route and send.
    let wanted: BTreeMap<String, Instant> = notes
        .iter()
        .map(|(r, acked)| (format!("{r}.courier.webhook.new"), *acked))
        .collect();
    let deadline = killed + LEASE + Duration::from_secs(60);
    loop {
        let got: BTreeSet<String> = recorder.hits().into_iter().map(|(id, _)| id).collect();
        if wanted.keys().all(|w| got.contains(w)) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut arrived: BTreeMap<String, Instant> = BTreeMap::new();
    for (id, at) in recorder.hits() {
        arrived.entry(id).or_insert(at);
    }
    let missing_deliveries = wanted.keys().filter(|w| !arrived.contains_key(*w)).count();
    // From its request, or from the kill for one made before it (its node may have leased it).
    let mut slowest = Duration::ZERO;
    for (id, acked) in &wanted {
        if let Some(at) = arrived.get(id) {
            slowest = slowest.max(at.saturating_duration_since((*acked).max(killed)));
        }
    }

    // What the database holds.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let texts: BTreeMap<String, (String, String)> = cluster
        .rows(
            "SELECT t.ref, t.status, t.head || coalesce((SELECT string_agg(m.doc, '' ORDER BY m.seq) \
             FROM mess_messages m WHERE m.ref = t.ref), '') FROM mess_threads t",
        )
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let duplicate_ids = cluster.count(
        "SELECT count(*) FROM (SELECT substring(head from 'client_id: (g3-[a-z0-9-]+)') AS c \
         FROM mess_threads WHERE head LIKE '%client_id: g3-%' GROUP BY c HAVING count(*) > 1) d",
    );
    let mut missing = 0;
    let mut double_claims = 0;
    let (mut acked, mut retried, mut lost) = (0, 0, 0);
    for (_, d) in &done {
        for a in d.answers {
            match a {
                Answer::Acked => acked += 1,
                Answer::Retried => retried += 1,
                Answer::Lost => lost += 1,
            }
        }
        let Some(r) = &d.thread else {
            continue;
        };
        let Some((status, text)) = texts.get(r) else {
            missing += 1;
            continue;
        };
        let want = [
            (1, "code: claimed"),
            (2, "code: in_progress"),
            (3, "code: completed"),
        ];
        for (s, needle) in want {
            if d.answers[s] != Answer::Lost && !text.contains(needle) {
                missing += 1;
            }
        }
        if d.answers[3] != Answer::Lost && status != "completed" {
            missing += 1;
        }
        if text.matches("code: claimed").count() > 1 {
            double_claims += 1;
        }
    }

    let kill_s = kill_at.as_secs_f64();
    let acks = acks.lock().unwrap().clone();
    let rate = |from: f64, to: f64| {
        acks.iter()
            .filter(|t| (from..to).contains(&t.as_secs_f64()))
            .count() as f64
            / (to - from)
    };
    let before = rate(1.0, kill_s);
    let after = rate(kill_s + 2.0, wall.as_secs_f64());
    let ok = missing == 0
        && duplicate_ids == 0
        && double_claims == 0
        && lost == 0
        && missing_deliveries == 0
        && slowest <= LEASE + LOOK_AND_BACKOFF
        && after >= before / 2.0;
    Outcome {
        ok,
        lines: vec![
            format!(
                "G3 failover: {} clients' lifecycles and a stream of notified requests over {} nodes for {seconds} s; node 0 (the one doing routing and expiry) SIGKILLed at {kill_s:.0} s",
                keys.len(),
                urls.len()
            ),
            format!(
                "   steps acknowledged {acked}, acknowledged after moving to another node {retried}, lost {lost}; acknowledged but missing from the database {missing}; client ids with two threads {duplicate_ids}; threads with two claims {double_claims}"
            ),
            format!(
                "   rate before the kill {before:.0} messages/s, after {after:.0} messages/s ({:.0}%)",
                100.0 * after / before.max(1e-9)
            ),
            format!(
                "   deliveries: {} notes, {} never arrived; the slowest arrived {:.1} s after its request or the kill, whichever was later (target: lease {} s + {} s for a look and a retry's backoff)",
                wanted.len(),
                missing_deliveries,
                slowest.as_secs_f64(),
                LEASE.as_secs(),
                LOOK_AND_BACKOFF.as_secs()
            ),
        ],
    }
}
