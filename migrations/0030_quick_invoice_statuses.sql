-- Quick invoices take the reference's values: status_id 0 closed, 1 open
-- (closed was 2 for paid in full and 3 for inactive or expired), and
-- payment_status_id 1 unpaid, 2 paid, 3 partially paid (an overpaid
-- invoice was 4; it is paid).
UPDATE quick_invoices SET status_id = 0 WHERE status_id IN (2, 3);
UPDATE quick_invoices SET payment_status_id = 2 WHERE payment_status_id = 4;
