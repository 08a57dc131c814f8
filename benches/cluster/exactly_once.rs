//! G1, exactly-once claims: requests spread over the nodes, then every robot tries to claim
//! every one through its own node, all robots racing for the same thread at the same moment;
//! then, after a second of quiet, the database, every mirror, `GET /threads/{ref}` on every
//! node and the SQL views must agree.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::nodes::{Cluster, ROBOTS, thread_files};
use crate::{Outcome, ref_of, try_post};

/// Runs G1 with `requests` requests on the running nodes of `cluster`.
pub(crate) async fn run(cluster: &Cluster, requests: usize) -> Outcome {
    let agent = cluster.token("agent", "g1-agent");
    let robots: Vec<String> = (0..ROBOTS)
        .map(|i| cluster.token("executor", &format!("robot-{i}")))
        .collect();
    let urls = cluster.mess_urls();
    let client = reqwest::Client::new();

    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (client, urls, agent) = (client.clone(), urls.clone(), agent.clone());
        tasks.push(tokio::spawn(async move {
            let mut refs = Vec::new();
            for n in (w..requests).step_by(16) {
                let body = format!(
                    "MESS:\n  - request:\n      id: g1-{n}\n      intent: vacuum room {n}\n      requires: [vacuum-floor]\n"
                );
                let (status, text) = try_post(&client, &urls[n % urls.len()], &agent, &body)
                    .await
                    .unwrap();
                assert_eq!(status, 200, "{text}");
                refs.push((n, ref_of(&text).unwrap_or_else(|| panic!("no ref in {text}"))));
            }
            refs
        }));
    }
    let mut refs: Vec<(usize, String)> = Vec::new();
    for task in tasks {
        refs.extend(task.await.unwrap());
    }
    refs.sort();
    let refs: Vec<String> = refs.into_iter().map(|(_, r)| r).collect();
    let created = t.elapsed();

    let t = Instant::now();
    let mut tasks = Vec::new();
    for (j, key) in robots.iter().enumerate() {
        let url = urls[j % urls.len()].clone();
        let (client, key, refs) = (client.clone(), key.clone(), refs.clone());
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            let (mut refused, mut other) = (0usize, Vec::new());
            for r in &refs {
                let body = format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n");
                match try_post(&client, &url, &key, &body).await {
                    Ok((200, _)) => won.push(r.clone()),
                    Ok((409, _)) => refused += 1,
                    Ok((s, text)) => other.push(format!("{s}: {text}")),
                    Err(e) => other.push(e.to_string()),
                }
            }
            (j, won, refused, other)
        }));
    }
    let mut winner: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut accepted, mut refused, mut errors) = (0, 0, Vec::new());
    for task in tasks {
        let (j, won, no, other) = task.await.unwrap();
        accepted += won.len();
        refused += no;
        errors.extend(other);
        for r in won {
            winner.entry(r).or_default().push(format!("robot-{j}"));
        }
    }
    let claiming = t.elapsed();
    let doubles = winner.values().filter(|w| w.len() > 1).count();

    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut problems = Vec::new();
    // The database's text of every thread, and its claims.
    let texts: BTreeMap<String, String> = cluster
        .rows(
            "SELECT t.ref, t.head || coalesce((SELECT string_agg(m.doc, '' ORDER BY m.seq) \
             FROM mess_messages m WHERE m.ref = t.ref), '') FROM mess_threads t",
        )
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let db_claims =
        cluster.count("SELECT count(*) FROM mess_messages WHERE doc LIKE '%code: claimed%'");
    let db_messages = cluster.count("SELECT count(*) FROM mess_messages");
    for (i, _) in urls.iter().enumerate() {
        let files: BTreeMap<String, Vec<u8>> = thread_files(&cluster.home(i))
            .into_iter()
            .filter_map(|(path, bytes)| {
                let name = path.rsplit('/').next()?.strip_suffix(".messe-af.yaml")?;
                Some((name.to_owned(), bytes))
            })
            .collect();
        let differ = refs
            .iter()
            .filter(|r| files.get(*r).map(Vec::as_slice) != texts.get(*r).map(|t| t.as_bytes()))
            .count();
        if differ > 0 {
            problems.push(format!(
                "node {i}: {differ} mirror file(s) differ from the database"
            ));
        }
    }
    // What each node answers, against the database's winner.
    let mut answers_differ = 0;
    for r in &refs {
        let mut bodies = Vec::new();
        for url in &urls {
            let get = url.replace("/mess", &format!("/threads/{r}"));
            let body = client
                .get(&get)
                .bearer_auth(&agent)
                .header("accept", "application/json")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            bodies.push(body);
        }
        let v: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        let executor = v["envelope"]["executor"].as_str().unwrap_or_default();
        let claimed_by = winner
            .get(r)
            .and_then(|w| w.first())
            .map_or("", String::as_str);
        if bodies.iter().any(|b| *b != bodies[0]) || executor != claimed_by {
            answers_differ += 1;
        }
    }
    if answers_differ > 0 {
        problems.push(format!(
            "{answers_differ} thread(s) answered differently by the nodes or naming another winner"
        ));
    }
    // The SQL views over each mirror count what the database holds.
    let sql_counts = "SELECT (SELECT count(*) FROM threads) AS threads, \
        (SELECT count(*) FROM messages) AS messages, \
        (SELECT count(*) FROM thread_history WHERE action = 'claimed') AS claims";
    let want = format!(
        "threads,messages,claims\n{},{db_messages},{db_claims}\n",
        texts.len()
    );
    for i in 0..urls.len() {
        let got = cluster.mess(i, &["query", "--format", "csv", sql_counts]);
        if got != want {
            problems.push(format!("node {i}: SQL counts {got:?}, database {want:?}"));
        }
    }

    let ok = accepted == requests
        && refused == requests * (ROBOTS - 1)
        && doubles == 0
        && errors.is_empty()
        && db_claims == requests as i64
        && problems.is_empty();
    let mut lines = vec![
        format!(
            "G1 exactly-once: {requests} requests created over {} nodes in {:.2} s; {} robots x {requests} claims ({} attempts) in {:.2} s = {:.0} attempts/s",
            urls.len(),
            created.as_secs_f64(),
            ROBOTS,
            ROBOTS * requests,
            claiming.as_secs_f64(),
            (ROBOTS * requests) as f64 / claiming.as_secs_f64()
        ),
        format!(
            "   accepted {accepted}, refused with 409 {refused}, other answers {}, threads with two winners {doubles}; claims in the database {db_claims}",
            errors.len()
        ),
        format!(
            "   after 1 s: {} threads byte-identical in the database and {} mirrors, GET /threads/{{ref}} identical on every node, SQL views count {} threads, {db_messages} messages, {db_claims} claims on every node",
            texts.len(),
            urls.len(),
            texts.len()
        ),
    ];
    lines.extend(errors.iter().take(3).map(|e| format!("   answer: {e}")));
    lines.extend(problems.iter().map(|p| format!("   PROBLEM: {p}")));
    Outcome { ok, lines }
}
