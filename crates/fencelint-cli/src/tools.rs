//! Finding NVIDIA's binary tools (`cuobjdump`, `nvdisasm`) and running them safely.
//!
//! Safety rules: a tool is run by absolute path with an argument vector (never through a
//! shell), with stdin closed, stderr captured up to a bound, and a deadline after which the
//! tool's whole process group is killed. The input binary itself is never executed.

use std::ffi::OsString;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

/// The command that installs the tools when none is found.
pub(crate) const INSTALL_HINT: &str = "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm";

/// The most stderr kept for an error message.
const STDERR_CAP: usize = 16 * 1024;

/// How long the `python3` site-packages query may take.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(20);

/// The tools found, by absolute path.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tools {
    pub cuobjdump: Option<PathBuf>,
    pub nvdisasm: Option<PathBuf>,
    /// The directories searched, in order (for error messages).
    pub searched: Vec<PathBuf>,
}

impl Tools {
    /// Searches, in order: `cuda_bin` (the `--cuda-bin` flag), `FENCELINT_CUDA_BIN`, `PATH`,
    /// `CUDA_HOME/bin`, `CUDA_PATH/bin`, `/usr/local/cuda/bin`, then the `nvidia/cu*/bin`
    /// folder of a pip-installed CUDA tools wheel in `python3`'s site-packages or in a
    /// `.cuda-venv` of the current directory. Each tool is taken from the first folder that has
    /// it. When `cuda_bin` is given, only that folder is searched.
    pub(crate) fn discover(cuda_bin: Option<&Path>) -> Self {
        let mut tools = Self::default();
        if let Some(dir) = cuda_bin {
            tools.search_dir(&absolute(dir));
            return tools;
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(dir) = std::env::var_os("FENCELINT_CUDA_BIN").filter(|d| !d.is_empty()) {
            dirs.push(PathBuf::from(dir));
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path).filter(|d| !d.as_os_str().is_empty()));
        }
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            if let Some(home) = std::env::var_os(var).filter(|d| !d.is_empty()) {
                dirs.push(PathBuf::from(home).join("bin"));
            }
        }
        dirs.push(PathBuf::from("/usr/local/cuda/bin"));
        for dir in &dirs {
            tools.search_dir(&absolute(dir));
            if tools.complete() {
                return tools;
            }
        }
        for dir in wheel_dirs(&dirs) {
            tools.search_dir(&dir);
            if tools.complete() {
                break;
            }
        }
        tools
    }

    fn complete(&self) -> bool {
        self.cuobjdump.is_some() && self.nvdisasm.is_some()
    }

    fn search_dir(&mut self, dir: &Path) {
        self.searched.push(dir.to_path_buf());
        if self.cuobjdump.is_none() {
            self.cuobjdump = executable_in(dir, "cuobjdump");
        }
        if self.nvdisasm.is_none() {
            self.nvdisasm = executable_in(dir, "nvdisasm");
        }
    }
}

fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

fn executable_in(dir: &Path, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then(|| absolute(&path))
}

/// `nvidia/cu*/bin` folders of pip wheels: in the site-packages of the first `python3` on the
/// searched folders, and in `.cuda-venv` of the current directory. Newest CUDA first.
fn wheel_dirs(path_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut site_dirs: Vec<PathBuf> = Vec::new();
    if let Ok(venv_lib) = std::fs::read_dir(".cuda-venv/lib") {
        let mut libs: Vec<PathBuf> = venv_lib.filter_map(|e| e.ok().map(|e| e.path())).collect();
        libs.sort();
        site_dirs.extend(libs.into_iter().map(|lib| absolute(&lib.join("site-packages"))));
    }
    if let Some(python) = path_dirs.iter().find_map(|dir| executable_in(dir, "python3")) {
        let script = "import site,sys; print(\"\\n\".join(site.getsitepackages()+[site.getusersitepackages()]))";
        let args = [OsString::from("-c"), OsString::from(script)];
        if let Ok(output) = run_to_end(&python, &args, None, PYTHON_TIMEOUT) {
            let text = String::from_utf8_lossy(&output);
            site_dirs.extend(text.lines().filter(|l| !l.is_empty()).map(PathBuf::from));
        }
    }
    let mut out = Vec::new();
    for site in site_dirs {
        let Ok(entries) = std::fs::read_dir(site.join("nvidia")) else { continue };
        let mut cuda: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with("cu") && n[2..].bytes().all(|b| b.is_ascii_digit()) && n.len() > 2
                })
            })
            .collect();
        // cu13 before cu12: the newest tools read every older cubin.
        cuda.sort_by_key(|p| {
            std::cmp::Reverse(
                p.file_name().and_then(|n| n.to_str()).and_then(|n| n[2..].parse::<u32>().ok()),
            )
        });
        out.extend(cuda.into_iter().map(|dir| dir.join("bin")));
    }
    out
}

