-- The configuration a payment reads (ADR 0024): its product transaction
-- (with the location's defaults, already covered) and the postback
-- configs that want its events. A change to either moves auth_epoch like
-- a change to what authentication reads, so a node may keep them under
-- the epoch its requests read.
CREATE TRIGGER auth_epoch_product_transactions_insert AFTER INSERT ON product_transactions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_product_transactions_update AFTER UPDATE ON product_transactions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_product_transactions_delete AFTER DELETE ON product_transactions BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_postback_configs_insert AFTER INSERT ON postback_configs BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_postback_configs_update AFTER UPDATE ON postback_configs BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_postback_configs_delete AFTER DELETE ON postback_configs BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
