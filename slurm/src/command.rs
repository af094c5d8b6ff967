//! Slurm's commands as the loop runs them: bounded in time and in what they print, so a
//! slurmctld that hangs or a command that floods its output fails one pass, never stalls
//! the loop or exhausts its memory.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long one Slurm command may take (Slurm's own commands retry a slurmctld that is
/// restarting for about a minute before giving up).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Why a command gave no output to read: the command as run, and what went wrong.
#[derive(Debug)]
pub struct CommandError {
    /// The command line, its words joined by spaces.
    pub command: String,
    pub failure: Failure,
}

/// What went wrong with a command.
#[derive(Debug)]
pub enum Failure {
    /// No words to run.
    Empty,
    /// It could not be started.
    DoesNotRun(std::io::Error),
    /// Its output or its status could not be read.
    Io(std::io::Error),
    /// The thread reading its output ended without its output.
    OutputLost,
    /// It printed more than the limit (then it is stopped).
    TooMuch {
        limit: u64,
    },
    /// It ran past its time (then it is stopped).
    TimedOut {
        seconds: u64,
    },
    /// It exited with a failure.
    Failed(ExitStatus),
    NotUtf8,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.command;
        match &self.failure {
            Failure::Empty => write!(f, "no command"),
            Failure::DoesNotRun(e) => write!(f, "`{c}` does not run: {e}"),
            Failure::Io(e) => write!(f, "`{c}`: {e}"),
            Failure::OutputLost => write!(f, "`{c}`: its output could not be read"),
            Failure::TooMuch { limit } => write!(f, "`{c}` wrote more than {limit} bytes"),
            Failure::TimedOut { seconds } => write!(f, "`{c}` took longer than {seconds} s and was stopped"),
            Failure::Failed(status) => write!(f, "`{c}` failed ({status})"),
            Failure::NotUtf8 => write!(f, "`{c}` wrote what is not UTF-8 text"),
        }
    }
}

impl std::error::Error for CommandError {}

/// Runs `argv` (its standard error passed through), within `timeout` and `limit` bytes of
/// standard output; its output when it succeeds.
pub fn run(argv: &[String], timeout: Duration, limit: u64) -> Result<String, CommandError> {
    let shown = argv.join(" ");
    let fail = |failure| CommandError { command: shown.clone(), failure };
    let (program, args) = argv.split_first().ok_or_else(|| fail(Failure::Empty))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // A group of its own: stopping it stops what it started too (which would
        // otherwise hold its output open).
        .process_group(0)
        .spawn()
        .map_err(|e| fail(Failure::DoesNotRun(e)))?;
    // Read on a thread of its own, so the clock below can stop a command that never ends.
    let out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let read = out.map_or(Ok(0), |o| o.take(limit + 1).read_to_end(&mut text));
        (read, text)
    });
    let deadline = Instant::now() + timeout;
    let mut reader = Some(reader);
    let mut output = None;
    let status = loop {
        // Output read to its end, or to past the limit (then the command is stopped: it
        // would block on a full pipe).
        if reader.as_ref().is_some_and(|r| r.is_finished()) {
            let (read, text) = reader.take().map(|r| r.join()).and_then(Result::ok).unwrap_or((Ok(0), Vec::new()));
            read.map_err(|e| fail(Failure::Io(e)))?;
            if text.len() as u64 > limit {
                stop(&mut child);
                return Err(fail(Failure::TooMuch { limit }));
            }
            output = Some(text);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                // Killed and reaped: its pipe closes, so the reader ends too.
                stop(&mut child);
                if let Some(r) = reader {
                    let _ = r.join();
                }
                return Err(fail(Failure::TimedOut { seconds: timeout.as_secs() }));
            }
            Err(e) => return Err(fail(Failure::Io(e))),
        }
    };
    let text = match (output, reader) {
        (Some(text), _) => text,
        (None, Some(r)) => {
            let (read, text) = r.join().map_err(|_| fail(Failure::OutputLost))?;
            read.map_err(|e| fail(Failure::Io(e)))?;
            text
        }
        (None, None) => Vec::new(),
    };
    if text.len() as u64 > limit {
        return Err(fail(Failure::TooMuch { limit }));
    }
    if !status.success() {
        return Err(fail(Failure::Failed(status)));
    }
    String::from_utf8(text).map_err(|_| fail(Failure::NotUtf8))
}

