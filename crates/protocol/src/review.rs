//! The v2 `review` payload (the reference design's roadmap, fixed by mess): the requestor
//! rates a finished request's work (`rating`: 1 to 5, `accept` or `reject`), says why
//! (`feedback`) and may ask for the work again (`request_redo`).

use crate::error::ProtocolError;
use crate::field::{self, Fields, Result};
use crate::ids::Re;
use crate::value::{Map, Value};

/// `review`: the requestor's verdict on a finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    /// The thread reviewed.
    pub re: Re,
    /// The rating, if given.
    pub rating: Option<Rating>,
    /// What was wrong or right.
    pub feedback: Option<String>,
    /// Ask the same executor to do the work again.
    pub request_redo: Option<bool>,
    /// Fields this version does not know, kept unchanged.
    pub extra: Map,
}

/// `rating: 1-5 | accept | reject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rating {
    /// One to five stars.
    Stars(u8),
    /// The work is accepted as done.
    Accept,
    /// The work is rejected.
    Reject,
}

impl Rating {
    /// Reads `1`..`5`, `accept` or `reject`.
    pub fn read(v: &Value, path: &str) -> Result<Rating> {
        let bad = || {
            ProtocolError::invalid(
                path,
                format!(
                    "{} is not a rating (1 to 5, accept or reject)",
                    field::describe(v)
                ),
            )
        };
        match v {
            Value::Int(n) if (1..=5).contains(n) => Ok(Rating::Stars(*n as u8)),
            Value::String(s) => match s.trim() {
                "accept" => Ok(Rating::Accept),
                "reject" => Ok(Rating::Reject),
                digits => match digits.parse::<u8>() {
                    Ok(n) if (1..=5).contains(&n) => Ok(Rating::Stars(n)),
                    _ => Err(bad()),
                },
            },
            _ => Err(bad()),
        }
    }

    /// The rating as written in a message.
    pub fn to_value(self) -> Value {
        match self {
            Rating::Stars(n) => Value::Int(i64::from(n)),
            Rating::Accept => Value::str("accept"),
            Rating::Reject => Value::str("reject"),
        }
    }

    /// The rating as text (`4`, `accept`).
    pub fn text(self) -> String {
        match self {
            Rating::Stars(n) => n.to_string(),
            Rating::Accept => "accept".to_owned(),
            Rating::Reject => "reject".to_owned(),
        }
    }
}

impl Review {
    /// Reads a review payload; `path` is where it sits (`MESS[0].review`).
    pub(crate) fn from_value(v: Value, path: &str) -> Result<Self> {
        let mut f = Fields::new(v, path, "a review")?;
        let re = Re::read(&mut f, true)?.unwrap_or(Re::One(String::new()));
        let rating = match f.take("rating") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Rating::read(&v, &f.at("rating"))?),
        };
        let review = Review {
            re,
            rating,
            feedback: f.opt_str("feedback")?,
            request_redo: f.opt_bool("request_redo")?,
            extra: Map::new(),
        };
        let extra = f.rest();
        if review.rating.is_none()
            && review
                .feedback
                .as_deref()
                .is_none_or(|t| t.trim().is_empty())
            && review.request_redo != Some(true)
        {
            return Err(ProtocolError::invalid(
                path,
                "a review says something: a rating (1 to 5, accept or reject), feedback, or request_redo: true",
            ));
        }
        Ok(Review { extra, ..review })
    }

    /// Writes the review back.
    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("re", self.re.to_value());
        m.insert_opt("rating", self.rating.map(Rating::to_value));
        field::put_str(&mut m, "feedback", &self.feedback);
        field::put_bool(&mut m, "request_redo", self.request_redo);
        m.extend_missing(self.extra.clone());
        Value::Map(m)
    }
}
