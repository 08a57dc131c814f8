//! Buttons in a notification: what a person may do from the message itself (claim the work,
//! approve, deny) without opening the page. A button carries its verb and a short code; the
//! code is the exchange's (a short link to the executor's presigned link token), so pressing
//! it acts as that executor on that thread with exactly what the link allows, and a button
//! copied elsewhere is worth no more than the link. The data fits every platform's limit
//! (Telegram's callback data is 64 bytes, Discord's custom id 100).

use crate::notice::Asks;

/// What a button does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Take the work (`status: claimed`; one slot of a request with several answers).
    Claim,
    /// Approve (a response with `confirmation: {confirmed: true}`).
    Approve,
    /// Deny (a response with `confirmation: {confirmed: false}`).
    Deny,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 3] = [Verb::Claim, Verb::Approve, Verb::Deny];

    /// The verb's name, in button data and in `/r/{code}/{verb}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Claim => "claim",
            Verb::Approve => "approve",
            Verb::Deny => "deny",
        }
    }

    /// The words on the button.
    pub fn label(self) -> &'static str {
        match self {
            Verb::Claim => "Claim",
            Verb::Approve => "Approve",
            Verb::Deny => "Deny",
        }
    }

    /// Parses a name of [`Verb::as_str`].
    pub fn parse(name: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// What a request that asks `asks` offers: an approval is approved or denied, anything else
    /// is claimed (and then answered on the page).
    pub fn offered(asks: Asks) -> Vec<Verb> {
        match asks {
            Asks::Approval(_) => vec![Verb::Approve, Verb::Deny],
            _ => vec![Verb::Claim],
        }
    }
}

/// The length of a code: the exchange's short-link codes (letters and digits).
pub const CODE_LEN: usize = 12;

/// The buttons one notice carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buttons {
    /// The short code that stands for the executor's link.
    pub code: String,
    /// What the buttons do, in order.
    pub verbs: Vec<Verb>,
    /// Where a tap acts without a platform in between (ntfy's http action, email's links):
    /// `{public_url}/r/{code}`, to which `/{verb}` is added.
    pub act_url: String,
}

impl Buttons {
    /// The data a platform posts back when `verb` is pressed: `verb:code` (at most 20 bytes).
    pub fn data(&self, verb: Verb) -> String {
        format!("{}:{}", verb.as_str(), self.code)
    }

    /// The address that acts for `verb` (a GET shows a confirmation page, a POST acts).
    pub fn url(&self, verb: Verb) -> String {
        format!("{}/{}", self.act_url, verb.as_str())
    }
}

/// Reads button data (`verb:code`) as a platform posts it back; `None` for anything else, so
/// no other text reaches a lookup.
pub fn parse_data(data: &str) -> Option<(Verb, &str)> {
    let (verb, code) = data.split_once(':')?;
    let verb = Verb::parse(verb)?;
    is_code(code).then_some((verb, code))
}

/// Whether `code` has the form of a code (checked before it is looked up).
pub fn is_code(code: &str) -> bool {
    code.len() == CODE_LEN && code.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// What a reply in a chat without buttons (Matrix) asks: its first word is a verb (`claim`,
/// `approve`, `deny`, also `yes`/`no`), and what follows a denial is its reason.
pub fn parse_reply(text: &str) -> Option<(Verb, Option<String>)> {
    let text = text.trim();
    let (word, rest) = text
        .split_once(char::is_whitespace)
        .map_or((text, ""), |(w, r)| (w, r.trim()));
    let word = word
        .trim_end_matches(|c: char| c.is_ascii_punctuation())
        .to_ascii_lowercase();
    let verb = match word.as_str() {
        "claim" | "take" | "mine" => Verb::Claim,
        "approve" | "approved" | "yes" => Verb::Approve,
        "deny" | "denied" | "no" | "reject" => Verb::Deny,
        _ => return None,
    };
    let reason = (verb == Verb::Deny && !rest.is_empty()).then(|| rest.to_owned());
    Some((verb, reason))
}

/// What a reaction means (Matrix): a thumbs up takes the first thing offered (claim or
/// approve), a thumbs down denies.
pub fn reaction_verb(key: &str, offered: &[Verb]) -> Option<Verb> {
    let key = key.trim_end_matches('\u{fe0f}');
    if key.starts_with('👍') || key == "✅" {
        offered.first().copied()
    } else if key.starts_with('👎') || key == "❌" {
        offered.contains(&Verb::Deny).then_some(Verb::Deny)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_data_round_trips_and_nothing_else_is_read_as_data() {
        let b = Buttons {
            code: "AbCdEfGh1234".to_owned(),
            verbs: Verb::offered(Asks::Approval(2)),
            act_url: "https://x/r/AbCdEfGh1234".to_owned(),
        };
        assert_eq!(b.verbs, [Verb::Approve, Verb::Deny]);
        for v in Verb::ALL {
            let data = b.data(v);
            assert!(data.len() <= 64, "{data}");
            assert_eq!(parse_data(&data), Some((v, "AbCdEfGh1234")));
        }
        assert_eq!(b.url(Verb::Deny), "https://x/r/AbCdEfGh1234/deny");
        for bad in [
            "claim:short",
            "claim:../../etc/pas",
            "steal:AbCdEfGh1234",
            "AbCdEfGh1234",
            "claim:AbCdEfGh12345",
        ] {
            assert_eq!(parse_data(bad), None, "{bad}");
        }
        assert_eq!(Verb::offered(Asks::One), [Verb::Claim]);
        assert_eq!(Verb::offered(Asks::Answers(3)), [Verb::Claim]);
    }

    #[test]
    fn replies_and_reactions_name_a_verb_and_a_denial_keeps_its_reason() {
        assert_eq!(parse_reply("Claim"), Some((Verb::Claim, None)));
        assert_eq!(parse_reply(" approve. "), Some((Verb::Approve, None)));
        assert_eq!(
            parse_reply("deny too expensive this week"),
            Some((Verb::Deny, Some("too expensive this week".to_owned())))
        );
        assert_eq!(parse_reply("what is this?"), None);
        let offered = [Verb::Approve, Verb::Deny];
        assert_eq!(reaction_verb("👍", &offered), Some(Verb::Approve));
        assert_eq!(reaction_verb("👎️", &offered), Some(Verb::Deny));
        assert_eq!(reaction_verb("👎", &[Verb::Claim]), None);
        assert_eq!(reaction_verb("🎉", &offered), None);
    }
}
