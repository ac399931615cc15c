-- A location's contact_email_trx_receipt_default, show_contact_notes and
-- show_contact_files are booleans (spec): locations stored without them
-- take false (off, as unset meant), as new locations now do.
UPDATE locations SET contact_email_trx_receipt_default = COALESCE(contact_email_trx_receipt_default, 0), show_contact_notes = COALESCE(show_contact_notes, 0), show_contact_files = COALESCE(show_contact_files, 0) WHERE contact_email_trx_receipt_default IS NULL OR show_contact_notes IS NULL OR show_contact_files IS NULL;
