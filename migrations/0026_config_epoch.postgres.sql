-- The configuration a payment reads (ADR 0024): its product transaction
-- (with the location's defaults, already covered) and the postback
-- configs that want its events. A change to either moves auth_epoch like
-- a change to what authentication reads, so a node may keep them under
-- the epoch its requests read.
CREATE TRIGGER auth_changed_product_transactions AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON product_transactions FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
CREATE TRIGGER auth_changed_postback_configs AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON postback_configs FOR EACH STATEMENT EXECUTE FUNCTION ferrogate_auth_changed();
