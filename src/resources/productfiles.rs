//! Product files: a location's file storage, enabled before its quick
//! invoices can hold files (reference 6.9). Ferrogate keeps the bytes in
//! its own file store (`files`); `product_file_credential_id` is kept as
//! the reference has it, for integrations that send it.

use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::NoRules;

use super::{LOCATION, USER};

pub static PRODUCT_FILE: Resource = Resource {
    name: "productfile",
    plural: "productfiles",
    table: "product_files",
    model: "ProductFile",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION)
            .doc("not updatable"),
        Field::text("title", 1, 64).pu().required().filter().sort(),
        Field::text("product_file_credential_id", 0, 36)
            .pu()
            .filter()
            .doc("kept as sent; the files live in Ferrogate's file store"),
        Field::id("created_user_id"),
        Field::id("modified_user_id"),
        Field::ts("created_ts").filter().sort(),
        Field::ts("modified_ts").filter().sort(),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
    ],
    list_params: &[],
    computed: &[],
    rules: &NoRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A location's file storage: its quick invoices may hold files once one exists.",
};
