//! A solver's fields, kept across runs: a mixed-precision solve restarts its inner solver
//! at every reliable update, and allocating the fields anew each time would put device
//! allocations in the solve. Field 0 is the solution by convention; a reused workspace
//! sets it to zero in place (`Space::set_zero`), so no zero field is kept.

use crate::linalg::{Layout, Space};
use crate::Result;

pub struct Workspace<S: Space> {
    fields: Vec<S::Field>,
    layout: Option<Layout>,
}

impl<S: Space> Default for Workspace<S> {
    fn default() -> Self {
        Workspace {
            fields: Vec::new(),
            layout: None,
        }
    }
}

impl<S: Space> Workspace<S> {
    /// `n` fields of `layout`, field 0 (the solution) zero; the others hold whatever the
    /// last run left, so a solver must write each before it reads it.
    pub fn fields(&mut self, space: &mut S, layout: Layout, n: usize) -> Result<&mut [S::Field]> {
        if self.layout != Some(layout) {
            self.fields.clear();
            self.layout = Some(layout);
        } else if let Some(x) = self.fields.first_mut() {
            space.set_zero(x)?;
        }
        while self.fields.len() < n {
            self.fields.push(space.alloc_layout(layout)?);
        }
        Ok(&mut self.fields[..n])
    }

    /// The solution of the last run.
    pub fn solution(&self) -> Option<&S::Field> {
        self.fields.first()
    }

    /// The solution, the rest freed.
    pub fn take_solution(&mut self) -> Option<S::Field> {
        self.layout = None;
        let mut f = std::mem::take(&mut self.fields);
        (!f.is_empty()).then(|| f.swap_remove(0))
    }

    pub fn release(&mut self) {
        self.fields.clear();
        self.layout = None;
    }
}