/// Why a tool run failed.
#[derive(Debug)]
pub(crate) enum ToolError {
    Spawn(io::Error),
    TimedOut(Duration),
    Failed { status: ExitStatus, stderr: String },
    Io(io::Error),
}

impl ToolError {
    /// A one-line description naming the tool.
    pub(crate) fn describe(&self, tool: &Path) -> String {
        let name = tool
            .file_name()
            .map_or_else(|| tool.display().to_string(), |n| n.to_string_lossy().into_owned());
        match self {
            Self::Spawn(err) => format!("cannot run `{}`: {err}", tool.display()),
            Self::TimedOut(limit) => format!(
                "`{name}` did not finish within {}s and was killed (raise the limit with `--tool-timeout SECS`)",
                limit.as_secs()
            ),
            Self::Failed { status, stderr } => {
                let how = if let Some(code) = status.code() {
                    format!("exited with status {code}")
                } else {
                    use std::os::unix::process::ExitStatusExt;
                    format!("was killed by signal {}", status.signal().unwrap_or(0))
                };
                let stderr = stderr.trim();
                if stderr.is_empty() {
                    format!("`{name}` {how}")
                } else {
                    format!("`{name}` {how}: {stderr}")
                }
            }
            Self::Io(err) => format!("reading the output of `{name}` failed: {err}"),
        }
    }
}

/// A running tool whose stdout is read as a stream.
struct Running {
    child: Child,
    stderr: Receiver<String>,
    deadline: Instant,
    limit: Duration,
}

fn spawn(
    tool: &Path,
    args: &[OsString],
    cwd: Option<&Path>,
    limit: Duration,
) -> Result<(Running, std::process::ChildStdout), ToolError> {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(tool);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout also ends what the tool started.
        .process_group(0);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(ToolError::Spawn)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
    let (stderr_sender, stderr) = mpsc::sync_channel(1);
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            match stderr_pipe.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = STDERR_CAP.saturating_sub(kept.len());
                    kept.extend_from_slice(&buffer[..n.min(room)]);
                }
            }
        }
        let mut text = String::from_utf8_lossy(&kept).into_owned();
        if kept.len() >= STDERR_CAP {
            text.push_str(" [stderr truncated]");
        }
        let _ = stderr_sender.send(text);
    });
    Ok((Running { child, stderr, deadline: Instant::now() + limit, limit }, stdout))
}

impl Running {
    /// Kills the tool and everything in its process group.
    fn kill(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the tool to exit (killing it at the deadline) and checks its status.
    fn finish(mut self) -> Result<(), ToolError> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    // The stderr pipe may be held by a descendant; wait no longer than the deadline.
                    let left = self.deadline.saturating_duration_since(Instant::now());
                    let stderr = self.stderr.recv_timeout(left).unwrap_or_default();
                    return if status.success() {
                        Ok(())
                    } else {
                        Err(ToolError::Failed { status, stderr })
                    };
                }
                Ok(None) if Instant::now() >= self.deadline => {
                    self.kill();
                    return Err(ToolError::TimedOut(self.limit));
                }
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(err) => {
                    self.kill();
                    return Err(ToolError::Io(err));
                }
            }
        }
    }
}

