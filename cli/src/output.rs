//! The command's text, on outputs a reader may stop reading at any time.
//!
//! `print!` and `eprint!` panic when a write fails, and a write fails with `BrokenPipe` as
//! soon as the reader of a pipe has gone: `causeway scenarios | head -1` once `head` has its
//! line. A reader that stopped reading wants nothing more, and no message, so [`Stdout`] drops
//! the rest of the text from then on; the command still finishes what it was asked to do (the
//! files it writes, its exit status). Any other failure (a full disk under `> out.txt`) stops
//! the text too and is handed back by [`Stdout::finish`], for the command to report.
//! [`error`] writes to standard error, where a failure leaves nothing to report it on.

use std::fmt;
use std::io::{self, Write};

/// The command's standard output (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct Stdout {
    state: State,
}

#[derive(Debug, Default)]
enum State {
    /// Writing.
    #[default]
    Open,
    /// The reader has gone: the rest is dropped, and that is no error.
    ReaderLeft,
    /// A write failed otherwise: the rest is dropped, and the failure is reported at the end.
    Failed(io::Error),
}

impl Stdout {
    /// Standard output, not yet written to.
    pub fn new() -> Stdout {
        Stdout::default()
    }

    /// Writes `text`, unless an earlier write found the output gone.
    pub fn print(&mut self, text: impl fmt::Display) {
        if let State::Open = self.state {
            let written = write!(io::stdout().lock(), "{text}");
            self.settle(written);
        }
    }

    /// Writes `text` and a newline, unless an earlier write found the output gone.
    pub fn line(&mut self, text: impl fmt::Display) {
        self.print(format_args!("{text}\n"));
    }

    /// Flushes what is buffered; `Err` is the first failure other than the reader leaving.
    pub fn finish(mut self) -> io::Result<()> {
        if let State::Open = self.state {
            let flushed = io::stdout().lock().flush();
            self.settle(flushed);
        }
        match self.state {
            State::Open | State::ReaderLeft => Ok(()),
            State::Failed(error) => Err(error),
        }
    }

    fn settle(&mut self, written: io::Result<()>) {
        match written {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {
                self.state = State::ReaderLeft;
            }
            Err(error) => self.state = State::Failed(error),
        }
    }
}

/// Writes `error: {message}` and a newline to standard error. When standard error itself
/// cannot be written (its reader has gone), there is nowhere left to say so: the message is
/// dropped.
pub fn error(message: impl fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "error: {message}");
}
