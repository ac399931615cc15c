//! What the node holding a device does with a request (the router's
//! [`Runner`]): ask the device for a card, terms or a signature, and turn
//! what the cardholder did into records. The payment itself goes through
//! the payments core like every other payment; the card travels no
//! further than this node.

use super::prompts::{self, PromptAnswer};
use super::protocol::{CardRead, Cvm, DeviceJob, FromDevice, ToDevice};
use super::requests::parse_payment;
use super::router::{DeviceEvent, DeviceSession, Outcome, Requester, Runner, Work};
use super::timeouts;
use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::{Sql, Store};
use crate::engine::events::EventSink;
use crate::engine::record::Record;
use crate::engine::validate::{for_create, CreateInput};
use crate::engine::{self, Cx};
use crate::error::{ApiError, ApiResult};
use crate::payments::actions::Action;
use crate::payments::{Idempotency, NewPayment, Origin, Payments, TerminalRead};
use crate::processor::{EntryMode, StatusId};
use crate::resources::{ACCOUNT_VAULT, DEVICE_TERM, SIGNATURE};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;
use std::time::Duration;

/// The longest a holder waits on a device in one read; the router's own
/// limit (the origin's deadline and a margin) ends a request before it.
const LONG_WAIT: Duration = Duration::from_secs(3600);
/// Added to the device's own signature time-outs before the holder stops
/// waiting for a signature.
const SIGNATURE_SLACK: Duration = Duration::from_secs(5);

/// The holder's runner: the domains a device's requests reach.
#[derive(Clone)]
pub struct Jobs {
    pub store: Store,
    pub payments: Payments,
    pub clock: Clock,
    pub keyring: Arc<Keyring>,
    pub sink: Arc<dyn EventSink>,
    pub public_url: Arc<str>,
}

/// What the holder needs to know of the terminal.
struct Terminal {
    serial_number: Option<String>,
    signature_capture: bool,
    timeouts: Option<String>,
}

impl Runner for Jobs {
    fn run(
        &self,
        session: DeviceSession,
        work: Work,
        requester: Requester,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>> {
        let this = self.clone();
        Box::pin(async move {
            let terminal = match this.terminal(&session.terminal_id).await {
                Ok(Some(t)) => t,
                Ok(None) => return Outcome::Offline,
                Err(e) => return refused(e),
            };
            match work {
                Work::Payment { body, idempotency } => {
                    this.payment(session, &terminal, body, idempotency, requester)
                        .await
                }
                Work::Store { body } => this.store_card(session, &terminal, body, requester).await,
                Work::Terms { body } => this.terms(session, &terminal, body, requester).await,
            }
        })
    }
}

/// The answer for a refusal made once the card was read.
fn refused(error: ApiError) -> Outcome {
    if let ApiError::Internal(internal) = &error {
        tracing::error!(error = %internal, origin = %internal.location(), "router: a terminal request failed");
    }
    Outcome::Refused {
        status: error.status().as_u16(),
        body: error.body(),
    }
}

/// Stops a request whose origin could not be told that it was committed
/// (it might answer "nothing was done"): nothing is done.
fn give_up(session: &DeviceSession) -> Outcome {
    session.send(ToDevice::Cancel {
        request_id: session.request_id.clone(),
    });
    Outcome::Cancelled
}

/// Gives the device its work, with the terminal's time-outs as they are
/// now (read for each request, so a change reaches a connected device).
fn start(session: &DeviceSession, terminal: &Terminal, job: DeviceJob) {
    session.send(ToDevice::Start {
        request_id: session.request_id.clone(),
        job,
        timeouts: timeouts::all(terminal.timeouts.as_deref()),
    });
}

/// Waits for the card, or for the end of the request without one.
async fn card(session: &mut DeviceSession) -> Result<CardRead, Outcome> {
    loop {
        match session.next(LONG_WAIT).await {
            DeviceEvent::Device(FromDevice::Card { card, .. }) => return Ok(card),
            DeviceEvent::Device(FromDevice::Failed { reason, .. }) => return Err(Outcome::Failed { reason }),
            // Not what this request waits for: ignored.
            DeviceEvent::Device(_) => {}
            DeviceEvent::Cancel | DeviceEvent::Quiet => {
                session.send(ToDevice::Cancel {
                    request_id: session.request_id.clone(),
                });
                return Err(Outcome::Cancelled);
            }
            DeviceEvent::Disconnected => return Err(Outcome::Offline),
        }
    }
}

impl Jobs {
    async fn terminal(&self, id: &str) -> ApiResult<Option<Terminal>> {
        let id = id.to_string();
        self.store
            .read(move |conn| {
                Ok(conn
                    .query_one(&Sql::with(
                        "SELECT serial_number, sig_capture_enable, terminal_timeouts FROM terminals WHERE id = ?",
                        vec![id.into()],
                    ))?
                    .map(|r| Terminal {
                        serial_number: r[0].as_str().map(str::to_string),
                        signature_capture: r[1].as_int() == Some(1),
                        timeouts: r[2].as_str().map(str::to_string),
                    }))
            })
            .await
    }

