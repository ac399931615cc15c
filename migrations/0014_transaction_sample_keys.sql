-- Keys of the reference's transaction samples that an integrator may send:
-- a bill payment flag and the Mastercard service address.
ALTER TABLE transactions ADD COLUMN bill_payment BIGINT;
ALTER TABLE transactions ADD COLUMN service_address TEXT;
ALTER TABLE transactions ADD COLUMN service_city TEXT;
ALTER TABLE transactions ADD COLUMN service_state TEXT;
ALTER TABLE transactions ADD COLUMN service_zip TEXT;
ALTER TABLE transactions ADD COLUMN service_country TEXT;
