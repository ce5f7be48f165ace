//! A small, strict reader and writer for NumPy `.npy` files: little-endian floating-point arrays
//! in C order, the only kind `wavefuse run --input/--output` exchanges.
//!
//! Read: format versions 1.0, 2.0 and 3.0; dtypes `<f2`, `<f4` and `<f8` (`|`/`=` byte orders
//! are accepted only where they mean little-endian on every machine we run on, i.e. never for
//! floats: a float array must say `<`). Rejected with a message saying what was found and how
//! to fix it: big-endian data, Fortran order (for more than one axis), other dtypes, object
//! arrays, a header that is not the dict NumPy writes, and a data section that is shorter or
//! longer than the shape says.
//!
//! Write: FP16 only (`<f2`), version 1.0, header padded to a multiple of 64 bytes as NumPy does.
//!
//! Why not a crate: `npyz` is maintained but parses the header with a general Python-literal
//! parser (`py_literal`, `pest`, `num-bigint`), a large build for three keys; the format is
//! fixed and tiny (numpy/lib/format.py).

use std::fmt;
use std::path::{Path, PathBuf};

use half::f16;

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Element type of an array read from a `.npy` file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NpyDtype {
    /// `<f2`: IEEE binary16.
    F16,
    /// `<f4`: IEEE binary32.
    F32,
    /// `<f8`: IEEE binary64.
    F64,
}

impl NpyDtype {
    fn bytes(self) -> usize {
        match self {
            NpyDtype::F16 => 2,
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            NpyDtype::F16 => "<f2",
            NpyDtype::F32 => "<f4",
            NpyDtype::F64 => "<f8",
        }
    }
}

impl fmt::Display for NpyDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            NpyDtype::F16 => "float16",
            NpyDtype::F32 => "float32",
            NpyDtype::F64 => "float64",
        };
        write!(f, "{name} ('{}')", self.descr())
    }
}

/// An array read from a `.npy` file: values widened exactly to f64, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The element type stored in the file.
    pub dtype: NpyDtype,
    /// Shape, outermost axis first (empty for a 0-d array).
    pub shape: Vec<usize>,
    /// Values in C order, each exactly the stored value.
    pub data: Vec<f64>,
}

/// A `.npy` file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}", path = path.display())]
pub struct NpyError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, and what was expected.
    pub what: NpyProblem,
}

/// What is wrong with a `.npy` file (or the values to write), and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum NpyProblem {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// The file could not be written.
    #[error("cannot write: {0}")]
    Write(std::io::Error),
    /// The values to write do not fill the shape.
    #[error("shape {shape:?} holds {len} values but {given} were given")]
    ShapeLength {
        /// The shape.
        shape: Vec<usize>,
        /// The values it holds.
        len: usize,
        /// The values given.
        given: usize,
    },
    /// The shape's byte count overflows.
    #[error("shape {0:?} is too large")]
    TooLarge(Vec<usize>),
    /// The data section is not as long as the shape says.
    #[error(
        "{} file{}: shape {shape:?} of {dtype} needs {want} data bytes, found {found}",
        if found < want { "truncated" } else { "corrupt" },
        if found < want { "" } else { " (trailing bytes)" }
    )]
    DataLength {
        /// The shape.
        shape: Vec<usize>,
        /// The element type.
        dtype: NpyDtype,
        /// The bytes the shape needs.
        want: usize,
        /// The bytes found.
        found: usize,
    },
    /// The file does not start with the magic string.
    #[error("not a .npy file (missing the \\x93NUMPY magic string)")]
    NoMagic,
    /// A version 2.0/3.0 file too short for its header length.
    #[error("truncated file: the header length is cut off")]
    HeaderLengthCut,
    /// A format version other than 1.0, 2.0, 3.0.
    #[error("unsupported .npy format version {0}.{1} (1.0, 2.0, 3.0 are)")]
    Version(u8, u8),
    /// The file ends inside the header.
    #[error("truncated file: the header declares {0} bytes, the file ends before")]
    HeaderCut(usize),
    /// The header is not UTF-8.
    #[error("the header is not text")]
    HeaderNotText,
    /// The header is not the dict NumPy writes.
    #[error("malformed header ({why}): {header}")]
    Malformed {
        /// What is wrong.
        why: String,
        /// The header text.
        header: String,
    },
    /// A multi-axis array in Fortran order.
    #[error("Fortran-order array of shape {0:?}: save a C-order copy (np.ascontiguousarray(x))")]
    FortranOrder(Vec<usize>),
    /// A big-endian dtype (`.0` is its descr).
    #[error("big-endian dtype '{0}': save a little-endian copy (x.astype('<{size}'))", size = &.0[1..])]
    BigEndian(String),
    /// An object array.
    #[error("object array (pickled Python objects): save a float16 or float32 array")]
    Object,
    /// Any other dtype.
    #[error("dtype '{0}' is not accepted: expected float16 ('<f2') or float32 ('<f4')")]
    Dtype(String),
}

