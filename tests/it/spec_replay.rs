//! Every example message of the specifications replayed against the real binary, with the
//! effect each one documents checked in the thread it lands in.
//!
//! Each fixture of `tests/fixtures/messages/valid/` is sent, document by document and in order,
//! with `mess send --as <sender>` on a fresh home whose `config.yaml` registers every executor
//! the examples name, each with the capabilities the examples' requests need (`UNION`). The
//! sender follows the payload: requests, replies, cancels and queries come from the agent
//! (`claude-agent`); statuses from the executor they name (`executor:`), other executor
//! payloads from the case's executor; a document with a `from:` line (MESSE-AF's message
//! documents) from that sender; `config` from the operator (the CLI on the exchange's host).
//! Acks are the exchange's messages: instead of sending one, the replay checks that the
//! exchange's own answer to the message before it is an ack of the same shape.
//!
//! The examples' refs (`2026-01-31-001`) are not the refs the exchange assigns: the n-th
//! distinct example ref of a fixture stands for the n-th ref the exchange acknowledged in that
//! replay (its prelude included), and is rewritten before sending. Where an example is a lone
//! status, response or reply with nothing before it in its block, the case's prelude first
//! sends what it implies (the request, and the executor's question, confirmation request or
//! suggestion a reply answers); placeholders of the reference blocks (`<reference>`,
//! `<field>`) are replaced by the case, which says so.

use serde::Deserialize;
use serde_json::Value;

use crate::support::Home;

/// The agent of every replay.
const AGENT: &str = "claude-agent";

/// Every executor the examples name, with the capabilities their requests need.
const UNION: &str = "agent_id: claude-agent
executors:
  roomba:
    capabilities: [vacuum-floor, home-kitchen-access]
  kitchen-robot:
    capabilities: [precision-knife-work, home-kitchen-access]
  patio-camera:
    capabilities: [outdoor-photo]
  cleanup-bot:
    capabilities: [dispose-items]
  prusa-mk4:
    capabilities:
      - 3d-print-fdm
      - assembly
      - fabricator: { variants: [3d_printer_fdm] }
  indoor-robot:
    capabilities: [garage-access]
  household:teague-phone:
    capabilities: [take-photo, check-visual]
  household:kitchen-helper:
    capabilities: [operate-appliance, home-kitchen-access]
  home-assistant:
    capabilities: [operate-valve]
  instacart-proxy:
    capabilities: [purchasing, delivery]
  teague-phone:
    capabilities: [take-photo, check-visual, local-errands]
";

/// The capability catalog of v1.0 section 8 (8.1, 8.6), for the discovery query.
const CATALOG: &str = "id: take-photo
description: Capture and attach photos
tags: [visual, attachments]
---
id: check-visual
description: Look at something, read a display
tags: [visual]
---
id: vacuum-floor
description: Vacuum a floor
tags: [cleaning]
";

/// One YAML text as its documents, as JSON values.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| {
            let v = serde_yaml::Value::deserialize(d).unwrap();
            serde_json::to_value(v).unwrap()
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The source blocks of a fixture file, split on `---` lines.
fn blocks(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            out.push(String::new());
        } else {
            let last = out.last_mut().unwrap();
            last.push_str(line);
            last.push('\n');
        }
    }
    out.retain(|b| b.lines().any(|l| l.starts_with("MESS:")));
    out
}

