-- A contact's recurrings are looked up when the contact is deleted (an
-- active one refuses the delete; held ones end with it).
CREATE INDEX recurrings_contact ON recurrings (contact_id);
