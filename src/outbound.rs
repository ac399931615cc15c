//! Where the gateway's own outbound requests (postbacks) may go. Decided
//! once from the flags (`config`) and handed down (the application state,
//! the postback worker, the context of every operation), never a global.
//! A core type: the engine's context carries it without knowing postbacks.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Loopback and private targets are allowed (tests, private networks).
    pub allow_private: bool,
}
