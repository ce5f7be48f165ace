//! Indentation of the generated code.

use std::fmt;

/// An indentation level: four spaces each.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Level(usize);

impl Level {
    /// The top level (file scope).
    pub const TOP: Level = Level(0);

    /// One level deeper.
    pub fn next(self) -> Level {
        Level(self.0 + 1)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for _ in 0..self.0 {
            f.write_str("    ")?;
        }
        Ok(())
    }
}
