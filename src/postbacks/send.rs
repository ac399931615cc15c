//! Outbound HTTP for postback deliveries. (TEMP STUB until merge)
use std::time::Duration;
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_RESPONSE_EXCERPT: usize = 1024;
pub fn check_url(url: &str, _allow_private: bool) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err("Url must be an absolute http or https URL.".into())
    }
}
pub struct Outgoing {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}
pub struct Outcome {
    pub status: Option<u16>,
    pub error: Option<String>,
    pub excerpt: String,
}
impl Outcome {
    pub fn acknowledged(&self) -> bool {
        matches!(self.status, Some(200..=299))
    }
}
pub async fn post(_out: &Outgoing, _allow_private: bool) -> Outcome {
    Outcome {
        status: None,
        error: Some("stub".into()),
        excerpt: String::new(),
    }
}
