//! Gauge and spinor file formats, one file per format. Each reader verifies everything its
//! format carries and refuses a file that disagrees, naming what differed.
