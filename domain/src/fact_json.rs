//! A fact's JSON, in the two forms a fact reaches the ticket's `Facts::set`.

use serde::de::DeserializeOwned;

/// A fact's JSON: as stored (text), or as a value in hand.
pub trait FactJson {
    fn parse<T: DeserializeOwned>(self) -> Result<T, serde_json::Error>;
}

impl FactJson for &str {
    fn parse<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self)
    }
}

impl FactJson for &serde_json::Value {
    fn parse<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        T::deserialize(self)
    }
}
