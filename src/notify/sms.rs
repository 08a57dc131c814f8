//! SMS through Twilio's Messages API: the headline, the details and the link in one text.
//! A text cannot be changed once sent, so a taken notice is not sent as SMS.

use crate::notify::{Notice, NotifyError, Sent, TwilioSettings, endpoint, json_of};

/// The Messages API URL of account `sid`; the number goes in the form body.
pub(crate) fn url(base: &str, sid: &str) -> Result<reqwest::Url, String> {
    endpoint(base, &["2010-04-01", "Accounts", sid, "Messages.json"])
}

pub(crate) async fn send(
    http: &reqwest::Client,
    settings: &TwilioSettings,
    to: &str,
    notice: &Notice,
) -> Result<Sent, NotifyError> {
    let what = "sms";
    let (Some(sid), Some(token), Some(from)) =
        (&settings.account_sid, &settings.auth_token, &settings.from)
    else {
        return Err(NotifyError::not_configured(
            "dispatch.twilio (account_sid, auth_token and from)",
        ));
    };
    let url = url(&settings.base_url, sid).map_err(|e| NotifyError::endpoint(what, e))?;
    let response = http
        .post(url)
        .basic_auth(sid, Some(token.expose()))
        .form(&[
            ("To", to),
            ("From", from.as_str()),
            ("Body", &notice.plain_text()),
        ])
        .send()
        .await
        .map_err(|e| NotifyError::from_reqwest(what, &e))?;
    let answer = json_of(what, response).await?;
    Ok(Sent {
        provider_ref: answer["sid"].as_str().map(str::to_owned),
    })
}
