//! Statements with named parameters. A statement's text names each parameter `$name`;
//! [`params!`] defines its parameters as a struct, whose field list is the one list of
//! names: [`numbered`] turns each `$name` of the text into `$n` by that list, and the
//! struct's `binds` gives the values in that same order. A parameter cannot be bound in the
//! place of another, and a name the list lacks stops the statement being made.

/// Defines a statement's parameters: a struct of the fields as given, with `NAMES` (the
/// fields' names) and `binds` (their values), both in the order of the fields.
macro_rules! params {
    (
        $(#[$meta:meta])*
        $name:ident<$lt:lifetime> {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name<$lt> {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl<$lt> $name<$lt> {
            /// The parameters' names: `$1` is the first.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The values, `$1` first.
            pub fn binds(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
                vec![$(&self.$field),*]
            }
        }
    };
}
pub(crate) use params;

/// `text` with each `$name` replaced by `$n`, `n` the place of `name` in `names` (from 1).
///
/// # Panics
/// When `text` names a parameter `names` lacks: a statement written wrong, found by the
/// tests that make every statement.
pub fn numbered(text: &str, names: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..end];
        let n = names
            .iter()
            .position(|known| *known == name)
            .unwrap_or_else(|| panic!("statement names parameter `${name}`, not in {names:?}"));
        out.push_str(&format!("${}", n + 1));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Whether `sql`'s `$n` are exactly `$1` to `$len` of `names`, each used: else what is not.
///
/// # Errors
/// The numbers missing or beyond the list.
#[cfg(test)]
pub fn check(sql: &str, names: &[&str]) -> Result<(), String> {
    let mut used = vec![false; names.len()];
    for piece in sql.split('$').skip(1) {
        let digits: String = piece.chars().take_while(char::is_ascii_digit).collect();
        let n: usize = digits
            .parse()
            .map_err(|_| format!("`${piece:.12}` is not a numbered parameter"))?;
        match n.checked_sub(1).and_then(|i| used.get_mut(i)) {
            Some(seen) => *seen = true,
            None => return Err(format!("${n} is beyond the {} of {names:?}", names.len())),
        }
    }
    match used.iter().position(|seen| !seen) {
        Some(i) => Err(format!("${} ({}) is never used", i + 1, names[i])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_numbers_in_the_lists_order_and_a_wrong_count_is_found() {
        let sql = numbered("SELECT $b::int + $a::int, $b", &["a", "b"]);
        assert_eq!(sql, "SELECT $2::int + $1::int, $2");
        assert_eq!(check(&sql, &["a", "b"]), Ok(()));
        let e = check(&sql, &["a", "b", "c"]).unwrap_err();
        assert!(e.contains("$3 (c) is never used"), "{e}");
        let e = check(&sql, &["a"]).unwrap_err();
        assert!(e.contains("$2 is beyond the 1"), "{e}");
    }

    #[test]
    #[should_panic(expected = "statement names parameter `$c`")]
    fn a_name_the_list_lacks_stops_the_statement() {
        numbered("SELECT $c", &["a", "b"]);
    }
}
