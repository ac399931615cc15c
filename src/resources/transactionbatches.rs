//! Transaction batches: the approved card sales, completions and refunds
//! of a product transaction waiting to settle together. Opened by the
//! first transaction that needs one, closed by settling (see
//! `payments::batches`).

use crate::engine::resource::{Api, Expand, Field, Postback, Resource, Scope};
use crate::engine::rules::NoRules;

use super::{LOCATION, PRODUCT_TRANSACTION, USER};

pub static TRANSACTION_BATCH: Resource = Resource {
    name: "transactionbatch",
    plural: "transactionbatches",
    table: "transaction_batches",
    model: "TransactionBatch",
    view: Some("transaction_batches_read"),
    fields: &[
        Field::id("id").filter().sort(),
        Field::int("batch_num", 1, i64::MAX)
            .filter()
            .sort()
            .doc("counts up per product transaction"),
        Field::id("product_transaction_id").filter(),
        Field::id("location_id").filter(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
        Field::int("processing_status_id", 1, 6)
            .filter()
            .sort()
            .doc("1 To Settle, 2 Settled, 3 Error, 4 Re-process, 5 Processing, 6 Forced Closed"),
        Field::flag("is_open").numbered().filter().sort(),
        Field::ts("batch_close_ts"),
        Field::text("settlement_file_name", 0, 128).filter(),
        Field::text("status_message", 0, 512).filter(),
        Field::int("transaction_count", 0, i64::MAX)
            .filter()
            .sort()
            .doc("approved transactions in the batch (voids excluded)"),
        Field::money("total_amount", i64::MAX)
            .filter()
            .sort()
            .doc("sales minus refunds"),
        Field::int("settle_attempts", 0, i64::MAX).hidden(),
        Field::int("entries", 0, i64::MAX)
            .hidden()
            .doc("numbered the transactions counted before the tallies of migration 27 (batch_seq now comes from stripe 0 on SQLite, the batch_entries sequence on PostgreSQL)"),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
    ],
    default_sort: ("created_ts", true),
    page_size: 15,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "product_transaction",
            target: &PRODUCT_TRANSACTION,
            column: "product_transaction_id",
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &NoRules,
    search: None,
    cascades: &[],
    postback: Some(Postback { by_product_transaction: true }),
    api: Api::PLAIN,
    doc: "A settlement batch of a card product transaction. POST /{id}/settle closes it (permission transactionbatches.settle).",
};
