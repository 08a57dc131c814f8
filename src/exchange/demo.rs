//! `mess demo seed`: fills a home with realistic synthetic threads (for the notebooks and for
//! trying the SQL views): demo executors and capabilities, requests over the past days, and
//! lifecycles with plausible claim and completion times. Deterministic for a given seed.

use chrono::TimeDelta;

use crate::exchange::Exchange;
use crate::exchange::error::Error;
use crate::protocol::envelope::{EXCHANGE, Envelope, MessageDoc};
use crate::protocol::message::{Ack, Message, Payload};
use crate::protocol::time::Timestamp;
use crate::protocol::value::Map;
use crate::protocol::yaml::{self, Limits};
use crate::store::IndexKey;

/// The demo's executors (written to config.yaml when the home has none).
pub const DEMO_CONFIG: &str = "agent_id: claude-agent
executors:
  teague-phone:
    name: Teague's Phone
    capabilities: [take-photo, check-visual, local-errands]
  sam-phone:
    name: Sam's Phone
    capabilities: [take-photo, check-visual, local-errands, home-kitchen-access]
    availability: schedule
    schedule: \"0 7-21 * * *\"
  roomba-kitchen:
    name: Kitchen Roomba
    capabilities: [vacuum-floor, home-kitchen-access]
  instacart-proxy:
    name: Instacart
    capabilities: [purchasing, delivery]
  prusa-mk4:
    name: Prusa MK4
    capabilities: [3d-print-fdm]
routing:
  - match: { capability: vacuum-floor }
    prefer: [roomba-kitchen]
  - match: { capability: purchasing }
    prefer: [instacart-proxy]
  - default:
    prefer: [teague-phone]
";

/// The demo's capability catalog (written when the home has none).
pub const DEMO_CAPABILITIES: &str =
    "id: take-photo\ndescription: Capture and attach photos\ntags: [visual, attachments]
---
id: check-visual\ndescription: Look at something, read a display\ntags: [visual, inspection]
---
id: vacuum-floor\ndescription: Vacuum floors and carpets\ntags: [cleaning]
---
id: purchasing\ndescription: Buy things\ntags: [errands]
---
id: 3d-print-fdm\ndescription: Print a part in plastic\ntags: [fabrication]
";

/// Request templates: intent, required capabilities, who tends to do it.
const KINDS: &[(&str, &[&str], &[&str])] = &[
    (
        "what's in the fridge?",
        &["take-photo"],
        &["teague-phone", "sam-phone"],
    ),
    (
        "is the garage door closed?",
        &["check-visual"],
        &["teague-phone", "sam-phone"],
    ),
    ("vacuum the kitchen", &["vacuum-floor"], &["roomba-kitchen"]),
    (
        "buy yellow onions and garlic",
        &["purchasing"],
        &["instacart-proxy"],
    ),
    (
        "pick up the dry cleaning",
        &["local-errands"],
        &["teague-phone", "sam-phone"],
    ),
    ("print four cable clips", &["3d-print-fdm"], &["prusa-mk4"]),
    ("water the tomatoes", &[], &["teague-phone", "sam-phone"]),
    (
        "wipe the kitchen counter",
        &["home-kitchen-access"],
        &["sam-phone", "roomba-kitchen"],
    ),
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A skewed duration in seconds: mostly around `typical`, with a long tail.
    fn skewed(&mut self, typical: u64) -> i64 {
        let a = self.below(typical) + 1;
        let b = self.below(typical) + 1;
        let tail = if self.below(10) == 0 {
            self.below(typical * 6)
        } else {
            0
        };
        (a * b / typical.max(1) + a / 2 + tail) as i64
    }
}

/// What a seed run wrote.
#[derive(Debug, Default)]
pub struct SeedReport {
    /// Threads written.
    pub threads: usize,
    /// Whether config.yaml and capabilities.yaml were written (they are left alone if present).
    pub wrote_config: bool,
}

