//! Child processes that never outlive the program that started them.
//!
//! Every process is spawned from one long-lived thread with `PR_SET_PDEATHSIG`, so the
//! kernel kills it if this program dies (a test binary killed by CI, `kill -9` of
//! `local-cluster`): the signal follows the *thread* that forked, which is why no caller
//! thread (a test's) may do the spawning. On a normal exit an `atexit` hook stops every
//! process still registered and removes the registered directories, since the test harness
//! exits without running the destructors of statics.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What the `atexit` hook cleans up.
struct Registry {
    pids: Vec<u32>,
    dirs: Vec<PathBuf>,
    /// Namespace holders (see [`crate::isolation`]): PID and the fd of their standard input.
    holders: Vec<(u32, i32)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { pids: Vec::new(), dirs: Vec::new(), holders: Vec::new() });

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("process-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The sender lives in a static, so this thread lives as long as the program.
            })
            .expect("spawn the process-spawner thread");
        // SAFETY: `cleanup_at_exit` is an `extern "C" fn()` that does not unwind.
        unsafe { libc::atexit(cleanup_at_exit) };
        Mutex::new(tx)
    })
}

extern "C" fn cleanup_at_exit() {
    let Ok(registry) = REGISTRY.lock() else {
        return;
    };
    for &pid in &registry.pids {
        // SAFETY: plain syscalls on PIDs this program started and has not reaped.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
            libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
    }
    // A holder tears its cluster down once its standard input closes: wait for it (bounded)
    // before the directories go, since the cluster's processes have files open there.
    for &(_, fd) in &registry.holders {
        // SAFETY: closing the write end of a pipe this program owns.
        unsafe { libc::close(fd) };
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for &(pid, _) in &registry.holders {
        while Instant::now() < deadline {
            // SAFETY: reaping a child this program started.
            let reaped = unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
            if reaped != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for dir in &registry.dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Registers a namespace holder: at exit its standard input (`fd`) is closed and it is
/// waited for before the registered directories are removed.
pub fn register_holder(pid: u32, fd: i32) {
    let _ = spawner();
    REGISTRY.lock().expect("registry lock").holders.push((pid, fd));
}

/// The holder was stopped in order (its fd is closed by its owner).
pub fn forget_holder(pid: u32) {
    REGISTRY.lock().expect("registry lock").holders.retain(|&(p, _)| p != pid);
}

/// Removes `dir` when the program exits (unless [`forget_dir`] is called first).
pub fn remove_at_exit(dir: &Path) {
    let _ = spawner();
    REGISTRY.lock().expect("registry lock").dirs.push(dir.to_path_buf());
}

/// Keeps `dir` at exit after all (e.g. to look at logs after a failure).
pub fn forget_dir(dir: &Path) {
    REGISTRY.lock().expect("registry lock").dirs.retain(|d| d != dir);
}

/// Spawns `command` so that it dies with this program; stop it with [`Supervised::stop`].
pub fn spawn(mut command: Command) -> std::io::Result<Supervised> {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure only makes async-signal-safe syscalls (prctl, getppid).
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .expect("spawner lock")
        .send((command, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    let child = rx.recv().map_err(|_| std::io::Error::other("the spawner thread is gone"))??;
    REGISTRY.lock().expect("registry lock").pids.push(child.id());
    Ok(Supervised { child: Some(child) })
}

/// A running child process, stopped (SIGTERM, then SIGKILL) on [`Supervised::stop`] or drop.
#[derive(Debug)]
pub struct Supervised {
    child: Option<Child>,
}

impl Supervised {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether it has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        // SAFETY: signalling a child we have not reaped yet.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
        }
        let _ = child.wait();
        REGISTRY.lock().expect("registry lock").pids.retain(|&p| p != pid);
    }

    /// SIGKILL at once (a crash, for tests).
    pub fn kill(&mut self) {
        self.stop(Duration::ZERO);
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// A free TCP port on 127.0.0.1 (bound and released: the caller starts its server on it),
/// never one this process was given before: a cluster's servers listen inside its network
/// namespace, where the host's kernel does not see them, so it may offer a port again that
/// one of them already holds (seen: the models registry's `bind: address already in use`).
pub fn free_port() -> std::io::Result<u16> {
    static GIVEN: std::sync::Mutex<Option<std::collections::HashSet<u16>>> = std::sync::Mutex::new(None);
    for _ in 0..1000 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if given.get_or_insert_with(Default::default).insert(port) {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no port this process was not given before"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_port_never_gives_a_port_twice() {
        let ports: Vec<u16> = (0..300).map(|_| super::free_port().unwrap()).collect();
        let unique: std::collections::HashSet<&u16> = ports.iter().collect();
        assert_eq!(unique.len(), ports.len());
    }
}
