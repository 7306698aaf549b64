//! Reading a large listing while the kernel reads ahead of it.
//!
//! A listing that is not in the page cache (just copied, or evicted) is read from disk by the
//! thread that also cuts it into functions. Each `read` then waits for the disk, and the worker
//! threads wait for that thread. [`with_readahead`] runs a helper thread that asks the kernel
//! (`posix_fadvise(WILLNEED)`) to load the file a bounded window ahead of the reader, so that
//! disk reads overlap linting. On NCCL's 1.6 GB listing with an empty page cache this takes the
//! wall time from about 7.0 s to 5.7–6.0 s, about that of a cached file (`docs/performance.md`).
//!
//! The window is bounded so that a listing larger than memory does not evict its own unread
//! pages. On systems without `posix_fadvise` the reader is the plain file.

use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

/// How far ahead of the reader the kernel is asked to read.
const WINDOW: u64 = 256 << 20;
/// The size of one request.
const STEP: u64 = 16 << 20;

/// A file whose reads are counted for the read-ahead thread.
pub(crate) struct CountingFile<'a> {
    file: File,
    consumed: &'a AtomicU64,
    wake: Option<thread::Thread>,
    /// `consumed` at the last wake-up of the read-ahead thread.
    woken_at: u64,
}

impl Read for CountingFile<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        let total = self.consumed.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if total - self.woken_at >= STEP {
            self.woken_at = total;
            if let Some(thread) = &self.wake {
                thread.unpark();
            }
        }
        Ok(n)
    }
}

/// Calls `body` with a reader of `file` while a helper thread keeps the kernel reading up to
/// [`WINDOW`] bytes ahead of it.
pub(crate) fn with_readahead<T>(file: File, body: impl FnOnce(CountingFile<'_>) -> T) -> T {
    with_window(file, WINDOW, body)
}

/// [`with_readahead`] with a window of `window` bytes; files up to a quarter of it are read
/// without a helper.
fn with_window<T>(file: File, window: u64, body: impl FnOnce(CountingFile<'_>) -> T) -> T {
    let consumed = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let len = file.metadata().map_or(0, |meta| meta.len());
    let advice = file.try_clone().ok().filter(|_| len > window / 4 && supported());
    thread::scope(|scope| {
        let helper = advice.map(|advice| {
            let (done, consumed) = (&done, &consumed);
            scope.spawn(move || {
                let mut issued = 0u64;
                while issued < len && !done.load(Ordering::Relaxed) {
                    let limit = (consumed.load(Ordering::Relaxed) + window).min(len);
                    while issued < limit {
                        let step = STEP.min(len - issued);
                        if !will_need(&advice, issued, step) {
                            return;
                        }
                        issued += step;
                    }
                    thread::park_timeout(Duration::from_millis(50));
                }
            })
        });
        let wake = helper.as_ref().map(|h| h.thread().clone());
        // Stops the helper when `body` returns or unwinds: the scope waits for it.
        let _stop = Stop { done: &done, helper: wake.clone() };
        body(CountingFile { file, consumed: &consumed, wake, woken_at: 0 })
    })
}

/// Tells the read-ahead thread to finish, on drop.
struct Stop<'a> {
    done: &'a AtomicBool,
    helper: Option<thread::Thread>,
}

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(helper) = &self.helper {
            helper.unpark();
        }
    }
}

#[cfg(target_os = "linux")]
fn supported() -> bool {
    true
}

#[cfg(not(target_os = "linux"))]
fn supported() -> bool {
    false
}

/// Asks the kernel to start reading `len` bytes at `offset` into the page cache; returns
/// whether the request was accepted.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn will_need(file: &File, offset: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return false;
    };
    // SAFETY: `posix_fadvise` reads no memory of this process; the descriptor is open for as
    // long as `file` lives, and any advice is only a hint to the kernel.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn will_need(_: &File, _: u64, _: u64) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The reader yields the file's bytes unchanged, however the read-ahead thread runs, and
    /// a reader that stops early, even by unwinding, lets that thread finish.
    #[test]
    fn reads_the_whole_file_and_stops_the_helper() {
        let dir = std::env::temp_dir().join(format!("fencelint-readahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("listing.sass");
        let bytes: Vec<u8> = (0..(4 * STEP as usize + 12345)).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&bytes).unwrap();
        // A window of two requests: the helper waits for the reader several times.
        let window = 2 * STEP;
        let read = with_window(File::open(&path).unwrap(), window, |mut reader| {
            assert!(
                reader.wake.is_some() || !supported(),
                "no read-ahead thread for a file over the threshold"
            );
            let mut out = Vec::new();
            let mut buf = vec![0; 1 << 20];
            loop {
                let n = reader.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            out
        });
        assert!(read == bytes, "the bytes read differ from the file");

        // Without the stop on unwinding, the helper would wait for the reader forever and the
        // scope would never return.
        let file = File::open(&path).unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_window(file, window, |mut reader| {
                let mut buf = vec![0; 4096];
                reader.read_exact(&mut buf).unwrap();
                panic!("the reader stops");
            })
        }));
        assert!(unwound.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
