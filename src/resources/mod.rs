//! The declared resources. Each module holds one resource's declaration
//! and its business rules; the engine does everything they share.

pub mod accountvaults;
pub mod accountvaultupdates;
pub mod authroleusers;
pub mod contacts;
pub mod locationinfos;
pub mod locations;
pub mod notes;
pub mod postbackconfigs;
pub mod product_transactions;
pub mod transactionbatches;
pub mod transactions;
pub mod users;

pub use accountvaults::ACCOUNT_VAULT;
pub use authroleusers::AUTH_ROLE_USER;
pub use contacts::CONTACT;
pub use locationinfos::LOCATION_INFO;
pub use locations::LOCATION;
pub use notes::NOTE;
pub use postbackconfigs::{POSTBACK_CONFIG, POSTBACK_DELIVERY};
pub use product_transactions::PRODUCT_TRANSACTION;
pub use transactionbatches::TRANSACTION_BATCH;
pub use transactions::TRANSACTION;
pub use users::USER;

use crate::engine::resource::Resource;

/// Every declared resource, for routing, OpenAPI and the tests.
pub static ALL: &[&Resource] = &[
    &CONTACT,
    &LOCATION,
    &LOCATION_INFO,
    &PRODUCT_TRANSACTION,
    &NOTE,
    &USER,
    &AUTH_ROLE_USER,
    &ACCOUNT_VAULT,
    &TRANSACTION,
    &TRANSACTION_BATCH,
    &POSTBACK_CONFIG,
    &POSTBACK_DELIVERY,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_consistent() {
        for res in ALL {
            assert!(
                res.field(res.default_sort.0).is_some(),
                "{} default sort",
                res.name
            );
            assert_eq!(res.fields[0].name, "id", "{} id first", res.name);
            for f in res.fields {
                assert!(
                    !f.required || f.post,
                    "{}.{} required but not allowed on POST",
                    res.name,
                    f.name
                );
                assert!(
                    !(f.encrypted && f.filter),
                    "{}.{} encrypted fields cannot be filtered",
                    res.name,
                    f.name
                );
            }
            if let Some(col) = res.api_id {
                assert!(res.field(col).is_some());
            }
        }
    }
}
