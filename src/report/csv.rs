//! CSV tables written through the `csv` crate, which quotes a field holding a comma, a
//! quote or a line break (a hand-written writer left `ablation.csv`'s geometry column,
//! "block 64, multiple 8", split over two columns).

/// The CSV text of a table: `header`, then one record a row, each of `header.len()`
/// fields (a row of another length is an internal error: writing to memory fails on
/// nothing else).
pub fn table(
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> crate::Result<String> {
    let bad = |e: csv::Error| crate::Error::internal(format!("a CSV table: {e}"));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).map_err(bad)?;
    for row in rows {
        w.write_record(&row).map_err(bad)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| crate::Error::internal(format!("a CSV table: {e}")))?;
    String::from_utf8(bytes).map_err(|e| crate::Error::internal(format!("a CSV table: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_field_with_commas_and_quotes_reads_back_as_one_field() {
        // Expected: RFC 4180 quoting, read back by the same crate's reader.
        let s = super::table(
            &["a", "b", "c"],
            [vec![
                "1".to_string(),
                "block 64, multiple 8".to_string(),
                "say \"hi\"".to_string(),
            ]],
        )
        .unwrap();
        assert_eq!(s, "a,b,c\n1,\"block 64, multiple 8\",\"say \"\"hi\"\"\"\n");
        let mut r = csv::Reader::from_reader(s.as_bytes());
        let rec = r.records().next().unwrap().unwrap();
        assert_eq!(rec.len(), 3);
        assert_eq!(&rec[1], "block 64, multiple 8");
        assert_eq!(&rec[2], "say \"hi\"");
        // A row of another length is an error, not a panic.
        assert!(super::table(&["a", "b"], [vec!["1".to_string()]]).is_err());
    }
}
