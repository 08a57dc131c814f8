//! The door of `mess import`: what a home brings besides its threads (API key records and the
//! registrations and routing rules `config` messages made) is checked as the exchange checks
//! them when they come from a key holder, before anything is written. A foreign home is
//! trusted no more than a key holder; the ledger is replayed under its own rules by the store,
//! in the import's one transaction.

use crate::exchange::auth::{Principal, Role};
use crate::exchange::sweep::Upkeep;
use crate::exchange::{Sender, view};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::value::{Map, Value};
use crate::store::Store;

impl Upkeep<'_> {
    /// Every record of the home `source` that this exchange would refuse from a key holder,
    /// each as `where: why`: key records (the role, the id's shape, reserved names, the hash,
    /// an agent's callback against the allow-list, as `mess token` checks them), registrations
    /// (as a `config` message from whoever made them: a key holder's, or the operator's when
    /// the record says so) and routing rules. Empty when all of it may go in.
    pub fn check_import(&self, source: &Store) -> Vec<String> {
        let mut refused = Vec::new();
        match source.key_records() {
            Ok(records) => {
                for record in records {
                    if let Err(why) = self.check_key_record(&record) {
                        refused.push(format!("key record of {:?}: {why}", record.principal));
                    }
                }
            }
            Err(e) => refused.push(format!("key records: {e}")),
        }
        let directory = self.ex.directory();
        let (files, errors) = source.registry();
        refused.extend(errors.iter().map(|e| format!("registry: {e}")));
        for (path, registration) in &files.registrations {
            let name = path
                .file_name()
                .map(|n| format!("executors/{}", n.to_string_lossy()))
                .unwrap_or_default();
            let Some(fields) = registration.as_map() else {
                refused.push(format!("{name}: not a mapping"));
                continue;
            };
            let text = |k: &str| fields.get(k).and_then(Value::scalar_text);
            let id = text("id").unwrap_or_default();
            if path
                .file_stem()
                .is_none_or(|stem| stem.to_string_lossy() != id)
            {
                refused.push(format!("{name}: names executor {id:?}, not the file's"));
                continue;
            }
            // As the `config` message that made it: the operator's only when it says so.
            let by = text("registered_by").unwrap_or_else(|| id.clone());
            let sender = if text("registered_with").as_deref() == Some("operator") {
                Sender::new(by, "import")
            } else {
                Sender::principal(
                    &Principal {
                        id: by,
                        role: Role::Executor,
                        callback: None,
                    },
                    "import",
                )
            };
            let mut executor = fields.clone();
            executor.remove("registered_by");
            executor.remove("registered_with");
            let mut body = Map::new();
            body.insert("executor", Value::Map(executor));
            if let Err(why) = self.check_config_record(body, &sender, &directory) {
                refused.push(format!("{name}: {why}"));
            }
        }
        if let Some(routing) = &files.routing {
            let mut body = Map::new();
            body.insert("routing", routing.clone());
            if let Err(why) = Message::single("config", body) {
                refused.push(format!("routing.yaml: {why}"));
            }
        }
        refused
    }

    /// Checks one key record as `mess token` checks what it stores.
    fn check_key_record(&self, record: &crate::store::keys::KeyRecord) -> Result<(), String> {
        // An operator key opens the operator's routes: one from another home is not trusted
        // here; the operator makes new ones where they run the exchange.
        if record.role == crate::exchange::auth::OPERATOR_ROLE {
            return Err(
                "operator keys are not imported; make one here with `mess token operator ID`"
                    .to_owned(),
            );
        }
        let role = Role::parse(&record.role)
            .ok_or_else(|| format!("role {:?} is not agent or executor", record.role))?;
        let id = record.principal.as_str();
        if crate::store::ledger::reserved_account(id) {
            return Err(format!("{id:?} names an account of the shells ledger"));
        }
        if ThreadRef::parse(id).is_err() {
            return Err(format!(
                "{id:?} is not a usable {role} id (letters, digits, '.', '_', ':' and '-', starting with a letter or digit)"
            ));
        }
        let hash = record.hash.as_str();
        if hash.len() != 64
            || !hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err("the key's hash is not a SHA-256 in lowercase hex".to_owned());
        }
        if let Some(url) = &record.callback {
            if role != Role::Agent {
                return Err("only an agent key has a callback".to_owned());
            }
            self.ex
                .settings()
                .dispatch
                .webhook_allow
                .check(url)
                .map_err(|why| format!("callback: {why}"))?;
        }
        Ok(())
    }

    /// Checks a `config` body (`executor: ...`) as the exchange checks one `sender` sends.
    fn check_config_record(
        &self,
        body: Map,
        sender: &Sender,
        directory: &crate::exchange::directory::Directory,
    ) -> Result<(), String> {
        let message = Message::single("config", body).map_err(|e| e.to_string())?;
        let Some(Payload::Config(config)) = message.payloads.first() else {
            return Err("not a registration".to_owned());
        };
        view::check_config(self.ex, config, 0, sender, directory)
            .map_err(|e| e.to_string().replace("MESS[0].config.", ""))
    }
}
