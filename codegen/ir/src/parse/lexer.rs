//! The lexer: the text of one kernel as a stream of tokens with 1-based line and column.
//!
//! The textual IR is line-oriented: a newline is a token, and `;` starts a comment that runs to
//! the end of the line (the printer's inferred types live there). Lexing is on demand, so the
//! first error reported is the first one in the text.

use super::{Found, ParseError};

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok<'a> {
    /// `[A-Za-z_][A-Za-z0-9_.]*`: keywords, mnemonics (`gemv.row`), entity names, bare names.
    Ident(&'a str),
    /// A run starting with a digit or a sign: `4352`, `1e-6`, `-inf`. Interpreted by the parser,
    /// which knows whether it wants an integer or a float.
    Number(&'a str),
    /// A quoted name, unescaped (`"w up"` → `w up`), with its text as written.
    Str { value: String, text: &'a str },
    /// One of `= , : [ ] ( ) { } < > @`.
    Punct(char),
    /// The end of a line.
    Newline,
    /// The end of the input.
    Eof,
}

/// A token and where it starts.
#[derive(Clone, Debug)]
pub(super) struct Token<'a> {
    pub tok: Tok<'a>,
    pub line: usize,
    pub column: usize,
}

impl Token<'_> {
    /// The token as an error's `found`.
    pub fn found(&self) -> Found {
        match &self.tok {
            Tok::Ident(s) | Tok::Number(s) | Tok::Str { text: s, .. } => Found::token(s),
            Tok::Punct(c) => Found::token(&c.to_string()),
            Tok::Newline => Found::EndOfLine,
            Tok::Eof => Found::EndOfInput,
        }
    }

    /// An error at this token.
    pub fn error(&self, expected: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            column: self.column,
            found: self.found(),
            expected: expected.into(),
            note: None,
        }
    }
}

const PUNCT: &str = "=,:[](){}<>@";

/// Tokens of one text, produced on demand.
pub(super) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: usize,
    column: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer {
            src,
            pos: 0,
            line: 1,
            column: 1,
        }
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    /// Consume characters while `keep(previous, next)` holds; return the consumed text.
    fn take_while(&mut self, start: usize, keep: impl Fn(char, char) -> bool) -> &'a str {
        let mut prev = self.src[start..].chars().next().unwrap_or(' ');
        while let Some(c) = self.peek_char() {
            if !keep(prev, c) {
                break;
            }
            prev = c;
            self.bump();
        }
        &self.src[start..self.pos]
    }

    fn skip_blanks_and_comments(&mut self) {
        while let Some(c) = self.peek_char() {
            match c {
                ' ' | '\t' | '\r' => {
                    self.bump();
                }
                ';' => {
                    while self.peek_char().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                _ => break,
            }
        }
    }

    /// The next token.
    pub fn next_token(&mut self) -> Result<Token<'a>, ParseError> {
        self.skip_blanks_and_comments();
        let (line, column, start) = (self.line, self.column, self.pos);
        let token = |tok| Token { tok, line, column };
        let Some(c) = self.bump() else {
            return Ok(token(Tok::Eof));
        };
        let tok = match c {
            '\n' => Tok::Newline,
            '"' => return self.string(start).map(token),
            c if c.is_ascii_alphabetic() || c == '_' => {
                Tok::Ident(self.take_while(start, |_, c| is_ident_char(c)))
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' => {
                Tok::Number(self.take_while(start, |prev, c| {
                    is_ident_char(c) || (matches!(c, '+' | '-') && matches!(prev, 'e' | 'E'))
                }))
            }
            c if PUNCT.contains(c) => Tok::Punct(c),
            c => {
                let expected = "a name, a number, a punctuation mark or `;`";
                let found = Found::token(&c.escape_debug().to_string());
                return Err(ParseError::new(line, column, found, expected));
            }
        };
        Ok(token(tok))
    }

    /// A quoted name; the opening `"` is consumed. Escapes are those of Rust's `{:?}` of a `str`,
    /// which is how the printer writes a name that is not a bare identifier.
    fn string(&mut self, start: usize) -> Result<Tok<'a>, ParseError> {
        let mut value = String::new();
        loop {
            let (line, column) = (self.line, self.column);
            match self.bump() {
                None => return Err(unclosed(line, column, Found::EndOfInput)),
                Some('\n') => return Err(unclosed(line, column, Found::EndOfLine)),
                Some('"') => break,
                Some('\\') => value.push(self.escape(line, column)?),
                Some(c) => value.push(c),
            }
        }
        let text = &self.src[start..self.pos];
        Ok(Tok::Str { value, text })
    }

    fn escape(&mut self, line: usize, column: usize) -> Result<char, ParseError> {
        let expected = "an escape (`\\\\`, `\\\"`, `\\'`, `\\n`, `\\r`, `\\t`, `\\0` or `\\u{…}`)";
        let bad = |found: Found| ParseError::new(line, column, found, expected);
        let c = match self.bump() {
            Some('\\') => '\\',
            Some('"') => '"',
            Some('\'') => '\'',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('0') => '\0',
            Some('u') => return self.unicode_escape(line, column),
            Some('\n') | None => return Err(bad(Found::EndOfLine)),
            Some(c) => return Err(bad(Found::token(&format!("\\{}", c.escape_debug())))),
        };
        Ok(c)
    }

    fn unicode_escape(&mut self, line: usize, column: usize) -> Result<char, ParseError> {
        let start = self.pos;
        let mut closed = false;
        if self.peek_char() == Some('{') {
            self.bump();
            while let Some(c) = self.peek_char() {
                if c == '}' {
                    self.bump();
                    closed = true;
                    break;
                }
                if !c.is_ascii_hexdigit() || self.pos - start > 8 {
                    break;
                }
                self.bump();
            }
        }
        let text = &self.src[start..self.pos];
        let hex = text.trim_start_matches('{').trim_end_matches('}');
        let c = closed
            .then(|| u32::from_str_radix(hex, 16).ok())
            .flatten()
            .and_then(char::from_u32);
        c.ok_or_else(|| {
            let found = Found::token(&format!("\\u{text}"));
            ParseError::new(line, column, found, "a Unicode escape `\\u{HEX}`")
        })
    }
}

fn unclosed(line: usize, column: usize, found: Found) -> ParseError {
    ParseError::new(line, column, found, "`\"` closing the name")
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Whether the printer may write `name` bare: it lexes as one [`Tok::Ident`].
pub(crate) fn is_bare_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(is_ident_char)
}
