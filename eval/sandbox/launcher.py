"""The sandbox's launcher, run as `python -I -S launcher.py CONFIG_JSON` as the leader of a new process group (setsid).

Not imported: `eval.sandbox` runs this file as a script (standard library only). It joins the run's
cgroups, unshares the namespaces, forks the namespace's PID 1 (which builds the run's own root
filesystem and reports what worked on the status fd), which forks the user process (unprivileged uid, rlimits,
no-new-privs, seccomp filter, execve).
"""

import ctypes
import json
import os
import resource
import struct
import sys

cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
info = {
    "uid": os.getuid(),
    "netns": False,
    "pidns": False,
    "mountns": False,
    "ipcns": False,
    "userns": False,
    "private_tmp": False,
    "private_dirs": [],
    "readonly_root": False,
    "host_hidden": False,
    "proc": False,
    "seccomp": False,
    "cgroup_joined": False,
    "dropped_privileges": False,
    "errors": [],
}


def err(what):
    e = ctypes.get_errno()
    info["errors"].append(what + ": " + os.strerror(e))


def unshare(flags):
    fn = getattr(libc, "unshare", None)  # Linux only
    return fn is not None and fn(flags) == 0


def prctl(option, value):
    fn = getattr(libc, "prctl", None)  # Linux only
    return fn is not None and fn(option, value, 0, 0, 0) == 0


def mount(src, tgt, fstype, flags, data):
    def enc(s):
        return None if s is None else s.encode()

    return libc.mount(enc(src), enc(tgt), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def join_cgroups():
    """Move this process (and so every descendant) into the run's own cgroups."""
    joined = bool(cfg["cgroup_procs"])
    for procs in cfg["cgroup_procs"]:
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            joined = False
            info["errors"].append("join cgroup " + procs + ": " + str(e))
    info["cgroup_joined"] = joined


join_cgroups()
root = os.geteuid() == 0
net = NEWNET if not cfg["network"] else 0
if root:
    if unshare(NEWNS | NEWPID | NEWIPC | net):
        info.update(mountns=True, pidns=True, ipcns=True, netns=bool(net))
    else:
        err("unshare")
else:
    uid, gid = os.getuid(), os.getgid()
    if unshare(NEWUSER | NEWPID | NEWNS | NEWIPC | net):
        info.update(userns=True, pidns=True, mountns=True, ipcns=True, netns=bool(net))
        try:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open("/proc/self/" + name, "w") as f:
                    f.write(text)
        except OSError as e:
            info["errors"].append("id map: " + str(e))
    elif unshare(NEWUSER | NEWPID | net):  # older kernels: no mount/IPC namespace in a user namespace
        info.update(userns=True, pidns=True, netns=bool(net))
    else:
        err("unshare(user)")


def _bind(src, dst, writable=False):
    """Bind host path `src` at `dst` (inside the new root), read-only unless `writable`."""
    if os.path.isdir(src):
        os.makedirs(dst, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "wb").close()
    if not mount(src, dst, None, MS_BIND | MS_REC, None):
        err("bind " + src)
        return False
    if writable:
        return True
    st = os.statvfs(dst)
    keep = st.f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    if st.f_flag & 4096:  # ST_RELATIME
        keep |= MS_RELATIME
    if not mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, None):
        err("read-only " + src)
        return False
    return True


