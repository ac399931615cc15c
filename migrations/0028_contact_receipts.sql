-- A contact's email_trx_receipt is always a boolean: contacts stored
-- without one take their location's contact_email_trx_receipt_default
-- (off when unset), as new contacts now do.
UPDATE contacts SET email_trx_receipt = COALESCE((SELECT CASE WHEN l.contact_email_trx_receipt_default <> 0 THEN 1 ELSE 0 END FROM locations l WHERE l.id = contacts.location_id), 0) WHERE email_trx_receipt IS NULL;