/// The distinct refs (`YYYY-MM-DD-NNN`) a text names, in order of first appearance.
fn example_refs(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    for i in 0..b.len().saturating_sub(13) {
        let w = &b[i..i + 14];
        let shape = w.iter().enumerate().all(|(j, c)| match j {
            4 | 7 | 10 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        let end = b.get(i + 14).is_none_or(|c| !c.is_ascii_alphanumeric());
        if shape && boundary && end {
            let r = String::from_utf8(w.to_vec()).unwrap();
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

/// A replay on one fresh home.
struct Replay {
    home: Home,
    /// Refs the exchange acknowledged, in order.
    acked: Vec<String>,
    /// Example refs of the fixture, in order of first appearance.
    examples: Vec<String>,
    /// The exchange's answers to every message sent, in order.
    answers: Vec<Vec<Value>>,
}

impl Replay {
    fn new(config: &str) -> Replay {
        let home = Home::with_config(config);
        std::fs::write(home.path().join("capabilities.yaml"), CATALOG).unwrap();
        Replay {
            home,
            acked: Vec::new(),
            examples: Vec::new(),
            answers: Vec::new(),
        }
    }

    /// `yaml` with each example ref replaced by the ref the exchange acked in its place.
    fn mapped(&self, yaml: &str) -> String {
        let mut out = yaml.to_owned();
        for (example, real) in self.examples.iter().zip(&self.acked) {
            out = out.replace(example.as_str(), real);
        }
        out
    }

    fn run(&self, who: &str, yaml: &str) -> std::process::Output {
        self.home
            .with_stdin(&["send", "-", "--as", who], &self.mapped(yaml))
    }

    /// Sends `yaml` as `who` and returns the exchange's answer, failing on an error.
    fn send(&mut self, who: &str, yaml: &str) -> Vec<Value> {
        let out = self.run(who, yaml);
        assert!(
            out.status.success(),
            "{who} sending\n{}\nfailed: {}",
            self.mapped(yaml),
            String::from_utf8_lossy(&out.stderr)
        );
        let answer = documents(&String::from_utf8(out.stdout).unwrap());
        for doc in &answer {
            let payloads = doc["MESS"].as_array().unwrap();
            assert!(payloads[0]["v"].is_string(), "answers start with v: {doc}");
            for p in payloads {
                if let Some(r) = p["ack"]["ref"].as_str() {
                    self.acked.push(r.to_owned());
                }
                for item in p["ack"]["requests"].as_array().into_iter().flatten() {
                    self.acked.push(item["ref"].as_str().unwrap().to_owned());
                }
            }
        }
        self.answers.push(answer.clone());
        answer
    }

    /// Sends `yaml` as `who`, expects it refused, and returns the error.
    fn refused(&self, who: &str, yaml: &str) -> String {
        let out = self.run(who, yaml);
        assert_eq!(out.status.code(), Some(1), "{who}: {yaml} was accepted");
        String::from_utf8(out.stderr).unwrap()
    }

    /// The n-th ref the exchange acknowledged.
    fn r(&self, n: usize) -> &str {
        &self.acked[n]
    }

    /// The thread file of `re` (a ref or client id) as documents: envelope, then messages.
    fn thread(&self, re: &str) -> Vec<Value> {
        documents(&self.home.ok(&["show", re]))
    }

    /// `mess status RE --format json`.
    fn status(&self, re: &str) -> Value {
        serde_json::from_str(&self.home.ok(&["status", re, "--format", "json"])).unwrap()
    }

    /// The history entries of a thread.
    fn history(&self, re: &str) -> Vec<Value> {
        self.thread(re)[0]["history"].as_array().unwrap().clone()
    }

    fn actions(&self, re: &str) -> Vec<String> {
        self.history(re)
            .iter()
            .map(|h| h["action"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The last history entry of a thread.
    fn last_entry(&self, re: &str) -> Value {
        self.history(re).last().unwrap().clone()
    }

    /// The payloads of every message stored in thread `re` with type `kind`.
    fn payloads(&self, re: &str, kind: &str) -> Vec<Value> {
        self.thread(re)
            .iter()
            .skip(1)
            .flat_map(|m| m["MESS"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p.get(kind).cloned())
            .collect()
    }

    /// Asserts the status, the folder and the history actions of a thread.
    fn expect(&self, re: &str, status: &str, state: &str, actions: &[&str]) {
        let s = self.status(re);
        assert_eq!(s["status"], status, "{re}: {s:#}");
        assert_eq!(s["state"], state, "{re}: {s:#}");
        let file = self
            .home
            .path()
            .join(format!("state={state}"))
            .join(format!("{}.messe-af.yaml", s["ref"].as_str().unwrap()));
        assert!(file.is_file(), "{} missing", file.display());
        assert_eq!(self.actions(re), actions, "{re}");
    }

    /// The executor the exchange routed thread `re` to (its `dispatched` entry).
    fn routed_to(&self, re: &str) -> String {
        let env = &self.thread(re)[0];
        let entry = env["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["action"] == "dispatched")
            .unwrap_or_else(|| panic!("{re} was not dispatched: {env:#}"));
        let note = entry["note"].as_str().unwrap();
        let name = note.strip_prefix("routed to ").unwrap();
        name[..name.find(": ").unwrap()].to_owned()
    }
}

/// The sender of one fixture document (see the module comment); `None` for an ack. An
/// executor payload that names no executor, in a case that names none either, comes from the
/// executor holding the thread it names, else the one the exchange routed it to (`re: last`:
/// the latest request).
fn sender(r: &Replay, doc: &Value, executor: Option<&str>) -> Option<String> {
    if let Some(from) = doc["from"].as_str() {
        return Some(from.to_owned());
    }
    let payload = doc["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("v").is_none())
        .unwrap();
    let (kind, body) = payload.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "ack" => None,
        "request" | "reply" | "cancel" | "query" | "config" => Some(AGENT.to_owned()),
        _ => {
            if let Some(e) = body["executor"].as_str().or(executor) {
                return Some(e.to_owned());
            }
            let re = match body["re"].as_str() {
                None | Some("last") => r.acked.last().unwrap().clone(),
                Some(re) => r.mapped(re),
            };
            match r.status(&re)["executor"].as_str() {
                Some(e) => Some(e.to_owned()),
                None => Some(r.routed_to(&re)),
            }
        }
    }
}

/// One fixture's replay: what the case sends first, how its placeholders read, and what
/// must hold afterwards.
struct Case {
    fixture: &'static str,
    /// `config.yaml` of the home (`UNION` but where an example registers executors).
    config: &'static str,
    /// Sender of executor payloads that name no executor (else see `sender`).
    executor: Option<&'static str>,
    /// Messages sent before the fixture's own, as (sender, YAML).
    prelude: &'static [(&'static str, &'static str)],
    /// Text replacements for placeholders, applied to the fixture before it is sent.
    replace: &'static [(&'static str, &'static str)],
    check: fn(&Replay),
}

/// Replays one case's fixture and runs its check.
fn replay(case: &Case) -> Replay {
    let path = format!(
        "{}/tests/fixtures/messages/valid/{}",
        env!("CARGO_MANIFEST_DIR"),
        case.fixture
    );
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in case.replace {
        text = text.replace(from, to);
    }
    let mut r = Replay::new(case.config);
    for (who, yaml) in case.prelude {
        r.send(who, yaml);
    }
    r.examples = example_refs(&text);
    // Documents that carry their own `received:` time (MESSE-AF's) are replayed in that order.
    let mut docs: Vec<(String, Value)> = blocks(&text)
        .into_iter()
        .map(|b| {
            let v = documents(&b).remove(0);
            (b, v)
        })
        .collect();
    docs.sort_by_key(|(_, v)| v["received"].as_str().map(str::to_owned));
    for (block, doc) in docs {
        match sender(&r, &doc, case.executor) {
            None => {
                // The example shows the exchange's ack: the answer to the message before it
                // must be one, naming the same request.
                let last = r.answers.last().unwrap().last().unwrap().clone();
                let ack = last["MESS"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find_map(|p| p.get("ack"))
                    .unwrap_or_else(|| panic!("{}: no ack in {last:#}", case.fixture))
                    .clone();
                let shown = &doc["MESS"][0]["ack"];
                if let Some(re) = shown["re"].as_str() {
                    assert_eq!(ack["re"], re, "{}", case.fixture);
                    assert!(ack["ref"].is_string() && ack["received_at"].is_string());
                }
                if let Some(items) = shown["requests"].as_array() {
                    let got = ack["requests"].as_array().unwrap();
                    assert_eq!(got.len(), items.len());
                    for (g, want) in got.iter().zip(items) {
                        assert_eq!(g["id"], want["id"]);
                        assert_eq!(
                            g["ref"].as_str().unwrap(),
                            r.mapped(want["ref"].as_str().unwrap())
                        );
                    }
                }
            }
            Some(who) => {
                r.send(&who, &block);
            }
        }
    }
    (case.check)(&r);
    r
}

/// The content entries of the responses stored in thread `re`.
fn response_content(r: &Replay, re: &str) -> Vec<Value> {
    r.payloads(re, "response")
        .iter()
        .flat_map(|p| p["content"].as_array().cloned().unwrap_or_default())
        .collect()
}

const VACUUM: &str = "MESS:
  - request:
      id: vacuum-kitchen
      intent: vacuum the rice spill in front of the kitchen sink
      requires: [vacuum-floor, home-kitchen-access]
";
const VACUUM_QUESTION: &str = "MESS:
  - status:
      re: vacuum-kitchen
      code: needs_input
      questions:
        - field: location
          question: Rice near sink AND crumbs by stove. Which area?
          options: [near sink, by stove, both]
";
const GARAGE: &str = "MESS:
  - request:
      id: cleanup-garage
      intent: clear out the garage
      requires: [dispose-items]
";
const GARAGE_CONFIRM: &str = "MESS:
  - status:
      re: cleanup-garage
      code: needs_confirmation
      action: dispose of 12 items marked as trash
      consequences: items cannot be recovered
      reversible: false
";
const PRINT: &str = "MESS:
  - request:
      id: print-clips
      intent: print 4 cable clips
      requires: [3d-print-fdm]
";
const FRIDGE: &str = "MESS:
  - request:
      id: fridge-check
      intent: what's in the fridge?
      requires: [take-photo]
";
const GROCERIES: &str = "MESS:
  - request: {id: get-onions, intent: buy yellow onions, requires: [purchasing]}
  - request: {id: get-garlic, intent: buy garlic, requires: [purchasing]}
";
const GROCERY_PURCHASE: &str = "MESS:
  - request:
      id: grocery-run
      intent: buy groceries at Safeway
      requires: [purchasing]
";
const GROCERY_ERRAND: &str = "MESS:
  - request:
      id: grocery-run
      intent: buy groceries at Safeway
      requires: [local-errands]
";
const LOCAL_ERRAND: &str = "MESS:
  - request:
      id: errand
      intent: pick up the groceries
      requires: [local-errands]
";

/// A claim of `re`, for lone responses: the protocol's state machine has the executor claim
/// before it responds (the v1.0 appendix), and mess refuses a response to a pending thread.
macro_rules! claim {
    ($re:literal) => {
        concat!("MESS:\n  - status: {re: ", $re, ", code: claimed}\n")
    };
}

/// The requestor's answer is stored in the thread and recorded as `replied`; the thread
/// stays with its executor (whose next status moves it on).
fn answered(r: &Replay, re: &str, field: &str, value: &str) {
    let e = r.last_entry(re);
    assert_eq!((&e["action"], &e["by"]), (&"replied".into(), &AGENT.into()));
    let replies = r.payloads(re, "reply");
    assert_eq!(replies.last().unwrap()["answers"][field], value, "{re}");
    assert_eq!(r.status(re)["status"], "needs_input");
}

/// The requestor's confirmation is recorded (history note `confirmed`, or `confirmation
/// rejected: <reason>`) and shown (`confirmation: confirmed | rejected`), in the same words.
fn confirmed(r: &Replay, re: &str, word: &str) {
    let noted = word;
    let e = r.last_entry(re);
    assert_eq!(e["action"], "replied");
    let note = e["note"].as_str().unwrap();
    assert!(
        note == noted || note.starts_with(&format!("confirmation {noted}: ")),
        "{note}"
    );
    let s = r.status(re);
    assert_eq!(s["status"], "needs_confirmation", "{s:#}");
    assert_eq!(s["confirmation"], word, "{s:#}");
}

const CREATED: &str = "created";
const DISPATCHED: &str = "dispatched";

/// The per-fixture table: every file of `tests/fixtures/messages/valid/` has one entry.
const CASES: &[Case] = &[
    Case {
        config: UNION,
        fixture: "messe-af-00-multi-request.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // One thread per request, both waiting; the ack maps each client id to its ref.
            assert_eq!(r.acked.len(), 2);
            for id in ["my-task-1", "my-task-2"] {
                r.expect(id, "pending", "received", &[CREATED, DISPATCHED]);
            }
            assert_eq!(r.status("my-task-2")["ref"], r.r(1));
        },
    },
    Case {
        config: UNION,
        fixture: "messe-af-01-re-forms.yaml",
        executor: Some("teague-phone"),
        prelude: &[(
            AGENT,
            "MESS:\n  - request: {id: my-task-1, intent: check the fridge}\n  - request: {id: my-task-2, intent: water the plants}\n",
        )],
        replace: &[],
        check: |r| {
            // The client id and the ref name the same thread: it completed once (a `completed`
            // after `completed` changes nothing), and the other request is untouched.
            r.expect(
                "my-task-1",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            r.expect("my-task-2", "pending", "received", &[CREATED, DISPATCHED]);
        },
    },
    Case {
        config: UNION,
        fixture: "messe-af-02-thread-messages.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // Replayed in `received` order: request, teague-phone's claim, the reply.
            r.expect(
                r.r(0),
                "claimed",
                "executing",
                &[CREATED, DISPATCHED, "claimed", "replied"],
            );
            let msgs = r.thread(r.r(0));
            let last = msgs.last().unwrap();
            assert_eq!(last["from"], AGENT);
            assert_eq!(last["MESS"][0]["reply"]["answers"]["location"], "both");
        },
    },
    Case {
        config: UNION,
        fixture: "plan-01-skill-examples.yaml",
        executor: None,
        prelude: &[
            ("claude-agent", VACUUM),
            ("roomba", VACUUM_QUESTION),
            ("claude-agent", GARAGE),
            ("cleanup-bot", GARAGE_CONFIRM),
            ("claude-agent", GROCERIES),
            (
                "instacart-proxy",
                "MESS:\n  - suggestion:\n      id: sug:merge-grocery\n      type: merge\n      re: [get-onions, get-garlic]\n      proposed: {executor: instacart-proxy}\n      reason: same store\n",
            ),
        ],
        replace: &[],
        check: |r| {
            // The fabricator request goes to the one executor whose metadata has the variant.
            let print = r.r(4);
            assert_eq!(r.routed_to(print), "prusa-mk4");
            r.expect(print, "pending", "received", &[CREATED, DISPATCHED]);
            // `prep` waits for `shop`.
            let prep = r.status("prep");
            assert_eq!(prep["status"], "pending");
            r.expect("shop", "pending", "received", &[CREATED, DISPATCHED]);
            // The answer and the confirmation are recorded as replies; the accepted merge is
            // carried out: both client ids now name one thread, which its proposer holds, as
            // its proposal said.
            answered(r, "vacuum-kitchen", "location", "both");
            confirmed(r, "cleanup-garage", "confirmed");
            let merged = r.status("get-onions");
            assert_eq!(merged["status"], "claimed", "{merged}");
            assert_eq!(merged["executor"], "instacart-proxy", "{merged}");
            assert_eq!(r.status("get-garlic")["ref"], merged["ref"]);
            let e = r.last_entry("get-onions");
            assert_eq!(
                e["note"], "claimed by its accepted suggestion sug:merge-grocery",
                "{e}"
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-02.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // Each form opens a thread; the answer names the version of the message answered
            // (implied: the latest, 1.1.0).
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            r.expect(r.r(1), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.answers[0][0]["MESS"][0]["v"], "1.1.0");
            assert_eq!(r.answers[1][0]["MESS"][0]["v"], "1.0.0");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-05.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.status(r.r(0))["intent"], "what's in the fridge?");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-07.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.payloads(r.r(0), "request")[0]["precision"], "loose");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-08.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            let req = &r.payloads(r.r(0), "request")[0];
            assert_eq!(req["context"][1], "Kids ages 6 and 9, prefer pasta");
            assert_eq!(
                req["response_hint"][0]["text"],
                "list proteins, vegetables, starches"
            );
            assert_eq!(req["response_hint"][1], "image");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-09.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // Routed only to the executor holding both required capabilities.
            r.expect(
                "vacuum-kitchen",
                "pending",
                "received",
                &[CREATED, DISPATCHED],
            );
            assert_eq!(r.routed_to("vacuum-kitchen"), "roomba");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-10.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.routed_to(r.r(0)), "prusa-mk4");
            let req = &r.payloads(r.r(0), "request")[0];
            assert_eq!(req["context"][1]["file"]["name"], "clip body model");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-11.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // Three threads; the two that depend on another are not dispatched yet.
            assert_eq!(r.acked.len(), 3);
            r.expect("get-onions", "pending", "received", &[CREATED, DISPATCHED]);
            r.expect("deliver-onions", "pending", "received", &[CREATED]);
            r.expect("dice-onions", "pending", "received", &[CREATED]);
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-15.yaml",
        executor: None,
        prelude: &[(
            AGENT,
            include_str!("../fixtures/messages/valid/v1.0-11.yaml"),
        )],
        replace: &[],
        check: |r| {
            // v1.0 section 4.4: an executor claims early and waits for the dependency.
            r.expect(
                "dice-onions",
                "waiting",
                "executing",
                &[CREATED, "claimed", "waiting"],
            );
            let s = r.status("dice-onions");
            assert_eq!(s["executor"], "kitchen-robot");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-16.yaml",
        executor: None,
        prelude: &[(
            AGENT,
            "MESS:\n  - request: {id: outdoor-photo, intent: photo of the garden, requires: [outdoor-photo]}\n",
        )],
        replace: &[],
        check: |r| {
            r.expect(
                "outdoor-photo",
                "waiting",
                "executing",
                &[CREATED, DISPATCHED, "claimed", "waiting"],
            );
            let w = &r.payloads("outdoor-photo", "status")[0]["waiting_for"];
            assert_eq!(
                (&w["condition"], &w["eta"]),
                (&"daylight".into(), &"7h".into())
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-17.yaml",
        executor: None,
        prelude: &[(AGENT, VACUUM)],
        replace: &[],
        check: |r| {
            r.expect(
                "vacuum-kitchen",
                "needs_input",
                "executing",
                &[CREATED, DISPATCHED, "claimed", "needs_input"],
            );
            let q = &r.status("vacuum-kitchen")["needs_input"]["questions"][0];
            assert_eq!(q["field"], "location");
            assert_eq!(q["options"][2], "both");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-18.yaml",
        executor: None,
        prelude: &[(AGENT, GARAGE)],
        replace: &[],
        check: |r| {
            r.expect(
                "cleanup-garage",
                "needs_confirmation",
                "executing",
                &[CREATED, DISPATCHED, "claimed", "needs_confirmation"],
            );
            let c = &r.status("cleanup-garage")["needs_confirmation"];
            assert_eq!(c["action"], "dispose of 12 items marked as trash");
            assert_eq!(c["reversible"], false);
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-19.yaml",
        executor: None,
        prelude: &[(AGENT, PRINT)],
        replace: &[],
        check: |r| {
            r.expect(
                "print-clips",
                "in_progress",
                "executing",
                &[CREATED, DISPATCHED, "claimed", "in_progress"],
            );
            let st = &r.payloads("print-clips", "status")[0];
            assert_eq!(st["progress_pct"], 35);
            assert_eq!(st["partial"]["total_layers"], 300);
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-20.yaml",
        executor: None,
        prelude: &[
            (
                AGENT,
                "MESS:\n  - request: {id: garage-check, intent: check the garage, requires: [garage-access]}\n",
            ),
            // `failed` needs a claim first (README: declining or failing takes the claim).
            (
                "indoor-robot",
                "MESS:\n  - status: {re: garage-check, code: claimed}\n",
            ),
        ],
        replace: &[],
        check: |r| {
            r.expect(
                "garage-check",
                "failed",
                "canceled",
                &[CREATED, DISPATCHED, "claimed", "failed"],
            );
            let st = &r.payloads("garage-check", "status")[1];
            assert_eq!(st["reason"]["type"], "access_denied");
            assert_eq!(st["recoverable"], true);
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-21.yaml",
        executor: None,
        prelude: &[(AGENT, VACUUM)],
        replace: &[],
        check: |r| {
            r.expect(
                "vacuum-kitchen",
                "partial",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "partial"],
            );
            let st = &r.payloads("vacuum-kitchen", "status")[0];
            assert_eq!(st["remaining"][0], "rice under cabinet edge");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-23.yaml",
        executor: None,
        prelude: &[(AGENT, FRIDGE), ("teague-phone", claim!("fridge-check"))],
        replace: &[],
        check: |r| {
            // A response without a status completes the thread (README).
            r.expect(
                "fridge-check",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, "fridge-check");
            assert!(
                c[0].as_str()
                    .unwrap()
                    .starts_with("Proteins: chicken thighs")
            );
            // YAML reads `- Note: chicken expires tomorrow` as a mapping, and the exchange
            // keeps an entry type it does not know as it came (v1.0 section 8.5: handle
            // unknown fields gracefully).
            assert_eq!(c[1]["Note"], "chicken expires tomorrow");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-24.yaml",
        executor: None,
        prelude: &[(AGENT, FRIDGE), ("teague-phone", claim!("fridge-check"))],
        replace: &[],
        check: |r| {
            r.expect(
                "fridge-check",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, "fridge-check");
            assert_eq!(c[1]["structured"]["proteins"][0]["item"], "chicken thighs");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-25.yaml",
        executor: None,
        prelude: &[(AGENT, VACUUM), ("roomba", claim!("vacuum-kitchen"))],
        replace: &[],
        check: |r| {
            r.expect(
                "vacuum-kitchen",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            assert_eq!(
                response_content(r, "vacuum-kitchen")[0]["confirmation"],
                true
            );
            let resp = &r.payloads("vacuum-kitchen", "response")[0];
            assert_eq!(resp["notes"], "moved the mat to get underneath");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-26.yaml",
        executor: None,
        prelude: &[(AGENT, PRINT), ("prusa-mk4", claim!("print-clips"))],
        replace: &[],
        check: |r| {
            r.expect(
                "print-clips",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, "print-clips");
            assert_eq!(c[0]["confirmation"]["units"], 4);
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-28.yaml",
        executor: None,
        prelude: &[(AGENT, VACUUM), ("roomba", VACUUM_QUESTION)],
        replace: &[],
        check: |r| {
            answered(r, "vacuum-kitchen", "location", "both");
            answered(r, "vacuum-kitchen", "priority", "sink first");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-29.yaml",
        executor: None,
        prelude: &[(AGENT, GARAGE), ("cleanup-bot", GARAGE_CONFIRM)],
        replace: &[],
        check: |r| confirmed(r, "cleanup-garage", "confirmed"),
    },
    Case {
        config: UNION,
        fixture: "v1.0-30.yaml",
        executor: None,
        prelude: &[(AGENT, GARAGE), ("cleanup-bot", GARAGE_CONFIRM)],
        replace: &[],
        check: |r| {
            confirmed(r, "cleanup-garage", "rejected");
            assert_eq!(
                r.payloads("cleanup-garage", "reply")[0]["reason"],
                "let me review the items first"
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-31.yaml",
        executor: None,
        prelude: &[
            (AGENT, PRINT),
            (
                "prusa-mk4",
                "MESS:\n  - status: {re: print-clips, code: needs_confirmation, action: print 4 clips in PETG}\n",
            ),
        ],
        replace: &[],
        check: |r| {
            confirmed(r, "print-clips", "confirmed");
            let reply = &r.payloads("print-clips", "reply")[0];
            assert_eq!(
                reply["context"][1],
                "Actually print them in this orientation instead"
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-32.yaml",
        executor: None,
        prelude: &[(
            AGENT,
            "MESS:\n  - request: {id: some-task, intent: check the mail}\n",
        )],
        // The schema's placeholder names the request the prelude created.
        replace: &[("<reference>", "some-task")],
        check: |r| {
            r.expect(
                "some-task",
                "cancelled",
                "canceled",
                &[CREATED, DISPATCHED, "cancelled"],
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-38.yaml",
        executor: None,
        prelude: &[(AGENT, GROCERIES)],
        replace: &[],
        check: |r| {
            // The suggestion is stored in every thread it names, for the requestor to answer.
            for id in ["get-onions", "get-garlic"] {
                let sug = r.payloads(id, "suggestion");
                assert_eq!(sug[0]["id"], "sug:merge-grocery", "{id}");
                assert_eq!(r.status(id)["status"], "pending");
            }
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-42.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.routed_to(r.r(0)), "roomba");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-44.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // Answered as v1.0-45 shows: a response with the capabilities tagged `visual`.
            let answer = &r.answers[0][0]["MESS"][1]["response"];
            assert_eq!(answer["re"], "last");
            let caps = answer["content"][0]["structured"]["capabilities"]
                .as_array()
                .unwrap();
            let ids: Vec<&str> = caps.iter().map(|c| c["id"].as_str().unwrap()).collect();
            assert_eq!(ids, ["take-photo", "check-visual"]);
            let shown = documents(include_str!("../fixtures/messages/valid/v1.0-45.yaml"));
            let want = &shown[0]["MESS"][0]["response"]["content"][0]["structured"]["capabilities"];
            for (got, want) in caps.iter().zip(want.as_array().unwrap()) {
                assert_eq!(got["description"], want["description"]);
            }
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-47.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.status(r.r(0))["intent"], "<what you need>");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-48.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            let req = &r.payloads(r.r(0), "request")[0];
            assert_eq!(req["context"][2]["file"], "file://local/doc.pdf");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-49.yaml",
        executor: None,
        prelude: &[(AGENT, FRIDGE)],
        replace: &[],
        check: |r| {
            // The sender's open threads.
            let threads =
                &r.answers[1][0]["MESS"][1]["response"]["content"][0]["structured"]["threads"];
            let threads = threads.as_array().unwrap();
            assert_eq!(threads.len(), 1, "{threads:?}");
            assert_eq!(threads[0]["ref"], r.r(0));
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-50.yaml",
        executor: None,
        prelude: &[(AGENT, VACUUM), ("roomba", VACUUM_QUESTION)],
        // The reference block's placeholders, filled with the question the prelude asked.
        replace: &[
            ("<request>", "vacuum-kitchen"),
            ("<field>", "location"),
            ("<value>", "both"),
        ],
        check: |r| answered(r, "vacuum-kitchen", "location", "both"),
    },
    Case {
        config: UNION,
        fixture: "v1.0-51.yaml",
        executor: None,
        prelude: &[(AGENT, GARAGE), ("cleanup-bot", GARAGE_CONFIRM)],
        replace: &[("<request>", "cleanup-garage")],
        check: |r| confirmed(r, "cleanup-garage", "confirmed"),
    },
    Case {
        config: UNION,
        fixture: "v1.0-52.yaml",
        executor: None,
        prelude: &[(
            AGENT,
            "MESS:\n  - request: {id: some-task, intent: check the mail}\n",
        )],
        replace: &[("<request>", "some-task")],
        check: |r| {
            r.expect(
                "some-task",
                "cancelled",
                "canceled",
                &[CREATED, DISPATCHED, "cancelled"],
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.0-53.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            // The appendix's conversation: the claimant answers, the agent builds on it, the
            // second executor asks for confirmation, gets it, and completes.
            r.expect(
                "dinner-check",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            assert_eq!(
                r.status("dinner-check")["executor"],
                "household:teague-phone"
            );
            r.expect(
                "start-rice",
                "completed",
                "finished",
                &[
                    CREATED,
                    DISPATCHED,
                    "claimed",
                    "needs_confirmation",
                    "replied",
                    "completed",
                ],
            );
            assert_eq!(
                r.status("start-rice")["executor"],
                "household:kitchen-helper"
            );
            let req = &r.payloads("start-rice", "request")[0];
            assert_eq!(req["context"][0]["ref"], "dinner-check");
            let c = response_content(r, "start-rice");
            assert_eq!(c[1], "Rice cooker started, will be ready at 5:30pm");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-01-confirm-before-flow.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(
                "water-valve",
                "completed",
                "finished",
                &[
                    CREATED,
                    DISPATCHED,
                    "claimed",
                    "needs_confirmation",
                    "replied",
                    "completed",
                ],
            );
            assert_eq!(r.status("water-valve")["executor"], "home-assistant");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-02-claim-estimate.yaml",
        executor: None,
        prelude: &[(AGENT, GROCERY_PURCHASE)],
        replace: &[],
        check: |r| {
            r.expect(
                "grocery-run",
                "claimed",
                "executing",
                &[CREATED, DISPATCHED, "claimed"],
            );
            let s = r.status("grocery-run");
            assert_eq!(
                (&s["executor"], &s["estimate"]),
                (&"instacart-proxy".into(), &"PT45M".into())
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-03-location-response.yaml",
        executor: None,
        prelude: &[(AGENT, LOCAL_ERRAND), ("teague-phone", claim!("errand"))],
        replace: &[],
        check: |r| {
            // `re: last` is the thread last offered to the sender.
            r.expect(
                "errand",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, "errand");
            assert_eq!(c[0]["location"]["lat"], 37.9234);
            assert_eq!(c[0]["location"]["name"], "Safeway");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-04-multiple-hints.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(
                r.r(0),
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, r.r(0));
            assert_eq!(c[1]["location"]["name"], "Backyard");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-06-consequential.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
            assert_eq!(r.payloads(r.r(0), "request")[0]["confirm_before"], true);
            assert_eq!(r.answers[0][0]["MESS"][0]["v"], "1.1.0");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-07-location-flow.yaml",
        executor: None,
        prelude: &[],
        replace: &[],
        check: |r| {
            r.expect(
                r.r(0),
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, r.r(0));
            assert_eq!(c[0]["location"]["name"], "Kitchen counter");
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-08-claim-with-estimate.yaml",
        executor: None,
        prelude: &[(AGENT, GROCERY_ERRAND)],
        replace: &[],
        check: |r| {
            r.expect(
                "grocery-run",
                "claimed",
                "executing",
                &[CREATED, DISPATCHED, "claimed"],
            );
            let s = r.status("grocery-run");
            assert_eq!(
                (&s["executor"], &s["estimate"]),
                (&"teague-phone".into(), &"PT30M".into())
            );
            assert_eq!(
                r.last_entry("grocery-run")["note"],
                "Heading to Safeway now"
            );
        },
    },
    Case {
        config: UNION,
        fixture: "v1.1-09-location-examples.yaml",
        executor: None,
        prelude: &[(AGENT, LOCAL_ERRAND), ("teague-phone", claim!("errand"))],
        replace: &[],
        check: |r| {
            r.expect(
                "errand",
                "completed",
                "finished",
                &[CREATED, DISPATCHED, "claimed", "completed"],
            );
            let c = response_content(r, "errand");
            assert_eq!(c.len(), 5);
            assert_eq!(c[0]["location"]["accuracy"], 10);
            assert_eq!(c[3]["location"]["description"], "Leave at front door");
            assert_eq!(c[4]["confirmation"]["details"], "all three spots checked");
        },
    },
];

#[test]
fn every_example_file_has_a_case() {
    let dir = format!(
        "{}/tests/fixtures/messages/valid",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut named: Vec<String> = CASES
        .iter()
        .map(|c| c.fixture.to_owned())
        .chain(SPECIAL.iter().map(|s| (*s).to_owned()))
        .collect();
    named.sort();
    assert_eq!(files, named);
}

/// Fixtures replayed by their own tests below rather than by the table.
const SPECIAL: &[&str] = &[
    "v1.0-01.yaml",
    "v1.0-46.yaml",
    "v1.0-41.yaml",
    "v1.0-45.yaml",
    "v1.1-05-time-sensitive.yaml",
];

/// A fixture's text.
fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/messages/valid/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn the_message_structure_templates_are_refused_naming_their_placeholder_types() {
    // v1.0 blocks 1 and 46 show the structure with `<type>: <payload>`: not a payload type, so
    // there is nothing to act on, and the error lists what it found.
    let r = Replay::new(UNION);
    for name in ["v1.0-01.yaml", "v1.0-46.yaml"] {
        let err = r.refused(AGENT, &fixture(name));
        assert!(
            err.contains("MESS: nothing to act on (payloads: v, <type>"),
            "{name}: {err}"
        );
    }
    assert_eq!(
        r.home.ok(&["status", "--all", "--format", "json"]).trim(),
        "[]"
    );
}

#[test]
fn registrations_by_config_message_route_the_section_8_4_request() {
    // v1.0 blocks 41 and 42: the operator registers both executors, then the request that
    // requires vacuum-floor and home-kitchen-access goes to the Roomba, the only holder.
    let mut r = Replay::new("agent_id: claude-agent\n");
    let answer = r.send(AGENT, &fixture("v1.0-41.yaml"));
    let registered: Vec<&Value> = answer[0]["MESS"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|p| &p["response"]["content"][0]["structured"]["registered"])
        .collect();
    assert_eq!(registered, ["roomba-kitchen", "teague-phone"]);
    let saved = std::fs::read_to_string(r.home.path().join("executors/teague-phone.yaml")).unwrap();
    assert!(saved.contains("schedule: 0 8-22 * * *"), "{saved}");
    assert!(saved.contains("registered_with: operator"), "{saved}");
    r.send(AGENT, &fixture("v1.0-42.yaml"));
    r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
    assert_eq!(r.routed_to(r.r(0)), "roomba-kitchen");
}

#[test]
fn a_needed_by_in_the_past_is_refused_and_one_ahead_is_kept() {
    // v1.1 section 6.1's deadline (2026-02-08) has passed: README "What the exchange
    // enforces": "A request whose needed_by has already passed is refused."
    let mut r = Replay::new(UNION);
    let text = fixture("v1.1-05-time-sensitive.yaml");
    let err = r.refused(AGENT, &text);
    assert!(
        err.contains("MESS[1].request.needed_by: 2026-02-08T23:00:00-08:00 has already passed"),
        "{err}"
    );
    // The same example a year after now is accepted and keeps its deadline.
    let ahead = text.replace("2026-02-08", &format!("{}-02-08", this_year() + 1));
    r.send(AGENT, &ahead);
    r.expect(r.r(0), "pending", "received", &[CREATED, DISPATCHED]);
    let req = &r.payloads(r.r(0), "request")[0];
    assert!(
        req["needed_by"]
            .as_str()
            .unwrap()
            .ends_with("-02-08T23:00:00-08:00")
    );
}

/// The current year, from the exchange's own refs (`YYYY-MM-DD-NNN`).
fn this_year() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // 365.2425 days a year from 1970 is exact enough to name the year away from New Year.
    1970 + (secs / 31_556_952) as u32
}

#[test]
fn the_example_files_replay_with_their_documented_effects() {
    let failed: Vec<String> = CASES
        .iter()
        .filter_map(|case| {
            std::panic::catch_unwind(|| {
                replay(case);
            })
            .err()
            .map(|_| case.fixture.to_owned())
        })
        .collect();
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// `value` with every `v:` payload left out and `from` refs rewritten to `to`.
fn normalized(value: &Value, from: &str, to: &str) -> Value {
    let text = serde_json::to_string(value).unwrap().replace(from, to);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    if let Some(list) = v["MESS"].as_array_mut() {
        list.retain(|p| p.get("v").is_none());
    }
    v
}

/// Builds the thread of a MESSE-AF example file through the exchange, sending each of its
/// message documents as its `from` (the exchange's own ack is the exchange's answer), and
/// compares the result with the file: the envelope's fields and history (actions and who),
/// and every message's sender and payloads, modulo refs, timestamps and the channel (these
/// are sent with the CLI). mess always writes its ack into the thread, and records its routing decision as a `dispatched` entry even
/// where the example shows none (the needs-input thread).
fn rebuild(file: &str, config: &str) {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/threads/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let want = documents(&text);
    let example_ref = want[0]["ref"].as_str().unwrap().to_owned();
    let mut r = Replay::new(config);
    for doc in &want[1..] {
        let from = doc["from"].as_str().unwrap();
        if from == "exchange" {
            continue;
        }
        let mut yaml = serde_yaml::to_string(&doc["MESS"]).unwrap();
        yaml = format!("MESS:\n{}", indent(&yaml));
        let yaml = match r.acked.first() {
            Some(real) => yaml.replace(&example_ref, real),
            None => yaml,
        };
        r.send(from, &yaml);
    }
    let real = r.r(0).to_owned();
    let got = r.thread(&real);
    let env = &got[0];
    for key in ["requestor", "executor", "status", "intent", "priority"] {
        assert_eq!(env[key], want[0][key], "{file}: envelope {key}");
    }
    assert_eq!(env["ref"], real);
    let who = |h: &Value| {
        h["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["action"].clone(), e["by"].clone()))
            .collect::<Vec<_>>()
    };
    let mut expected = who(&want[0]);
    if !expected.iter().any(|(a, _)| a == "dispatched") {
        expected.insert(1, ("dispatched".into(), "exchange".into()));
    }
    assert_eq!(who(env), expected, "{file}: history");
    // mess writes its ack into every thread, as the complete example shows; the needs-input
    // example leaves it out.
    let mut got = got;
    if !want.iter().any(|d| d["from"] == "exchange") {
        assert_eq!(got[2]["from"], "exchange");
        assert_eq!(got[2]["MESS"][0]["ack"]["ref"], real);
        got.remove(2);
    }
    assert_eq!(got.len(), want.len(), "{file}: message documents");
    for (g, w) in got[1..].iter().zip(&want[1..]) {
        assert_eq!(g["from"], w["from"], "{file}");
        let w = normalized(w, &example_ref, &real);
        let g = normalized(g, "", "");
        assert_eq!(g["MESS"], w["MESS"], "{file}: message from {}", g["from"]);
    }
}

fn indent(yaml: &str) -> String {
    yaml.lines().map(|l| format!("  {l}\n")).collect()
}

#[test]
fn the_messe_af_complete_thread_is_what_the_exchange_writes() {
    rebuild(
        "complete-example.messe-af.yaml",
        "agent_id: claude-agent\nexecutors:\n  teague-phone:\n    capabilities: [take-photo]\n",
    );
}

#[test]
fn the_messe_af_needs_input_thread_is_what_the_exchange_writes() {
    rebuild(
        "needs-input-example.messe-af.yaml",
        "agent_id: claude-agent\nexecutors:\n  roomba-kitchen:\n    capabilities: [vacuum-floor]\n",
    );
}

#[test]
fn the_plan_s_phase_1_test_flow_runs_through_mcp() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    use crate::support::recorder::Recorder;

    // The reference design's Phase 1 config (agent_id, an executor notified on Slack), with Slack's
    // API at a local recorder.
    let slack = Recorder::start();
    let home = Home::with_config(&format!(
        "agent_id: claude-agent
dispatch:
  public_url: https://mess.example
  slack: {{bot_token: xoxb-test-token, base_url: {}/slack}}
executors:
  teague-phone:
    capabilities: [visual_sensor, judgment]
    notify:
      slack: U04XXXXXX
",
        slack.url
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mess"));
        cmd.arg("mcp")
            .env("MESS_HOME", home.path())
            .env_remove("MESS_AGENT_ID");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let call = |name: &'static str, a: Value| {
            let params =
                CallToolRequestParams::new(name).with_arguments(a.as_object().cloned().unwrap());
            let client = &client;
            async move {
                let r = client.call_tool(params).await.unwrap();
                assert_ne!(r.is_error, Some(true), "{name}: {:?}", r.content);
                r.structured_content.unwrap()
            }
        };
        // 1. Claude calls mess() with request YAML.
        let ack = call(
            "mess",
            serde_json::json!({"message": "MESS:\n  - request:\n      intent: is the garage door closed?\n      requires: [visual_sensor]\n"}),
        )
        .await;
        let r = ack["MESS"][1]["ack"]["ref"].as_str().unwrap().to_owned();
        // 2. The MESSE-AF file is created in state=received/.
        let file = home
            .path()
            .join("state=received")
            .join(format!("{r}.messe-af.yaml"));
        assert!(file.is_file(), "{}", file.display());
        // 3. The router selects the executor from the config.
        let thread = documents(&std::fs::read_to_string(&file).unwrap());
        let dispatched = thread[0]["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["action"] == "dispatched")
            .unwrap()
            .clone();
        assert!(
            dispatched["note"]
                .as_str()
                .unwrap()
                .starts_with("routed to teague-phone"),
            "{dispatched}"
        );
        // 4. A Slack notification is sent with a JWT link (by this MCP session, the home's
        //    only long-lived process).
        let hits = slack.wait_for(std::time::Duration::from_secs(20), |h| {
            h.iter().any(|h| h.path.ends_with("/slack/chat.postMessage"))
        });
        let post = hits
            .iter()
            .find(|h| h.path.ends_with("/slack/chat.postMessage"))
            .unwrap();
        let body: Value = serde_json::from_str(&post.body).unwrap();
        assert_eq!(body["channel"], "U04XXXXXX");
        let url = body["blocks"][2]["elements"][0]["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("https://mess.example/respond?ref={r}&token=")),
            "{url}"
        );
        let token = url.split("token=").nth(1).unwrap();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        // 5. mess_status() returns the thread from state=received/.
        let status = call("mess_status", serde_json::json!({"re": r})).await;
        let text = serde_json::to_string(&status).unwrap();
        assert!(text.contains(&r) && text.contains("\"pending\""), "{text}");
        assert!(text.contains("received"), "{text}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn the_mail_format_s_example_message_is_read_claimed_and_archived_as_its_shell_steps_do() {
    // the agent mail format's message, written as another tool would write it, named as its
    // filename examples are; the shell steps of "Processing Messages" done with mess.
    let home = Home::with_config("");
    let dir = home.path().join(".mail/orchestrator");
    std::fs::create_dir_all(&dir).unwrap();
    let name = "20260128T153000Z_worker-bug-069_status.md";
    std::fs::write(
        dir.join(name),
        "---\nfrom: worker-bug-069\nto: orchestrator\ntype: status\ntimestamp: 2026-01-28T15:30:00Z\nneeds_response: false\npriority: normal\ntags: [BUG-069, fugue]\n---\n\n## Status Update\n\nBUG-069 investigation complete. Root cause identified:\n- Messages delivered to wrong session due to attached_session fallback\n- Fix implemented: made worker_id optional in poll_messages\n\nReady for review and merge.\n",
    )
    .unwrap();
    let me = |args: &[&str]| {
        let mut all = vec!["--as", "orchestrator", "mail"];
        all.extend_from_slice(args);
        home.ok(&all)
    };
    // ls .mail/orchestrator/*.md
    assert!(me(&["list"]).contains(name));
    // cat: the frontmatter and the Markdown body.
    let read = me(&["read", name]);
    assert!(
        read.contains("worker-bug-069") && read.contains("BUG-069"),
        "{read}"
    );
    assert!(read.contains("## Status Update"), "{read}");
    // mv to read/: the claim.
    me(&["mark-read", name]);
    assert!(dir.join("read").join(name).is_file());
    assert!(!dir.join(name).exists());
    assert!(!me(&["list"]).contains(name));
    // The SQL view reads the same frontmatter.
    let rows = home.ok(&[
        "query",
        "SELECT folder, \"from\", type FROM mail",
        "--format",
        "csv",
    ]);
    assert!(rows.contains("read,worker-bug-069,status"), "{rows}");
    // mv read/*.md archive/
    me(&["archive", name]);
    assert!(dir.join("archive").join(name).is_file());
    // The example's timestamp is more than 90 days old: README "Agent mail": "Archive is kept
    // 90 days from each message's timestamp, then deleted", so listing the archive drops it.
    assert!(!me(&["list", "--folder", "archive"]).contains(name));
    assert!(!dir.join("archive").join(name).exists());
}
