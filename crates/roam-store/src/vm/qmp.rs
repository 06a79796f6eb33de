//! A QMP connection (QEMU's JSON control protocol, on the guest's `qmp.sock`): one command at a
//! time and its `return`, events skipped.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::VmError;

/// A QMP connection: one command at a time, events skipped.
pub(super) struct Qmp {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Qmp {
    /// Connect to the socket at `path`, check QEMU's greeting and enter command mode.
    pub(super) fn connect(path: &Path) -> Result<Qmp, VmError> {
        let io = |error| VmError::Io {
            what: format!("QMP {}", path.display()),
            error,
        };
        let s = UnixStream::connect(path).map_err(io)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(io)?;
        let w = s.try_clone().map_err(io)?;
        let mut q = Qmp {
            r: BufReader::new(s),
            w,
        };
        let greeting = q.read()?;
        if greeting.get("QMP").is_none() {
            return Err(VmError::Qmp(format!(
                "{}: not a QMP greeting: {greeting}",
                path.display()
            )));
        }
        q.run("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    /// The next message that is not an event.
    fn read(&mut self) -> Result<Value, VmError> {
        loop {
            let mut line = String::new();
            let n = self.r.read_line(&mut line).map_err(|error| VmError::Io {
                what: "reading QMP".into(),
                error,
            })?;
            if n == 0 {
                return Err(VmError::Qmp("QEMU closed its QMP socket".into()));
            }
            let v: Value = serde_json::from_str(&line).map_err(|e| {
                VmError::Qmp(format!("QMP sent what is not JSON ({e}): {}", line.trim()))
            })?;
            if v.get("event").is_none() {
                return Ok(v);
            }
        }
    }

    /// Run `cmd`; its `return`, or [`VmError::Refused`] with its error's description.
    pub(super) fn run(&mut self, cmd: &str, args: Value) -> Result<Value, VmError> {
        let msg = json!({ "execute": cmd, "arguments": args });
        writeln!(self.w, "{msg}").map_err(|error| VmError::Io {
            what: format!("QMP {cmd}"),
            error,
        })?;
        let v = self.read()?;
        if let Some(e) = v.get("error") {
            return Err(VmError::Refused {
                cmd: cmd.to_string(),
                desc: e
                    .get("desc")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
            });
        }
        Ok(v.get("return").cloned().unwrap_or(Value::Null))
    }
}
