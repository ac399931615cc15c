//! `GET /router/v1/connect`: the connection a payment terminal opens to
//! the gateway (a WebSocket, so a device behind NAT needs no inbound
//! port). The device authenticates the upgrade with the `terminal-id`
//! and `terminal-secret` headers, registers, then receives work until the
//! connection ends. What it sends is never logged: it carries card data.

use super::AppState;
use crate::error::ApiError;
use crate::terminals::protocol::{FromDevice, ToDevice};
use crate::terminals::Device;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::SinkExt;
use std::time::Duration;

/// The path devices connect to.
pub const CONNECT_PATH: &str = "/router/v1/connect";
/// Time a device has to register after connecting.
const REGISTER_WITHIN: Duration = Duration::from_secs(30);
/// How often the gateway pings a quiet device, and how long it lets a
/// device stay silent (pongs count) before it drops the connection.
const PING_EVERY: Duration = Duration::from_secs(20);
const SILENCE_LIMIT: Duration = Duration::from_secs(65);
/// The largest message a device may send (a signature image in base64).
const MAX_MESSAGE: usize = 512 * 1024;
/// A device that stops reading is dropped after this long.
const WRITE_LIMIT: Duration = Duration::from_secs(10);

pub fn routes() -> Router<AppState> {
    Router::new().route(CONNECT_PATH, get(connect))
}

async fn connect(
    State(app): State<AppState>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let device =
        match crate::terminals::authenticate(&app.store, &header("terminal-id"), &header("terminal-secret"))
            .await
        {
            Ok(device) => device,
            Err(e) => return e.into_response(),
        };
    let Ok(upgrade) = upgrade else {
        return ApiError::BadRequest(format!(
            "{CONNECT_PATH} takes a WebSocket connection (GET with Upgrade: websocket)."
        ))
        .into_response();
    };
    upgrade
        .max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| session(app, device, socket))
}

fn text(message: &ToDevice) -> Message {
    Message::Text(serde_json::to_string(message).unwrap_or_default().into())
}

/// Writes one frame; false when the device is gone or stopped reading.
async fn write(socket: &mut WebSocket, frame: Message) -> bool {
    matches!(
        tokio::time::timeout(WRITE_LIMIT, socket.send(frame)).await,
        Ok(Ok(()))
    )
}

/// Reads the device's `register`, skipping control frames.
async fn registration(socket: &mut WebSocket) -> Option<Option<String>> {
    loop {
        match socket.recv().await? {
            Ok(Message::Text(t)) => {
                return match serde_json::from_str::<FromDevice>(&t) {
                    Ok(FromDevice::Register { local_ip_address, .. }) => Some(local_ip_address),
                    _ => None,
                }
            }
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            _ => return None,
        }
    }
}

/// One device connection, from registration to its end.
async fn session(app: AppState, device: Device, mut socket: WebSocket) {
    let terminal_id = device.terminal_id.clone();
    let registered = tokio::time::timeout(REGISTER_WITHIN, registration(&mut socket)).await;
    let Ok(Some(local_ip)) = registered else {
        let refusal = ToDevice::Error {
            message: "The first message must be a register message.".into(),
        };
        let _ = socket.send(text(&refusal)).await;
        let _ = socket.close().await;
        return;
    };
    if let Err(e) =
        crate::terminals::record_registration(&app.store, &terminal_id, local_ip, app.clock.now_ts()).await
    {
        tracing::warn!(terminal_id, error = %e, "a device's registration was not recorded");
        let _ = socket.close().await;
        return;
    }
    let (link_id, mut outbox) = match app.router.attach(&terminal_id).await {
        Ok(attached) => attached,
        Err(e) => {
            tracing::warn!(terminal_id, error = %e, "a device could not be linked");
            let _ = socket.close().await;
            return;
        }
    };
    tracing::info!(terminal_id, "terminal connected");
    let welcome = ToDevice::Registered {
        terminal_id: terminal_id.clone(),
        timeouts: device.timeouts.clone(),
        signature_capture: device.signature_capture,
    };
    if write(&mut socket, text(&welcome)).await {
        let mut ping = tokio::time::interval(PING_EVERY);
        let mut heard = tokio::time::Instant::now();
        loop {
            tokio::select! {
                message = outbox.recv() => match message {
                    Some(m) => {
                        if !write(&mut socket, text(&m)).await {
                            break;
                        }
                    }
                    // A newer connection of the device took over.
                    None => break,
                },
                frame = socket.recv() => {
                    heard = tokio::time::Instant::now();
                    match frame {
                        Some(Ok(Message::Text(t))) => {
                            let reply = match serde_json::from_str::<FromDevice>(&t) {
                                Ok(m) => app.router.from_device(&terminal_id, &link_id, m),
                                Err(_) => Some(ToDevice::Error {
                                    message: "Not a message of the router protocol.".into(),
                                }),
                            };
                            if let Some(reply) = reply {
                                if !write(&mut socket, text(&reply)).await {
                                    break;
                                }
                            }
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                        Some(Ok(Message::Binary(_))) => {
                            let refusal = ToDevice::Error { message: "Messages are JSON text.".into() };
                            if !write(&mut socket, text(&refusal)).await {
                                break;
                            }
                        }
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    }
                },
                _ = ping.tick() => {
                    if heard.elapsed() > SILENCE_LIMIT || !write(&mut socket, Message::Ping(Vec::new().into())).await {
                        break;
                    }
                }
            }
        }
    }
    let _ = socket.close().await;
    app.router.detach(&terminal_id, &link_id).await;
    tracing::info!(terminal_id, "terminal disconnected");
}
