//! The declared resources. Each module holds one resource's declaration
//! and its business rules; the engine does everything they share.

pub mod accountvaults;
pub mod accountvaultupdates;
pub mod authroleusers;
pub mod contacts;
pub mod deviceterms;
pub mod hostedpaymentpages;
pub mod locationinfos;
pub mod locations;
pub mod notes;
pub mod postbackconfigs;
pub mod product_transactions;
pub mod productfiles;
pub mod quickinvoices;
pub mod recurrings;
pub mod signatures;
pub mod tags;
pub mod terminals;
pub mod transactionbatches;
pub mod transactions;
pub mod users;

pub use accountvaults::ACCOUNT_VAULT;
pub use authroleusers::AUTH_ROLE_USER;
pub use contacts::CONTACT;
pub use deviceterms::DEVICE_TERM;
pub use hostedpaymentpages::HOSTED_PAYMENT_PAGE;
pub use locationinfos::LOCATION_INFO;
pub use locations::LOCATION;
pub use notes::NOTE;
pub use postbackconfigs::{POSTBACK_CONFIG, POSTBACK_DELIVERY};
pub use product_transactions::PRODUCT_TRANSACTION;
pub use productfiles::PRODUCT_FILE;
pub use quickinvoices::QUICK_INVOICE;
pub use recurrings::RECURRING;
pub use signatures::SIGNATURE;
pub use tags::TAG;
pub use terminals::TERMINAL;
pub use transactionbatches::TRANSACTION_BATCH;
pub use transactions::TRANSACTION;
pub use users::USER;

use crate::engine::resource::Resource;

/// The payment methods: cards and ACH bank accounts.
pub const PAYMENT_METHODS: &[&str] = &["cc", "ach"];

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
    &RECURRING,
    &POSTBACK_CONFIG,
    &POSTBACK_DELIVERY,
    &TAG,
    &HOSTED_PAYMENT_PAGE,
    &QUICK_INVOICE,
    &PRODUCT_FILE,
    &TERMINAL,
    &DEVICE_TERM,
    &SIGNATURE,
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

    /// An expand of another resource's records names the read permission
    /// of a resource that exists (or of Level 3 data, which has its own),
    /// so that callers without it get null or [] (ADR 0027).
    #[test]
    fn custom_record_expands_name_read_permissions_that_exist() {
        use crate::engine::resource::Expand;
        for res in ALL {
            for expand in res.expands {
                let Expand::CustomRecords { name, permission, .. } = expand else {
                    continue;
                };
                let known = permission == &"transactionlevel3s.read"
                    || ALL.iter().any(|r| r.permission("read") == *permission);
                assert!(known, "{}.{name}: {permission}", res.name);
            }
        }
    }

    /// The postback config messages and docs name the subscribable
    /// resources in words: they must match the declarations.
    #[test]
    fn postback_declarations_match_the_config_messages() {
        let mut subscribable: Vec<&str> = ALL
            .iter()
            .filter(|r| r.postback.is_some())
            .map(|r| r.name)
            .collect();
        subscribable.sort_unstable();
        assert_eq!(
            subscribable,
            ["accountvault", "contact", "transaction", "transactionbatch"]
        );
        let mut by_pt: Vec<&str> = ALL
            .iter()
            .filter(|r| r.postback.is_some_and(|p| p.by_product_transaction))
            .map(|r| r.name)
            .collect();
        by_pt.sort_unstable();
        assert_eq!(by_pt, ["transaction", "transactionbatch"]);
        for res in ALL
            .iter()
            .filter(|r| r.postback.is_some_and(|p| p.by_product_transaction))
        {
            assert!(res.field("product_transaction_id").is_some(), "{}", res.name);
        }
    }

    /// Notes are deleted with the record they annotate: every resource a
    /// note can name declares the cascade, and no other does.
    #[test]
    fn note_targets_cascade_their_notes() {
        for res in ALL {
            let cascades = res
                .cascades
                .iter()
                .any(|c| std::ptr::eq(c.target, &NOTE) && c.column == "resource_id");
            let target = notes::TARGETS.iter().any(|t| std::ptr::eq(*t, *res));
            assert_eq!(cascades, target, "{}", res.name);
        }
    }
}