#[allow(unsafe_code)]
fn kill_group(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid)
        && pid > 0
    {
        // SAFETY: `kill` has no memory-safety preconditions; the negative pid names the
        // process group created for this child only (`process_group(0)` at spawn).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Runs a tool to completion and returns its stdout (for short outputs: listings, queries).
pub(crate) fn run_to_end(
    tool: &Path,
    args: &[OsString],
    cwd: Option<&Path>,
    limit: Duration,
) -> Result<Vec<u8>, ToolError> {
    run_streaming(tool, args, cwd, limit, |reader| {
        let mut out = Vec::new();
        reader.read_to_end(&mut out)?;
        Ok(out)
    })
}

/// Runs a tool and hands its stdout, as a [`BufRead`], to `consume`. The reader returns a
/// `TimedOut` error once the deadline passes, and the tool is then killed. A tool that exits
/// with an error, or is killed, makes the result an error even if `consume` succeeded.
pub(crate) fn run_streaming<T>(
    tool: &Path,
    args: &[OsString],
    cwd: Option<&Path>,
    limit: Duration,
    consume: impl FnOnce(&mut StreamReader) -> io::Result<T>,
) -> Result<T, ToolError> {
    let (mut running, stdout) = spawn(tool, args, cwd, limit)?;
    let (sender, receiver) = mpsc::sync_channel(32);
    // A pump thread reads the pipe, so that the reader can give up at the deadline even when
    // the pipe stays open (held by a descendant of the tool).
    thread::spawn(move || pump(stdout, &sender));
    let mut reader = StreamReader::new(receiver, running.deadline);
    let consumed = consume(&mut reader);
    match consumed {
        Ok(value) => {
            // Drain what the consumer left, so the tool is not blocked on a full pipe.
            let mut sink = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(err) => {
                        running.kill();
                        return Err(if err.kind() == io::ErrorKind::TimedOut {
                            ToolError::TimedOut(limit)
                        } else {
                            ToolError::Io(err)
                        });
                    }
                }
            }
            running.finish().map(|()| value)
        }
        Err(err) => {
            let timed_out = err.kind() == io::ErrorKind::TimedOut;
            running.kill();
            let stderr = running.stderr;
            if timed_out {
                return Err(ToolError::TimedOut(limit));
            }
            // The tool's own failure explains a broken stream better than the read error.
            if let Ok(Some(status)) = running.child.try_wait()
                && !status.success()
                && let Ok(stderr) = stderr.recv_timeout(Duration::from_secs(1))
                && !stderr.trim().is_empty()
            {
                return Err(ToolError::Failed { status, stderr });
            }
            Err(ToolError::Io(err))
        }
    }
}

fn pump(mut stdout: std::process::ChildStdout, sender: &SyncSender<io::Result<Vec<u8>>>) {
    loop {
        let mut block = vec![0u8; 256 * 1024];
        match stdout.read(&mut block) {
            Ok(0) => return,
            Ok(n) => {
                block.truncate(n);
                if sender.send(Ok(block)).is_err() {
                    return;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                let _ = sender.send(Err(err));
                return;
            }
        }
    }
}

/// A [`BufRead`] over the blocks a pump thread reads from a tool's stdout, with a deadline.
pub(crate) struct StreamReader {
    receiver: Receiver<io::Result<Vec<u8>>>,
    deadline: Instant,
    block: Vec<u8>,
    at: usize,
    done: bool,
}

impl StreamReader {
    fn new(receiver: Receiver<io::Result<Vec<u8>>>, deadline: Instant) -> Self {
        Self { receiver, deadline, block: Vec::new(), at: 0, done: false }
    }
}

impl Read for StreamReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for StreamReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at >= self.block.len() && !self.done {
            let left = self.deadline.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(left) {
                Ok(Ok(block)) => {
                    self.block = block;
                    self.at = 0;
                }
                Ok(Err(err)) => {
                    self.done = true;
                    return Err(err);
                }
                Err(RecvTimeoutError::Disconnected) => self.done = true,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "tool timed out"));
                }
            }
        }
        Ok(&self.block[self.at.min(self.block.len())..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.block.len());
    }
}
