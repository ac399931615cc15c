-- What an Authorize.Net client sent for a payment the emulator made
-- (ADR 0016), which our transaction row cannot tell: their transaction
-- type (an authorization and a sale are both our type 20, and a captured,
-- voided or declined authorization leaves no trace of having been one),
-- and whether an invoice number was sent (the payments core numbers
-- orders sent without one). Written with the payment's number.
CREATE TABLE emulator_transactions (
    transaction_id TEXT PRIMARY KEY,
    transaction_type TEXT NOT NULL,
    invoice_sent BIGINT NOT NULL
);
