"""The first code that runs in a candidate's process, before the candidate: limits, then the unprivileged uid,
then the candidate itself.

The parent passes this file's text to the interpreter with `-c`, so it uses nothing outside the standard
library and is never imported by the project. It is not the boundary: the namespaces bubblewrap made are.
What it adds is that the candidate never runs as uid 0, never with a capability, and never with limits it
could raise again (soft and hard limits are set alike, and only root may raise a hard limit).

argv: candidate path, address-space bytes, CPU seconds, file-size bytes, open files, processes, mode
(mode "sandbox": inside bubblewrap; "unsandboxed": the user's explicit unsafe choice, with only an audit hook).
"""
import os
import resource
import sys

NOBODY = 65534  # bubblewrap.NOBODY: this file runs alone and cannot import it
SETUP_FAILED = 125  # tells the parent that the sandbox, not the candidate, failed


def set_limits(memory, cpu_seconds, file_size, open_files, processes):
    for kind, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_size),
                        (resource.RLIMIT_NOFILE, open_files), (resource.RLIMIT_NPROC, processes),
                        (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(kind, (value, value))
    # The soft limit sends SIGXCPU, the hard one SIGKILL a second later: a handler cannot keep a loop alive.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def drop_root():
    """Invoked as root, bubblewrap makes no user namespace, so uid 0 here is the host's root: leave it for
    nobody. setresuid from 0 to a non-zero uid clears every capability (no SECBIT_KEEP_CAPS is set)."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)


def unprivileged():
    """True when nothing is left to escalate with: no uid 0, no capability, and no_new_privs (so no setuid
    binary or file capability can give one back)."""
    with open("/proc/self/status", encoding="ascii") as f:
        status = dict(line.split(":", 1) for line in f)
    return (0 not in os.getresuid() and int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
            and status["NoNewPrivs"].strip() == "1")


def audit_hook(root):
    """Without a sandbox (the user chose it), the old second layer: refuse writes outside the working directory,
    processes, sockets and ctypes. A determined program gets around it; CPython's docs say so."""
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    path_events = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink",
                   "os.link", "os.truncate", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile"}
    denied = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "os.system", "os.exec",
              "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn",
              "ctypes.dlopen", "ctypes.dlsym", "os.kill", "os.killpg", "signal.pthread_kill", "sys.addaudithook"}

    def inside(path):
        if isinstance(path, int):
            return True
        p = os.path.realpath(os.fsdecode(path))
        return p == root or p.startswith(root + os.sep)

    def hook(event, args):
        if event in denied:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args[0] in ("ctypes", "_ctypes"):
            raise PermissionError("sandbox: ctypes is not allowed")
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if writing and path is not None and not inside(path):
                raise PermissionError(f"sandbox: writing {path} outside the sandbox directory")
        elif event in path_events:
            for a in args[:2]:
                if isinstance(a, (str, bytes, os.PathLike)) and not inside(a):
                    raise PermissionError(f"sandbox: {event} on {a} outside the sandbox directory")
    return hook


def main():
    path = sys.argv[1]
    memory, cpu_seconds, file_size, open_files, processes = map(int, sys.argv[2:7])
    sandboxed = sys.argv[7] == "sandbox"
    with open(path, encoding="utf-8") as f:
        source = f.read()
    set_limits(memory, cpu_seconds, file_size, open_files, processes)
    if sandboxed:
        drop_root()
        if not unprivileged():
            print("sandbox setup failed: the candidate would have run with privileges", file=sys.stderr)
            os._exit(SETUP_FAILED)
    else:
        sys.addaudithook(audit_hook(os.path.realpath(os.getcwd())))
    sys.argv = [path]
    return compile(source, path, "exec"), path


if __name__ == "__main__":  # run with -c; importing this file (a test, a linter) does nothing
    _code, _path = main()
    del main
    exec(_code, {"__name__": "__main__", "__file__": _path, "__builtins__": __builtins__})
