//! The methods of their XML/JSON API: which the emulator answers, which
//! it knows but does not emulate, and the element each one answers
//! under. A method that is not emulated is answered, after
//! authentication, as Authorize.Net answers an account without the
//! feature: E00044 for customer profiles (CIM), E00011 for the rest.
//! E00004 is only for a root element that is none of their methods.

use super::tree::Out;

/// The methods the emulator answers.
pub const EMULATED: &[&str] = &[
    "isAliveRequest",
    "authenticateTestRequest",
    "createTransactionRequest",
    "getTransactionDetailsRequest",
    "getSettledBatchListRequest",
    "getTransactionListRequest",
    "getUnsettledTransactionListRequest",
    "getBatchStatisticsRequest",
    "ARBCreateSubscriptionRequest",
    "ARBGetSubscriptionRequest",
    "ARBGetSubscriptionStatusRequest",
    "ARBUpdateSubscriptionRequest",
    "ARBCancelSubscriptionRequest",
];

/// Customer profile (CIM) methods: their E00044 "Customer Information
/// Manager is not enabled." An integration asks one of them (often
/// getHostedProfilePage) to learn whether CIM is on, and takes E00044 as
/// off.
pub const CIM: &[&str] = &[
    "createCustomerProfileRequest",
    "getCustomerProfileRequest",
    "updateCustomerProfileRequest",
    "deleteCustomerProfileRequest",
    "createCustomerPaymentProfileRequest",
    "getCustomerPaymentProfileRequest",
    "updateCustomerPaymentProfileRequest",
    "deleteCustomerPaymentProfileRequest",
    "createCustomerShippingAddressRequest",
    "getCustomerShippingAddressRequest",
    "updateCustomerShippingAddressRequest",
    "deleteCustomerShippingAddressRequest",
    "getCustomerProfileIdsRequest",
    "createCustomerProfileFromTransactionRequest",
    "createCustomerProfileTransactionRequest",
    "validateCustomerPaymentProfileRequest",
    "getHostedProfilePageRequest",
    "getCustomerPaymentProfileListRequest",
    "getCustomerPaymentProfileNonceRequest",
    "getTransactionListForCustomerRequest",
];

/// Their other methods, not emulated: E00011, their answer to a caller
/// whose account or user may not use a method.
pub const NOT_ENABLED: &[&str] = &[
    "getMerchantDetailsRequest",
    "updateMerchantDetailsRequest",
    "getHostedPaymentPageRequest",
    "decryptPaymentDataRequest",
    "securePaymentContainerRequest",
    "sendCustomerTransactionReceiptRequest",
    "updateSplitTenderGroupRequest",
    "updateHeldTransactionRequest",
    "ARBGetSubscriptionListRequest",
    "getAUJobSummaryRequest",
    "getAUJobDetailsRequest",
    "mobileDeviceRegistrationRequest",
    "mobileDeviceLoginRequest",
    "logoutRequest",
];

/// What the emulator does with a root element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Emulated,
    /// A customer profile method: E00044.
    Cim,
    /// Another of their methods: E00011.
    NotEnabled,
    /// Not one of their methods: E00004.
    Unknown,
}

pub fn of(name: &str) -> Method {
    if EMULATED.contains(&name) {
        Method::Emulated
    } else if CIM.contains(&name) {
        Method::Cim
    } else if NOT_ENABLED.contains(&name) {
        Method::NotEnabled
    } else {
        Method::Unknown
    }
}

/// The element a method answers under: `xRequest` answers `xResponse`,
/// except the two methods their schema gives another method's answer.
/// A name that is not a method answers `ErrorResponse`.
pub fn answer_root(method: &str) -> String {
    match method {
        "createCustomerProfileFromTransactionRequest" => return "createCustomerProfileResponse".into(),
        "getTransactionListForCustomerRequest" => return "getTransactionListResponse".into(),
        _ => {}
    }
    match method.strip_suffix("Request") {
        Some(stem) if of(method) != Method::Unknown => format!("{stem}Response"),
        _ => "ErrorResponse".to_string(),
    }
}

/// The elements their schema requires in a method's answer beyond the
/// messages, empty, for a refusal of a method that is not emulated: so
/// that a client that validates the answer against their schema (the
/// Python SDK) reads it as the method's answer and finds the code.
pub fn required_empty(method: &str) -> Vec<(&'static str, Out)> {
    let ids = || Out::List("numericString", Vec::new());
    match answer_root(method).as_str() {
        "createCustomerProfileResponse" => vec![
            ("customerPaymentProfileIdList", ids()),
            ("customerShippingAddressIdList", ids()),
            ("validationDirectResponseList", Out::List("string", Vec::new())),
        ],
        "getCustomerProfileIdsResponse" => vec![("ids", ids())],
        "getHostedProfilePageResponse" | "getHostedPaymentPageResponse" => vec![("token", Out::text(""))],
        "getCustomerPaymentProfileListResponse" => vec![("totalNumInResultSet", Out::text("0"))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_answers_under_its_own_element() {
        assert_eq!(
            answer_root("createTransactionRequest"),
            "createTransactionResponse"
        );
        assert_eq!(
            answer_root("getHostedProfilePageRequest"),
            "getHostedProfilePageResponse"
        );
        assert_eq!(
            answer_root("createCustomerProfileFromTransactionRequest"),
            "createCustomerProfileResponse"
        );
        assert_eq!(
            answer_root("getTransactionListForCustomerRequest"),
            "getTransactionListResponse"
        );
        assert_eq!(answer_root("fooRequest"), "ErrorResponse");
        assert_eq!(answer_root("Request"), "ErrorResponse");
        // No method is in two lists.
        for name in EMULATED.iter().chain(CIM).chain(NOT_ENABLED) {
            let lists = [EMULATED, CIM, NOT_ENABLED]
                .iter()
                .filter(|l| l.contains(name))
                .count();
            assert_eq!(lists, 1, "{name}");
        }
    }
}
