//! A saved CSV table read back for its charts: columns by name, numbers parsed with
//! errors that name the file, the row and the column.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A CSV file's header and rows.
pub struct Table {
    pub path: PathBuf,
    header: Vec<String>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    /// Read `path` (a header line, then records of the header's length).
    pub fn read(path: &Path) -> Result<Table> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Table::parse(path, &bytes)
    }

    /// Parse `bytes` as the CSV file `path`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Table> {
        let bad = |e: csv::Error| Error::format(path, format!("not a CSV table: {e}"));
        let mut r = csv::Reader::from_reader(bytes);
        let header = r
            .headers()
            .map_err(bad)?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        let rows = r
            .records()
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(bad)?;
        if rows.is_empty() {
            return Err(Error::format(path, "the table has no rows to draw"));
        }
        Ok(Table {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    /// The rows' count.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows (never, once read).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Whether the table has the column `name`.
    pub fn has(&self, name: &str) -> bool {
        self.header.iter().any(|h| h == name)
    }

    fn index(&self, name: &str) -> Result<usize> {
        self.header.iter().position(|h| h == name).ok_or_else(|| {
            Error::format(
                &self.path,
                format!("no column `{name}` (columns: {})", self.header.join(", ")),
            )
        })
    }

    /// Row `row`'s text in column `name`.
    pub fn text(&self, row: usize, name: &str) -> Result<&str> {
        let i = self.index(name)?;
        Ok(self.rows[row].get(i).unwrap_or("").trim())
    }

    /// Row `row`'s number in column `name` ("-", "NaN" and an empty field read as NaN:
    /// the commands' mark of a value they could not measure).
    pub fn number(&self, row: usize, name: &str) -> Result<f64> {
        let t = self.text(row, name)?;
        if t.is_empty() || t == "-" {
            return Ok(f64::NAN);
        }
        t.parse().map_err(|_| {
            Error::format(
                &self.path,
                format!("row {}, column `{name}`: {t:?} is not a number", row + 2),
            )
        })
    }

    /// Row `row`'s true/false in column `name`.
    pub fn flag(&self, row: usize, name: &str) -> Result<bool> {
        match self.text(row, name)? {
            "true" => Ok(true),
            "false" => Ok(false),
            t => Err(Error::format(
                &self.path,
                format!(
                    "row {}, column `{name}`: {t:?} is not true or false",
                    row + 2
                ),
            )),
        }
    }

    /// Column `name`'s value if the table has the column and it is the same in every
    /// row; `None` without the column; an error if the rows differ.
    pub fn constant(&self, name: &str) -> Result<Option<String>> {
        if !self.has(name) {
            return Ok(None);
        }
        let first = self.text(0, name)?.to_string();
        for row in 1..self.len() {
            if self.text(row, name)? != first {
                return Err(Error::format(
                    &self.path,
                    format!("column `{name}` differs between rows; one chart needs one value"),
                ));
            }
        }
        Ok(Some(first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_by_name_and_errors_that_say_where() {
        let t = Table::parse(
            Path::new("t.csv"),
            b"name,value,ok\n\"a, b\",1.5,true\nc,-,false\nd,x,maybe\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.text(0, "name").unwrap(), "a, b");
        assert_eq!(t.number(0, "value").unwrap(), 1.5);
        assert!(t.number(1, "value").unwrap().is_nan());
        let e = t.number(2, "value").unwrap_err().to_string();
        assert!(e.contains("row 4") && e.contains("`value`"), "{e}");
        assert!(t.flag(0, "ok").unwrap() && !t.flag(1, "ok").unwrap());
        assert!(t.flag(2, "ok").is_err());
        assert!(t.text(0, "missing").is_err());
        assert!(t.constant("name").is_err());
        assert_eq!(t.constant("missing").unwrap(), None);
        assert!(Table::parse(Path::new("e.csv"), b"a,b\n").is_err());
    }
}
