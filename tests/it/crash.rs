//! Crash safety: `mess` processes are killed (SIGKILL) at random points during a long run of
//! writes; afterwards `mess fsck --repair` leaves every file parseable and every acknowledged
//! message present.

use std::process::Stdio;
use std::time::{Duration, Instant};

use mess::protocol::ids::ThreadRef;
use mess::protocol::message::Payload;
use mess::store::Store;

use crate::support::Home;

/// xorshift64*: a small deterministic generator, so a failing run can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Turns a successful command's stdout into what it promised.
type OnSuccess = Box<dyn Fn(&str) -> Acked>;

/// What a write that returned success promised.
enum Acked {
    Created(String),
    Status { thread: String, code: &'static str },
}

#[test]
fn killed_writers_never_lose_acknowledged_messages_or_corrupt_files() {
    let home =
        Home::with_config("agent_id: agent\nexecutors:\n  robot:\n    capabilities: [work]\n");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let iterations = if std::env::var_os("MESS_SLOW_TESTS").is_some() {
        1500
    } else {
        240
    };
    let mut acked: Vec<Acked> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut claimed: Vec<String> = Vec::new();
    let mut kills = 0;
    for i in 0..iterations {
        let (args, on_success): (Vec<String>, OnSuccess) = match rng.below(3) {
            0 if !claimed.is_empty() => {
                let t = claimed[rng.below(claimed.len() as u64) as usize].clone();
                let code: &'static str = if rng.below(3) == 0 {
                    "completed"
                } else {
                    "in_progress"
                };
                let args = if code == "completed" {
                    vec![
                        "complete".into(),
                        t.clone(),
                        "--as".into(),
                        "robot".into(),
                        "--text".into(),
                        format!("result {i}"),
                    ]
                } else {
                    vec![
                        "update".into(),
                        t.clone(),
                        "--as".into(),
                        "robot".into(),
                        "--status".into(),
                        "in_progress".into(),
                        "--progress".into(),
                        format!("{}", i % 100),
                    ]
                };
                (
                    args,
                    Box::new(move |_| Acked::Status {
                        thread: t.clone(),
                        code,
                    }),
                )
            }
            1 if !open.is_empty() => {
                let t = open.remove(rng.below(open.len() as u64) as usize);
                let args = vec!["claim".into(), t.clone(), "--as".into(), "robot".into()];
                (
                    args,
                    Box::new(move |_| Acked::Status {
                        thread: t.clone(),
                        code: "claimed",
                    }),
                )
            }
            _ => {
                let args = vec![
                    "request".into(),
                    format!("task {i}"),
                    "--requires".into(),
                    "work".into(),
                    "--id".into(),
                    format!("t{i}"),
                ];
                (
                    args,
                    Box::new(|out: &str| Acked::Created(out.trim().to_owned())),
                )
            }
        };
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = home
            .command(&argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_micros(rng.below(12_000));
        let finished = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        let status = match finished {
            Some(s) => s,
            None => {
                let _ = child.kill();
                kills += 1;
                child.wait().unwrap()
            }
        };
        let out = child.wait_with_output().unwrap();
        if status.success() {
            let a = on_success(&String::from_utf8_lossy(&out.stdout));
            match &a {
                Acked::Created(t) => open.push(t.clone()),
                Acked::Status { thread, code } if *code == "claimed" => {
                    claimed.push(thread.clone())
                }
                Acked::Status { thread, code } if *code == "completed" => {
                    claimed.retain(|t| t != thread)
                }
                _ => {}
            }
            acked.push(a);
        } else if finished.is_some() {
            // A refused step (say, a claim of a thread a killed writer already claimed) is an
            // answer too; it promised nothing.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains("incomplete") && !err.contains("does not parse"),
                "seed {seed}: {err}"
            );
        }
    }
    assert!(
        kills > iterations / 10,
        "seed {seed}: only {kills} kills; the test did not interrupt writers"
    );
    // The next start of a server heals what the kills left: fsck is clean with no --repair.
    let mut server = crate::support::server::Server::start(&home);
    assert!(server.terminate(Duration::from_secs(10)));
    let check = home.run(&["fsck"]);
    assert!(
        check.status.success(),
        "seed {seed}: fsck after a restart:\n{}",
        String::from_utf8_lossy(&check.stdout)
    );

    let store = Store::open(home.path());
    for a in &acked {
        match a {
            Acked::Created(t) => {
                let thread = store
                    .read(&ThreadRef::parse(t).unwrap())
                    .unwrap_or_else(|e| panic!("seed {seed}: {t}: {e}"));
                thread.messages().unwrap();
            }
            Acked::Status { thread, code } => {
                let file = store.read(&ThreadRef::parse(thread).unwrap()).unwrap();
                let found = file.messages().unwrap().iter().any(|d| {
                    d.from == "robot"
                        && d.message
                            .payloads
                            .iter()
                            .any(|p| matches!(p, Payload::Status(s) if s.code.as_str() == *code))
                });
                assert!(
                    found,
                    "seed {seed}: acknowledged {code} on {thread} is missing"
                );
            }
        }
    }
    let (all, errors) = store.list(&mess::protocol::status::State::ALL, true);
    assert!(errors.is_empty(), "seed {seed}: {errors:?}");
    for (env, _, _) in all {
        store.read(&env.thread_ref).unwrap().messages().unwrap();
    }
}

/// A thread whose move from `state=received/` to `state=executing/` was interrupted after the
/// new copy was written: both copies exist, as a kill -9 between the rename and the removal
/// leaves them. Returns the ref and the stale copy's path.
fn interrupted_move(home: &Home) -> (String, std::path::PathBuf) {
    let r = home.ok(&["request", "move the couch", "--requires", "work"]);
    let r = r.trim().to_owned();
    let old = home
        .path()
        .join(format!("state=received/{r}.messe-af.yaml"));
    let before = std::fs::read(&old).unwrap();
    home.ok(&["claim", &r, "--as", "robot"]);
    assert!(!old.exists());
    std::fs::write(&old, before).unwrap();
    let fsck = home.run(&["fsck"]);
    assert!(!fsck.status.success(), "the duplicate is found");
    assert!(
        String::from_utf8_lossy(&fsck.stdout).contains("interrupted move"),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    (r, old)
}

#[test]
fn the_next_start_heals_an_interrupted_move_so_fsck_is_clean_without_repair() {
    let home =
        Home::with_config("agent_id: agent\nexecutors:\n  robot:\n    capabilities: [work]\n");
    // `mess serve`: healed before it listens.
    let (r, stale) = interrupted_move(&home);
    let mut server = crate::support::server::Server::start(&home);
    assert!(!stale.exists(), "the older copy is removed at start");
    assert!(server.terminate(Duration::from_secs(10)));
    home.ok(&["fsck"]);
    let status = home.ok(&["status", &r]);
    assert!(status.contains("claimed"), "{status}");
    // `mess mcp`: healed as it starts, before any tool is called.
    let (_, stale) = interrupted_move(&home);
    let mut mcp = home
        .command(&["mcp", "--as", "agent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while stale.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "mess mcp never healed the move"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = mcp.kill();
    let _ = mcp.wait();
    home.ok(&["fsck"]);
}
