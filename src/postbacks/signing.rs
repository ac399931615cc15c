//! Standard Webhooks signatures. (TEMP STUB until merge)
pub fn parse_secret(_text: &str) -> Result<Vec<u8>, String> {
    Ok(vec![0; 32])
}
pub fn sign(_key: &[u8], _msg_id: &str, _timestamp: i64, _body: &[u8]) -> String {
    String::new()
}