/// Writes `threads` synthetic threads created over the `days` days before now.
pub fn seed(
    ex: &Exchange,
    threads: usize,
    days: u32,
    seed: u64,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<SeedReport, Error> {
    let store = ex.store();
    store.init()?;
    let mut report = SeedReport {
        wrote_config: store.init_config(DEMO_CONFIG)?,
        ..SeedReport::default()
    };
    let catalog = store.layout().capabilities_file();
    if !catalog.exists() {
        std::fs::write(&catalog, DEMO_CAPABILITIES).map_err(|e| {
            crate::store::error::StoreError::Io {
                path: catalog.clone(),
                source: e,
            }
        })?;
    }
    let now = ex.now();
    let mut rng = Rng(seed | 1);
    let start = now - TimeDelta::days(i64::from(days.max(1)));
    let span = (now - start).num_seconds().max(1) as u64;
    let mut created: Vec<Timestamp> = (0..threads)
        .map(|_| start + TimeDelta::seconds(rng.below(span) as i64))
        .collect();
    created.sort();
    for (i, at) in created.iter().enumerate() {
        progress(i, threads);
        let (intent, requires, doers) = KINDS[rng.below(KINDS.len() as u64) as usize];
        let doer = doers[rng.below(doers.len() as u64) as usize];
        let thread = store.allocate_refs(at.date_naive(), 1)?.remove(0);
        let docs = lifecycle(
            &mut rng,
            &thread.to_string(),
            intent,
            requires,
            doer,
            *at,
            now,
        )?;
        let Payload::Request(request) = &docs[0].message.payloads[0] else {
            continue;
        };
        let mut env = Envelope::create(thread.clone(), request, &docs[0], Vec::new());
        env.record(
            "dispatched",
            *at,
            EXCHANGE,
            Some(format!("routed to {doer}: demo")),
        );
        for d in &docs[1..] {
            env.apply(d);
        }
        store.remember("claude-agent", &[(IndexKey::Last, &thread)])?;
        store.create(&env, &docs)?;
        report.threads += 1;
    }
    progress(threads, threads);
    Ok(report)
}

/// The message documents of one synthetic thread.
fn lifecycle(
    rng: &mut Rng,
    thread: &str,
    intent: &str,
    requires: &[&str],
    doer: &str,
    at: Timestamp,
    now: Timestamp,
) -> Result<Vec<MessageDoc>, Error> {
    let doc = |from: &str, when: Timestamp, yaml: &str| -> Result<MessageDoc, Error> {
        let value = yaml::parse_document(yaml, &Limits::DEFAULT)
            .map_err(crate::protocol::error::ProtocolError::from)?;
        Ok(MessageDoc {
            from: from.to_owned(),
            received: when,
            channel: Some(
                if from == "claude-agent" {
                    "mcp"
                } else {
                    "http"
                }
                .to_owned(),
            ),
            message: Message::from_value(value)?,
            extra: Map::new(),
        })
    };
    let requires_yaml = if requires.is_empty() {
        String::new()
    } else {
        format!("\n      requires: [{}]", requires.join(", "))
    };
    let mut docs = vec![doc(
        "claude-agent",
        at,
        &format!("MESS:\n  - request:\n      intent: \"{intent}\"{requires_yaml}\n"),
    )?];
    let mut ack = doc(EXCHANGE, at, "MESS:\n  - v: 1.1.0\n")?;
    ack.channel = None;
    ack.message = Message::new(vec![Payload::Ack(Ack {
        re: Some("last".into()),
        thread_ref: Some(thread.to_owned()),
        requests: Vec::new(),
        received_at: None,
        queue_position: None,
        extra: Map::new(),
    })]);
    docs.push(ack);
    let claim_at = at + TimeDelta::seconds(1 + rng.skewed(600));
    let roll = rng.below(100);
    // Young requests are more often still open; old ones have finished one way or another.
    let age_hours = (now - at).num_hours();
    if claim_at > now || (age_hours < 6 && roll < 60) || roll < 12 {
        return Ok(docs);
    }
    if roll < 15 {
        docs.push(doc(
            "claude-agent",
            claim_at,
            &format!("MESS:\n  - cancel:\n      re: {thread}\n      reason: not needed any more\n"),
        )?);
        return Ok(docs);
    }
    docs.push(doc(
        doer,
        claim_at,
        &format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: claimed\n      estimate: PT{}M\n",
            5 + rng.below(60)
        ),
    )?);
    let done_at = claim_at + TimeDelta::seconds(rng.skewed(2400));
    if done_at > now || roll < 22 {
        docs.push(doc(doer, claim_at + TimeDelta::seconds(30), &format!("MESS:\n  - status:\n      re: {thread}\n      code: in_progress\n      progress_pct: {}\n", rng.below(90)))?);
        return Ok(docs);
    }
    let last = match roll {
        22..=27 => format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: failed\n      reason: could not get to it\n"
        ),
        28..=30 => format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: declined\n      reason: busy\n"
        ),
        _ => format!(
            "MESS:\n  - status:\n      re: {thread}\n      code: completed\n  - response:\n      re: {thread}\n      content:\n        - done ({intent})\n"
        ),
    };
    docs.push(doc(doer, done_at, &last)?);
    // Most completed work is reviewed a little later; each executor has its own typical
    // rating. Drawn from a hash of the thread, not `rng`, so the rest of the demo stays as it
    // was for a given seed.
    let h = fnv(&format!("{thread}/{doer}"));
    let review_at = done_at + TimeDelta::minutes(5 + (h % 55) as i64);
    if roll > 30 && h % 10 >= 3 && review_at <= now {
        let typical = 3 + fnv(doer) % 3;
        let stars = (typical + (h / 10) % 3).saturating_sub(1).clamp(1, 5);
        let feedback = match stars {
            1 | 2 => "\n      feedback: not what I asked for",
            5 => "\n      feedback: spot on",
            _ => "",
        };
        docs.push(doc(
            "claude-agent",
            review_at,
            &format!("MESS:\n  - review:\n      re: {thread}\n      rating: {stars}{feedback}\n"),
        )?);
    }
    Ok(docs)
}

/// FNV-1a of `text`: a stable spread of small choices that must not draw from the seed's
/// sequence.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