    /// The requester's context at this moment of the location's time.
    async fn cx(&self, requester: &Requester) -> Cx {
        let id = requester.location_id.clone();
        let offset = self
            .store
            .read(move |conn| {
                Ok(conn
                    .query_one(&Sql::with(
                        "SELECT clock_offset_s FROM locations WHERE id = ?",
                        vec![id.into()],
                    ))?
                    .and_then(|r| r[0].as_int()))
            })
            .await
            .ok()
            .flatten()
            .unwrap_or(requester.offset_s);
        Cx {
            user_id: requester.user_id.clone(),
            scope: requester.scope(),
            now: self.clock.location_now(offset),
            outbound: Default::default(),
            keyring: self.keyring.clone(),
            public_url: self.public_url.clone(),
            perms: Arc::new(crate::auth::Perms::default()),
            sink: self.sink.clone(),
            user_receipts: None,
            epoch: None,
        }
    }

    /// A card payment: the amount to the device, the card back, the
    /// payment through the core, the answer to the device's screen and,
    /// when the cardholder signs, the signature on the transaction.
    async fn payment(
        &self,
        mut session: DeviceSession,
        terminal: &Terminal,
        mut body: Map<String, Json>,
        idempotency: Option<Idempotency>,
        requester: Requester,
    ) -> Outcome {
        let shown = match parse_payment(&body) {
            Ok(parsed) => parsed,
            Err(e) => return refused(e),
        };
        start(
            &session,
            terminal,
            DeviceJob::Payment {
                action: shown.action.name().to_string(),
                amount: crate::money::format(shown.input.record.int("transaction_amount").unwrap_or(0)),
            },
        );
        let card = match card(&mut session).await {
            Ok(card) => card,
            Err(outcome) => return outcome,
        };
        if !session.committed().await {
            return give_up(&session);
        }
        let Some(entry_mode) = EntryMode::ALL
            .iter()
            .copied()
            .find(|m| m.code() == card.entry_mode)
        else {
            self.tell(&session, false, "CARD READ ERROR", false);
            return refused(ApiError::field(
                "entry_mode_id",
                "The terminal reported an entry mode that does not exist.",
            ));
        };
        body.insert("account_number".into(), json!(card.account_number));
        body.insert("exp_date".into(), json!(card.exp_date));
        if let Some(name) = card.account_holder_name.as_ref().filter(|n| !n.trim().is_empty()) {
            body.entry("account_holder_name").or_insert_with(|| json!(name));
        }
        let input = match parse_payment(&body) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.tell(&session, false, "CARD NOT ACCEPTED", false);
                return refused(e);
            }
        };
        let origin = Origin {
            terminal: Some(TerminalRead {
                terminal_id: session.terminal_id.clone(),
                serial_number: terminal.serial_number.clone(),
                entry_mode,
                emv_receipt_data: card
                    .emv_receipt_data
                    .as_ref()
                    .map(|m| Json::Object(m.clone()).to_string())
                    .filter(|text| text.len() <= 512),
            }),
            ..Origin::api()
        };
        let request = NewPayment {
            input,
            origin,
            idempotency,
        };
        let cx = self.cx(&requester).await;
        let reply = match self.payments.create(cx.clone(), request).await {
            Ok(reply) => reply,
            Err(e) => {
                self.tell(&session, false, "DECLINED", false);
                return refused(e);
            }
        };
        let tx = reply.transaction();
        let Some(id) = tx["id"].as_str().map(str::to_string) else {
            return refused(ApiError::internal("a payment answered without an id"));
        };
        // The device shows what status_id says (an AVS-only check's 121
        // included), as the spec tells integrators to decide.
        let approved = tx["status_id"]
            .as_u64()
            .and_then(|s| StatusId::from_code(s as u16))
            .is_some_and(StatusId::is_approved);
        let message = tx["verbiage"]
            .as_str()
            .unwrap_or(if approved { "APPROVED" } else { "DECLINED" });
        // An AVS-only check moves no money: nothing to sign for.
        let sign = approved
            && shown.action != Action::AvsOnly
            && card.cvm == Cvm::Signature
            && terminal.signature_capture;
        self.tell(&session, approved, message, sign);
        if sign {
            let limit = Duration::from_secs(
                (timeouts::get(terminal.timeouts.as_deref(), "signature_input_timeout").unwrap_or(10)
                    + timeouts::get(terminal.timeouts.as_deref(), "signature_submit_timeout").unwrap_or(30))
                    as u64,
            ) + SIGNATURE_SLACK;
            if let Some(image) = signature(&mut session, limit).await {
                self.sign(&cx, "Transaction", &id, image).await;
            }
        }
        Outcome::Transaction { id }
    }

    /// Shows the processor's answer on the device.
    fn tell(&self, session: &DeviceSession, approved: bool, message: &str, capture_signature: bool) {
        session.send(ToDevice::Result {
            request_id: session.request_id.clone(),
            approved,
            message: message.to_string(),
            capture_signature,
        });
    }

    /// Stores a signature on a record; a signature that is not a usable
    /// image is left out (the payment stands without it).
    async fn sign(&self, cx: &Cx, resource: &'static str, id: &str, image: String) {
        let mut record = Record::empty(&SIGNATURE);
        record.set("resource", resource);
        record.set("resource_id", id.to_string());
        record.set("signature", image);
        let input = CreateInput {
            record,
            present: vec!["resource", "resource_id", "signature"],
            transient: Default::default(),
        };
        let cx = cx.clone();
        let stored = self
            .store
            .write(move |conn| engine::create(&cx, conn, &SIGNATURE, input))
            .await;
        if let Err(e) = stored {
            tracing::warn!(resource, error = %e, "router: the device's signature was not stored");
        }
    }

    /// A card stored on a contact (router account vaults): the holder's
    /// name and expiry as the card gives them.
    async fn store_card(
        &self,
        mut session: DeviceSession,
        terminal: &Terminal,
        body: Map<String, Json>,
        requester: Requester,
    ) -> Outcome {
        start(&session, terminal, DeviceJob::Store);
        let card = match card(&mut session).await {
            Ok(card) => card,
            Err(outcome) => return outcome,
        };
        if !session.committed().await {
            return give_up(&session);
        }
        let mut vault = Map::new();
        for name in ["location_id", "contact_id"] {
            if let Some(v) = body.get(name) {
                vault.insert(name.into(), v.clone());
            }
        }
        vault.insert("payment_method".into(), json!("cc"));
        vault.insert("account_number".into(), json!(card.account_number));
        vault.insert("exp_date".into(), json!(card.exp_date));
        if let Some(name) = card.account_holder_name.filter(|n| !n.trim().is_empty()) {
            vault.insert("account_holder_name".into(), json!(name));
        }
        let input = match for_create(&ACCOUNT_VAULT, &vault).map_err(ApiError::Validation) {
            Ok(input) => input,
            Err(e) => {
                self.tell(&session, false, "CARD NOT ACCEPTED", false);
                return refused(e);
            }
        };
        let cx = self.cx(&requester).await;
        let stored = self
            .store
            .write(move |conn| engine::create(&cx, conn, &ACCOUNT_VAULT, input))
            .await;
        match stored {
            Ok((vault, _)) => {
                self.tell(&session, true, "CARD STORED", false);
                Outcome::Vault {
                    id: vault.id().to_string(),
                }
            }
            Err(e) => {
                self.tell(&session, false, "CARD NOT STORED", false);
                refused(e)
            }
        }
    }

    /// Device terms: shown on the device, then recorded with the
    /// cardholder's answer. Whatever ends the prompt without an answer (a
    /// time-out, a cancel, the device going away) records a decline,
    /// which the integrator may try again by its api id.
    async fn terms(
        &self,
        mut session: DeviceSession,
        terminal: &Terminal,
        body: Map<String, Json>,
        requester: Requester,
    ) -> Outcome {
        let input = match for_create(&DEVICE_TERM, &body).map_err(ApiError::Validation) {
            Ok(input) => input,
            Err(e) => return refused(e),
        };
        start(
            &session,
            terminal,
            DeviceJob::Terms {
                terms: input
                    .record
                    .text("terms_conditions")
                    .unwrap_or_default()
                    .to_string(),
                require_signature: input.record.int("require_signature") == Some(1),
            },
        );
        let answer = loop {
            match session.next(LONG_WAIT).await {
                DeviceEvent::Device(FromDevice::Terms {
                    accepted: true,
                    signature,
                    ..
                }) => break PromptAnswer::Accepted { signature },
                DeviceEvent::Device(FromDevice::Terms { accepted: false, .. })
                | DeviceEvent::Device(FromDevice::Failed { .. })
                | DeviceEvent::Disconnected => break PromptAnswer::Declined,
                DeviceEvent::Device(_) => {}
                DeviceEvent::Cancel | DeviceEvent::Quiet => {
                    session.send(ToDevice::Cancel {
                        request_id: session.request_id.clone(),
                    });
                    break PromptAnswer::Declined;
                }
            }
        };
        let cx = self.cx(&requester).await;
        let recorded = self
            .store
            .write(move |conn| {
                let (term, created) = engine::create(&cx, conn, &DEVICE_TERM, input)?;
                let answered = match prompts::answer(&cx, conn, term.id(), answer) {
                    // An accepted term whose signature is not a usable
                    // image: recorded as declined, to be tried again.
                    Err(ApiError::Validation(_)) => {
                        prompts::answer(&cx, conn, term.id(), PromptAnswer::Declined)?
                    }
                    other => other?,
                };
                Ok((answered, created))
            })
            .await;
        match recorded {
            Ok((term, created)) => Outcome::Term {
                id: term.id().to_string(),
                retried: !created,
            },
            Err(e) => refused(e),
        }
    }
}

/// Waits for the signature asked for after an approval.
async fn signature(session: &mut DeviceSession, limit: Duration) -> Option<String> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        match session.next(left).await {
            DeviceEvent::Device(FromDevice::Signature { signature, .. }) => {
                return signature.filter(|s| !s.is_empty())
            }
            DeviceEvent::Device(_) | DeviceEvent::Cancel => {}
            DeviceEvent::Disconnected | DeviceEvent::Quiet => return None,
        }
        if left.is_zero() {
            return None;
        }
    }
}
