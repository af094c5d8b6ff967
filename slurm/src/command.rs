//! Slurm's commands as the loop runs them: bounded in time and in what they print, so a
//! slurmctld that hangs or a command that floods its output fails one pass, never stalls
//! the loop or exhausts its memory.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one Slurm command may take (Slurm's own commands retry a slurmctld that is
/// restarting for about a minute before giving up).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `argv` (its standard error passed through), within `timeout` and `limit` bytes of
/// standard output; its output when it succeeds.
pub fn run(argv: &[String], timeout: Duration, limit: u64) -> Result<String, String> {
    let shown = argv.join(" ");
    let (program, args) = argv.split_first().ok_or("no command")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // A group of its own: stopping it stops what it started too (which would
        // otherwise hold its output open).
        .process_group(0)
        .spawn()
        .map_err(|e| format!("`{shown}` does not run: {e}"))?;
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
            read.map_err(|e| format!("`{shown}`: {e}"))?;
            if text.len() as u64 > limit {
                stop(&mut child);
                return Err(format!("`{shown}` wrote more than {limit} bytes"));
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
                return Err(format!("`{shown}` took longer than {} s and was stopped", timeout.as_secs()));
            }
            Err(e) => return Err(format!("`{shown}`: {e}")),
        }
    };
    let text = match (output, reader) {
        (Some(text), _) => text,
        (None, Some(r)) => {
            let (read, text) = r.join().map_err(|_| format!("`{shown}`: its output could not be read"))?;
            read.map_err(|e| format!("`{shown}`: {e}"))?;
            text
        }
        (None, None) => Vec::new(),
    };
    if text.len() as u64 > limit {
        return Err(format!("`{shown}` wrote more than {limit} bytes"));
    }
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})"));
    }
    String::from_utf8(text).map_err(|_| format!("`{shown}` wrote what is not UTF-8 text"))
}

/// Kills a command and every process of its group, and reaps it.
fn stop(child: &mut Child) {
    if let Some(pid) = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A word as a shell reads it back (quoted when it holds anything but plain characters).
pub fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./,:@".contains(c)) {
        w.to_string()
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
        assert_eq!(run(&sh("echo hi"), TIMEOUT, 100), Ok("hi\n".into()));
        let slow = run(&sh("sleep 30"), Duration::from_millis(200), 100).expect_err("stopped");
        assert!(slow.contains("took longer than"), "{slow}");
        let flood = run(&sh("yes"), TIMEOUT, 1000).expect_err("too much");
        assert!(flood.contains("wrote more than 1000 bytes"), "{flood}");
        assert!(run(&sh("exit 3"), TIMEOUT, 100).expect_err("failed").contains("failed"));
        assert!(run(&["/no/such/command".into()], TIMEOUT, 100).expect_err("missing").contains("does not run"));
    }
}