/// Read a `.npy` file.
pub fn read(path: &Path) -> Result<NpyArray, NpyError> {
    let bytes = std::fs::read(path).map_err(|e| err(path, NpyProblem::Read(e)))?;
    parse(&bytes).map_err(|what| err(path, what))
}

/// Write FP16 values as a `.npy` file of the given shape. Each value is rounded to FP16
/// (nearest-even; exact for values that already are FP16).
pub fn write_f16(path: &Path, shape: &[usize], values: &[f64]) -> Result<(), NpyError> {
    let bytes = to_bytes_f16(shape, values).map_err(|what| err(path, what))?;
    // Atomic: a failed write (a full disk) leaves any previous file as it was.
    crate::outputs::atomic_write(path, &bytes).map_err(|e| err(path, NpyProblem::Write(e)))
}

/// The bytes of an FP16 `.npy` file (version 1.0).
pub fn to_bytes_f16(shape: &[usize], values: &[f64]) -> Result<Vec<u8>, NpyProblem> {
    let len: usize = shape.iter().product();
    if len != values.len() {
        return Err(NpyProblem::ShapeLength {
            shape: shape.to_vec(),
            len,
            given: values.len(),
        });
    }
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f2', 'fortran_order': False, 'shape': {tuple}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 2 * len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in values {
        out.extend_from_slice(&f16::from_f64(v).to_le_bytes());
    }
    Ok(out)
}

fn err(path: &Path, what: NpyProblem) -> NpyError {
    NpyError {
        path: path.to_owned(),
        what,
    }
}

/// Parse the bytes of a `.npy` file.
pub fn parse(bytes: &[u8]) -> Result<NpyArray, NpyProblem> {
    let (header, data) = split_header(bytes)?;
    let h = Header::parse(header)?;
    let len = h.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let want = len
        .and_then(|l| l.checked_mul(h.dtype.bytes()))
        .ok_or_else(|| NpyProblem::TooLarge(h.shape.clone()))?;
    if data.len() != want {
        return Err(NpyProblem::DataLength {
            shape: h.shape,
            dtype: h.dtype,
            want,
            found: data.len(),
        });
    }
    Ok(NpyArray {
        dtype: h.dtype,
        shape: h.shape,
        data: decode(h.dtype, data),
    })
}

/// The header text and the data section.
fn split_header(bytes: &[u8]) -> Result<(&str, &[u8]), NpyProblem> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(NpyProblem::NoMagic);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start) = match (major, minor) {
        (1, 0) => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        (2 | 3, 0) if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        (2 | 3, 0) => return Err(NpyProblem::HeaderLengthCut),
        _ => return Err(NpyProblem::Version(major, minor)),
    };
    let header = bytes
        .get(start..start + len)
        .ok_or(NpyProblem::HeaderCut(len))?;
    let header = std::str::from_utf8(header).map_err(|_| NpyProblem::HeaderNotText)?;
    Ok((header, &bytes[start + len..]))
}

/// The three keys of a `.npy` header.
struct Header {
    dtype: NpyDtype,
    shape: Vec<usize>,
}

impl Header {
    fn parse(text: &str) -> Result<Self, NpyProblem> {
        let bad = |why: &str| NpyProblem::Malformed {
            why: why.to_owned(),
            header: text.trim_end().to_owned(),
        };
        let body = text
            .trim()
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(|| bad("not a dict"))?;
        let mut p = Lexer { s: body };
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        while !p.at_end() {
            let key = p.string().ok_or_else(|| bad("expected a quoted key"))?;
            p.expect(':').ok_or_else(|| bad("expected ':'"))?;
            match key {
                "descr" => descr = Some(p.string().ok_or_else(|| bad("descr is not a string"))?),
                "fortran_order" => {
                    fortran = Some(
                        p.boolean()
                            .ok_or_else(|| bad("fortran_order is not True/False"))?,
                    )
                }
                "shape" => {
                    shape = Some(
                        p.tuple()
                            .ok_or_else(|| bad("shape is not a tuple of integers"))?,
                    )
                }
                other => return Err(bad(&format!("unknown key '{other}'"))),
            }
            if p.expect(',').is_none() && !p.at_end() {
                return Err(bad("expected ','"));
            }
        }
        let descr = descr.ok_or_else(|| bad("no 'descr'"))?;
        let shape: Vec<usize> = shape.ok_or_else(|| bad("no 'shape'"))?;
        if fortran.ok_or_else(|| bad("no 'fortran_order'"))?
            && shape.iter().filter(|&&d| d != 1).count() > 1
        {
            return Err(NpyProblem::FortranOrder(shape));
        }
        Ok(Header {
            dtype: dtype(descr)?,
            shape,
        })
    }
}

