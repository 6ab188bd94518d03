//! The query string as a typed struct: `Query<T>` deserializes `T` from the parameters (the
//! last of a repeated one counts, unknown ones are ignored) and answers a bad one with 400
//! naming it; `Bounded` and `Flag` are the parameter types with the API's messages.

use crate::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::value::{Error, MapAccessDeserializer, StringDeserializer};
use serde::de::{
    DeserializeOwned, DeserializeSeed, Error as _, IntoDeserializer, MapAccess, Visitor,
};
use serde::{forward_to_deserialize_any, Deserialize, Deserializer};
use std::collections::{btree_map, BTreeMap};

/// The query string's parameters as `T`.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|e| ApiError::Invalid(format!("query: {e}")))?;
        let pairs = Pairs {
            rest: pairs.into_iter().collect::<BTreeMap<_, _>>().into_iter(),
            value: None,
        };
        T::deserialize(MapAccessDeserializer::new(pairs))
            .map(Query)
            .map_err(|e| ApiError::Invalid(e.to_string()))
    }
}

/// The parameters, each value's error prefixed with its name.
struct Pairs {
    rest: btree_map::IntoIter<String, String>,
    value: Option<(String, String)>,
}

impl<'de> MapAccess<'de> for Pairs {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((name, text)) = self.rest.next() else {
            return Ok(None);
        };
        let key: StringDeserializer<Error> = name.clone().into_deserializer();
        let key = seed.deserialize(key)?;
        self.value = Some((name, text));
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (name, text) = self
            .value
            .take()
            .ok_or_else(|| Error::custom("query: a value without its name"))?;
        seed.deserialize(Text(text))
            .map_err(|e| Error::custom(format!("{name}: {e}")))
    }
}

/// One parameter's text: present, so `Some` of an `Option`.
struct Text(String);

impl<'de> Deserializer<'de> for Text {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_string(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// A whole number within `MIN..=MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let n: u64 = text
            .parse()
            .map_err(|_| D::Error::custom(format!("`{text}` is not a whole number")))?;
        if !(MIN..=MAX).contains(&n) {
            return Err(D::Error::custom(format!(
                "{n} is not between {MIN} and {MAX}"
            )));
        }
        Ok(Bounded(n))
    }
}

/// A boolean parameter, `true` or `false`; `false` when absent (with `#[serde(default)]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "true" => Ok(Flag(true)),
            "false" => Ok(Flag(false)),
            other => Err(D::Error::custom(format!(
                "`{other}` is neither true nor false"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    #[derive(Debug, Deserialize)]
    struct Sample {
        limit: Option<Bounded<1, 1000>>,
        #[serde(default)]
        all: Flag,
    }

    async fn parse(query: &str) -> Result<Sample, String> {
        let request = Request::get(format!("/?{query}")).body(()).unwrap();
        let (mut parts, ()) = request.into_parts();
        let answer = Query::<Sample>::from_request_parts(&mut parts, &()).await;
        answer.map(|Query(q)| q).map_err(|e| e.message().to_owned())
    }

    #[tokio::test]
    async fn parameters_are_typed_with_messages_naming_them() {
        let sample = parse("limit=5&limit=7&other=x&all=true").await.unwrap();
        assert_eq!((sample.limit, sample.all), (Some(Bounded(7)), Flag(true)));
        let absent = parse("").await.unwrap();
        assert_eq!((absent.limit, absent.all), (None, Flag(false)));
        let cases = [
            ("limit=0", "limit: 0 is not between 1 and 1000"),
            ("limit=x", "limit: `x` is not a whole number"),
            ("all=yes", "all: `yes` is neither true nor false"),
        ];
        for (query, message) in cases {
            assert_eq!(parse(query).await.unwrap_err(), message, "{query}");
        }
    }
}
