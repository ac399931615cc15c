//! A row of a declared resource, in the resource's stored-field order.

use super::resource::{Field, Resource};
use crate::db::Value;

#[derive(Clone, Debug)]
pub struct Record {
    pub res: &'static Resource,
    pub values: Vec<Value>,
}

impl Record {
    /// A record with every column null.
    pub fn empty(res: &'static Resource) -> Record {
        Record {
            res,
            values: vec![Value::Null; res.stored().count()],
        }
    }

    pub fn from_row(res: &'static Resource, values: Vec<Value>) -> Record {
        Record { res, values }
    }

    pub fn get(&self, name: &str) -> &Value {
        match self.res.stored_index(name) {
            Some(i) => &self.values[i],
            None => &Value::Null,
        }
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).as_str()
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        self.get(name).as_int()
    }

    pub fn id(&self) -> &str {
        self.text("id").unwrap_or_default()
    }

    /// Sets a stored column. Setting an undeclared name is a programming
    /// error caught by the resource tests.
    pub fn set(&mut self, name: &str, value: impl Into<Value>) {
        let i = self
            .res
            .stored_index(name)
            .unwrap_or_else(|| panic!("{} has no stored field {name}", self.res.name));
        self.values[i] = value.into();
    }

    pub fn fields(&self) -> impl Iterator<Item = (&'static Field, &Value)> {
        self.res.stored().zip(self.values.iter())
    }
}