fn dtype(descr: &str) -> Result<NpyDtype, NpyProblem> {
    match descr {
        "<f2" => Ok(NpyDtype::F16),
        "<f4" => Ok(NpyDtype::F32),
        "<f8" => Ok(NpyDtype::F64),
        ">f2" | ">f4" | ">f8" => Err(NpyProblem::BigEndian(descr.to_owned())),
        "|O" => Err(NpyProblem::Object),
        other => Err(NpyProblem::Dtype(other.to_owned())),
    }
}

fn decode(dtype: NpyDtype, data: &[u8]) -> Vec<f64> {
    match dtype {
        NpyDtype::F16 => data
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        NpyDtype::F32 => data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect(),
        NpyDtype::F64 => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    }
}

/// A cursor over the inside of the header dict: Python literals as NumPy writes them.
struct Lexer<'a> {
    s: &'a str,
}

impl<'a> Lexer<'a> {
    fn skip_ws(&mut self) {
        self.s = self.s.trim_start();
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.s.is_empty()
    }

    fn expect(&mut self, c: char) -> Option<()> {
        self.skip_ws();
        self.s = self.s.strip_prefix(c)?;
        Some(())
    }

    fn string(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let quote = self.s.chars().next().filter(|&q| q == '\'' || q == '"')?;
        let rest = &self.s[1..];
        let end = rest.find(quote)?;
        self.s = &rest[end + 1..];
        Some(&rest[..end])
    }

    fn boolean(&mut self) -> Option<bool> {
        self.skip_ws();
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.s.strip_prefix(word) {
                self.s = rest;
                return Some(value);
            }
        }
        None
    }

    fn tuple(&mut self) -> Option<Vec<usize>> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            self.skip_ws();
            if let Some(rest) = self.s.strip_prefix(')') {
                self.s = rest;
                return Some(dims);
            }
            let digits = self
                .s
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(self.s.len());
            dims.push(self.s[..digits].parse().ok()?);
            self.s = &self.s[digits..];
            if self.expect(',').is_none() {
                self.expect(')')?;
                return Some(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header exactly as `np.save` writes it for a float32 array of shape (2, 3).
    fn numpy_f32() -> Vec<u8> {
        let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".to_string();
        header.push_str(&" ".repeat(128 - 10 - header.len() - 1));
        header.push('\n');
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        for v in [1.0f32, -2.5, 0.1, 3.0, 4.0, 65504.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_a_numpy_float32_file() {
        let a = parse(&numpy_f32()).unwrap();
        assert_eq!(a.dtype, NpyDtype::F32);
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data[2], f64::from(0.1f32));
    }

    #[test]
    fn f16_round_trips_with_a_64_byte_aligned_header() {
        let values = [1.0, -0.5, 0.0999755859375, 65504.0];
        for shape in [vec![4], vec![1, 4], vec![2, 2]] {
            let bytes = to_bytes_f16(&shape, &values).unwrap();
            assert_eq!((bytes.len() - 8) % 64, 0, "header padded: {}", bytes.len());
            let a = parse(&bytes).unwrap();
            assert_eq!(
                (a.dtype, a.shape, a.data),
                (NpyDtype::F16, shape, values.to_vec())
            );
        }
    }

    #[test]
    fn invalid_truncated_data_says_how_many_bytes() {
        let mut b = numpy_f32();
        b.truncate(b.len() - 3);
        let e = parse(&b).unwrap_err().to_string();
        assert!(
            e.contains("truncated") && e.contains("needs 24 data bytes, found 21"),
            "{e}"
        );
    }

    #[test]
    fn invalid_big_endian_and_fortran_order_are_rejected() {
        let swap = |from: &str, to: &str| {
            let mut b = numpy_f32();
            let at = b
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .unwrap();
            b[at..at + from.len()].copy_from_slice(to.as_bytes());
            parse(&b).unwrap_err().to_string()
        };
        assert!(swap("'<f4'", "'>f4'").contains("big-endian"));
        assert!(swap("False", "True ").contains("Fortran-order"));
        assert!(swap("'<f4'", "'<i4'").contains("'<i4' is not accepted"));
    }
}