_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def setup_mounts():
    """Build a new root that holds only what a run needs, and make it this namespace's `/`.

    The new root is a small tmpfs with read-only binds of the interpreter and the system libraries,
    its site-packages hidden, the allowed package directories under /lw-packages, a few device
    nodes, a fresh /proc and private tmpfs views of /tmp, /var/tmp, /dev/shm and /run. The host's
    root is detached afterwards: no other host path (the project, home directories, dataset or hub
    caches) exists inside, whatever its permissions.
    """
    # Everything created below lives in this mount namespace only and vanishes with it.
    if not mount(None, "/", None, MS_REC | MS_PRIVATE, None):
        return err("make / private")
    with open(cfg["script"], "rb") as f:  # re-created inside the private /tmp below
        script = f.read()
    new = cfg["root_dir"]
    if not mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"):
        return err("tmpfs root")
    ok = True
    size = "size=" + str(cfg["tmpfs_mb"]) + "m,mode=1777"
    for real in cfg["private_dirs"]:
        os.makedirs(new + real, mode=0o755, exist_ok=True)
        if mount("tmpfs", new + real, "tmpfs", MS_NOSUID | MS_NODEV, size):
            info["private_dirs"].append(real)
        else:
            err("tmpfs " + real)
    for link, target in cfg["symlinks"]:
        os.makedirs(os.path.dirname(new + link), mode=0o755, exist_ok=True)
        os.symlink(target, new + link)
    for src, dst in cfg["binds"]:
        ok = _bind(src, new + dst) and ok
    for src in cfg["devices"]:
        ok = _bind(src, new + src, writable=True) and ok
    for masked in cfg["masks"]:  # site-packages of the interpreter: an empty, read-only view
        if os.path.isdir(new + masked) and not mount(
            "tmpfs", new + masked, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555"
        ):
            ok = False
            err("hide " + masked)
    workdir = os.path.dirname(cfg["script"])
    os.makedirs(new + workdir, mode=0o700, exist_ok=True)
    with open(new + cfg["script"], "wb") as f:
        f.write(script)
    if cfg["drop"]:
        os.chown(new + workdir, cfg["uid"], cfg["uid"])
        os.chown(new + cfg["script"], cfg["uid"], cfg["uid"])
    os.makedirs(new + "/proc", mode=0o555, exist_ok=True)
    # Mounted before the host's /proc goes away (a user namespace may only mount a procfs while
    # one is fully visible); it shows this PID namespace's processes only.
    if mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None):
        info["proc"] = True
    else:
        err("mount proc")
    old = new + "/.old"
    os.mkdir(old, 0o700)
    nr = _PIVOT_ROOT.get(os.uname().machine)
    if nr is None or libc.syscall(nr, new.encode(), old.encode()) != 0:
        return err("pivot_root")
    os.chdir("/")
    if libc.umount2(b"/.old", 2) != 0:  # MNT_DETACH
        return err("detach the host root")
    os.rmdir("/.old")
    if not mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None):
        ok = False
        err("read-only /")
    os.chdir(workdir)
    info["private_tmp"] = "/tmp" in info["private_dirs"]
    info["readonly_root"] = ok
    info["host_hidden"] = True
    info["interpreter_reachable"] = True


# seccomp: refuse socket(AF_UNIX) (no host Unix socket is reachable, whatever its path or
# permissions), io_uring (which could open sockets without the socket syscall) and any syscall of
# another ABI (x32, i386), which would bypass the numbers checked here.
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}


def install_seccomp():
    arch = _SECCOMP_ARCH.get(os.uname().machine)
    if arch is None:
        info["errors"].append("seccomp: no filter for " + os.uname().machine)
        return False
    audit_arch, nr_socket = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    enosys, eacces, allow = 0x00050000 | 38, 0x00050000 | 13, 0x7FFF0000
    prog = [
        (ld, 0, 0, 4),  # arch
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, enosys),
        (ld, 0, 0, 0),  # syscall number
        (jge, 0, 1, 0x40000000),  # x32 ABI
        (ret, 0, 0, enosys),
        (jeq, 0, 1, 425),  # io_uring_setup
        (ret, 0, 0, enosys),
        (jeq, 0, 3, nr_socket),
        (ld, 0, 0, 16),  # args[0]: the address family
        (jeq, 0, 1, 1),  # AF_UNIX
        (ret, 0, 0, eacces),
        (ret, 0, 0, allow),
    ]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    # prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0


def run_user():
    os.close(status_fd)
    if info["dropped_privileges"]:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for name, value in cfg["limits"].items():
        lim = getattr(resource, name)
        resource.setrlimit(lim, (value, value))
    if cfg["seccomp"] and not install_seccomp():
        raise OSError("seccomp filter could not be installed: " + os.strerror(ctypes.get_errno()))
    os.execve(cfg["python"], [cfg["python"], "-I", "-S", cfg["script"], *cfg["argv"]], cfg["env"])


pid = os.fork()
if pid:  # launcher: outside the PID namespace, just relay the exit status
    _, st = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))

# PID 1 of the new namespace (or a plain child when namespaces failed)
prctl(1, 9)  # PR_SET_PDEATHSIG=SIGKILL: die with the launcher
info["interpreter_reachable"] = cfg["interpreter_traversable"]
if info["mountns"]:
    setup_mounts()
info["dropped_privileges"] = root and info["interpreter_reachable"] and cfg["drop"]
if root and not info["dropped_privileges"]:
    info["errors"].append("running as root: could not make the interpreter reachable for the sandbox uid")
if cfg["seccomp"]:
    info["seccomp"] = os.uname().machine in _SECCOMP_ARCH
# Fail closed: a mount namespace whose new root could not be built still shows the host's files.
refuse = info["mountns"] and not info["host_hidden"]
if refuse:
    info["errors"].append("the run's own root filesystem could not be built")
os.write(status_fd, (json.dumps(info) + "\n").encode())
if refuse:
    os.write(2, ("sandbox setup failed: " + "; ".join(info["errors"])[-500:] + "\n").encode())
    os._exit(125)
child = os.fork()
if child == 0:
    try:
        run_user()
    except BaseException as e:
        os.write(2, ("sandbox setup failed: " + repr(e) + "\n").encode())
        os._exit(125)
_, st = os.waitpid(child, 0)
sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
os.write(status_fd, (json.dumps({"signal": sig}) + "\n").encode())
os._exit(os.waitstatus_to_exitcode(st) if not sig else 128 + sig)