/// Kills a command and every process of its group, and reaps it.
fn stop(child: &mut Child) {
    if let Some(pid) = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether a character, printed raw, would act on a terminal or break the line it is on:
/// what gpol escapes everywhere (control characters, bidirectional overrides:
/// [`gpol_compiler::terminal::needs_escape`]), and newlines, tabs and the line and
/// paragraph separators, which would start what looks like another line of output.
fn acts_on_terminal(c: char) -> bool {
    gpol_compiler::terminal::needs_escape(c) || matches!(c, '\n' | '\t' | '\u{2028}' | '\u{2029}')
}

/// Text from Slurm or a user (a job name, a node name, an account, a reason) as it may be
/// printed on one line: each character that would act on a terminal written as its
/// `\u{…}` escape, as gpol shows such text everywhere, so a job named `\x1b[2J` or with a
/// newline cannot clear the screen or forge a line of output.
pub fn printable(s: &str) -> String {
    if !s.chars().any(acts_on_terminal) {
        return s.to_string();
    }
    s.chars().map(|c| if acts_on_terminal(c) { format!("\\u{{{:x}}}", u32::from(c)) } else { c.to_string() }).collect()
}

/// A word as a shell reads it back: bare when it holds only plain characters, else in
/// single quotes — or, when it holds a character that would act on a terminal, in bash's
/// `$'…'` quotes with that character escaped, so the printed command is one line that
/// reads back as the same word and shows what it holds.
pub fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./,:@".contains(c)) {
        w.to_string()
    } else if w.chars().any(acts_on_terminal) {
        let body: String = w
            .chars()
            .map(|c| match c {
                '\\' | '\'' => format!("\\{c}"),
                // Each byte of its UTF-8 as `\xHH`, which bash reads back the same in every
                // locale (`\u` depends on the locale's encoding).
                c if acts_on_terminal(c) => {
                    let mut bytes = [0; 4];
                    c.encode_utf8(&mut bytes).bytes().map(|b| format!("\\x{b:02x}")).collect()
                }
                c => c.to_string(),
            })
            .collect();
        format!("$'{body}'")
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_command_is_bounded_in_time_and_output() {
        assert_eq!(run(&sh("echo hi"), TIMEOUT, 100).expect("runs"), "hi\n");
        let said = |argv: &[String], timeout, limit| run(argv, timeout, limit).expect_err("fails").to_string();
        let slow = said(&sh("sleep 30"), Duration::from_millis(200), 100);
        assert!(slow.contains("took longer than"), "{slow}");
        let flood = said(&sh("yes"), TIMEOUT, 1000);
        assert!(flood.contains("wrote more than 1000 bytes"), "{flood}");
        assert!(said(&sh("exit 3"), TIMEOUT, 100).contains("failed"));
        assert!(said(&["/no/such/command".into()], TIMEOUT, 100).contains("does not run"));
    }

    #[test]
    fn text_that_would_act_on_a_terminal_is_printed_escaped() {
        assert_eq!(printable("train-1 é"), "train-1 é");
        assert_eq!(printable("x\u{1b}[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(printable("a\nplace job 9 (evil) on gpu-0\r"), "a\\u{a}place job 9 (evil) on gpu-0\\u{d}");
        assert_eq!(printable("\u{202e}gnp.exe\u{2028}"), "\\u{202e}gnp.exe\\u{2028}");
    }

    /// Each word printed, read back by bash: the same bytes, on one line, with no byte that
    /// acts on a terminal.
    #[test]
    fn shell_words_read_back_as_themselves_and_print_on_one_line() {
        let words = [
            "plain-1",
            "has space",
            "it's",
            "x\u{1b}[2J\u{1b}]0;title\u{7}",
            "two\nlines",
            "tab\there",
            "back\\slash and 'quote'\n",
            "\u{202e}rtl\u{2028}sep é\u{85}",
            "",
        ];
        for w in words {
            let quoted = shell_word(w);
            assert!(!quoted.chars().any(acts_on_terminal), "{quoted:?}");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("printf %s {quoted}")])
                .env("LC_ALL", "C")
                .output()
                .expect("bash runs");
            assert_eq!(String::from_utf8_lossy(&out.stdout), w, "{quoted}");
        }
    }
}
