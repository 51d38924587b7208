//! Tick labels of the chart axes, one formatter per kind of axis: counts (iterations,
//! sweeps, GPUs, threads) as whole numbers, log axes as powers of ten ("1e-5"), linear
//! axes in the fewest digits that tell the ticks apart. The plotting library's own
//! labels print its floating-point tick values as they are (`10.0` for a count,
//! `9999999e-6` for a power of ten reached by repeated multiplication).

/// Significant digits kept by `plain` and `log`: enough for any tick a chart places
/// (steps of 1, 2 or 5 times a power of ten), few enough to drop the rounding noise of
/// the tick arithmetic (0.30000000000000004, 9.999999e-6).
const DIGITS: i32 = 6;

/// `v` rounded to `digits` significant digits (0 stays 0).
fn round_significant(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// A label on a count axis: a whole number ("10" for 10.0), or no label ("") for a tick
/// between two counts (2.5 GPUs means nothing).
pub fn count(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let r = v.round();
    if (v - r).abs() <= 1e-9 * r.abs().max(1.0) {
        format!("{}", r as i64)
    } else {
        String::new()
    }
}

/// A label on a linear axis: at most six significant digits, no trailing zeros
/// ("1" for 1.0, "0.125", "0.3" for 0.30000000000000004, "1200" for 1200.0).
pub fn plain(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let r = round_significant(v, DIGITS);
    if r == 0.0 {
        return "0".into();
    }
    let decimals = (DIGITS - 1 - r.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{r:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A label on a log axis: a power of ten as "1e-5" (and 1 to 10000 written out: "1",
/// "10", "10000"), another value as its mantissa and exponent ("2e-6", "2.5e-6"); the
/// value is rounded to six significant digits first, so 9.999999e-6 reads "1e-5".
/// Nothing ("") for a value a log axis cannot hold (zero, negative, not finite).
pub fn log(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let r = round_significant(v, DIGITS);
    let exponent = r.log10().floor() as i32;
    // The mantissa of the rounded value, itself rounded (r / 10^k may be 2.4999999).
    let mantissa = round_significant(r / 10f64.powi(exponent), DIGITS);
    let (mantissa, exponent) = if mantissa >= 10.0 {
        (mantissa / 10.0, exponent + 1)
    } else {
        (mantissa, exponent)
    };
    if (0..=4).contains(&exponent) {
        return plain(r);
    }
    format!("{}e{exponent}", plain(mantissa))
}

/// A measured value written beside its point: whole from 100 up ("8588"), else three
/// significant digits ("2.57", "0.937", "0.0224").
pub fn value(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v.abs() >= 100.0 {
        return format!("{}", v.round() as i64);
    }
    plain(round_significant(v, 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected strings: the conventions stated in each formatter's comment.
    #[test]
    fn count_axes_read_whole_numbers_and_no_half_gpus() {
        assert_eq!(count(10.0), "10");
        assert_eq!(count(0.0), "0");
        assert_eq!(count(4.0), "4");
        assert_eq!(count(1200.0), "1200");
        // Tick arithmetic noise on a whole number is still that number.
        assert_eq!(count(3.0000000000000004), "3");
        assert_eq!(count(-2.0), "-2");
        // A tick between counts gets no label.
        assert_eq!(count(1.5), "");
        assert_eq!(count(2.5), "");
        assert_eq!(count(f64::NAN), "");
    }

    #[test]
    fn log_axes_read_powers_of_ten() {
        assert_eq!(log(1e-5), "1e-5");
        assert_eq!(log(1e-10), "1e-10");
        assert_eq!(log(0.1), "1e-1");
        assert_eq!(log(1.0), "1");
        assert_eq!(log(10.0), "10");
        assert_eq!(log(10000.0), "10000");
        assert_eq!(log(1e5), "1e5");
        assert_eq!(log(2e-6), "2e-6");
        assert_eq!(log(2.5e-6), "2.5e-6");
        assert_eq!(log(300.0), "300");
        assert_eq!(log(0.0), "");
        assert_eq!(log(-1.0), "");
    }

    /// The labels the plotting library printed as `9999999e-5` and `9999999e-6`: powers
    /// of ten reached by repeated multiplication, a few units in the last place below
    /// 1e-4 and 1e-5 (and above, for the other rounding direction).
    #[test]
    fn a_power_of_ten_off_by_rounding_reads_as_that_power() {
        // 1e-11 times 10, seven times: not exactly 1e-4 in binary floating point.
        let mut v = 1e-11;
        for _ in 0..7 {
            v *= 10.0;
        }
        assert_ne!(v, 1e-4, "the product is off in the last place");
        assert_eq!(log(v), "1e-4");
        assert_eq!(log(0.999_999_9e-5), "1e-5");
        assert_eq!(log(9.999_999e-6), "1e-5");
        assert_eq!(log(1.000_000_1e-6), "1e-6");
        assert_eq!(log(99_999.999), "1e5");
    }

    #[test]
    fn values_beside_points_read_three_digits() {
        assert_eq!(value(8588.0), "8588");
        assert_eq!(value(2.5679), "2.57");
        assert_eq!(value(0.93716), "0.937");
        assert_eq!(value(0.022411), "0.0224");
        assert_eq!(value(1.0), "1");
        assert_eq!(value(f64::NAN), "");
    }

    #[test]
    fn linear_axes_drop_trailing_zeros_and_rounding_noise() {
        assert_eq!(plain(1.0), "1");
        assert_eq!(plain(0.93), "0.93");
        assert_eq!(plain(0.125), "0.125");
        assert_eq!(plain(0.1 + 0.2), "0.3");
        assert_eq!(plain(200.0), "200");
        assert_eq!(plain(0.0), "0");
        assert_eq!(plain(-0.5), "-0.5");
        assert_eq!(plain(0.5936), "0.5936");
    }
}
